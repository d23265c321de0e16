"""slangpy 0.43.1's ``test_array.py`` (from the wheel's ``tests/slangpy_tests``), called through
slangspec: arrays as parameters and as fields, and vectorizing over Python lists and over
structs.

Where the original passes a list of dicts (an array of structs, or one struct per call), the
port passes it too, and also the one dict of the fields' tensors over the list's elements that
slangspec binds it as. Not ported: ``StructuredBuffer`` and
``RWStructuredBuffer`` parameters and fields (slangpy buffers; a ``Tensor<T, 1>`` is the form
here), and ``map`` over a struct argument (only a tensor fed elementwise is mapped: its fields'
tensors broadcast instead, as the 2-D case below shows). The original skips
``test_untyped_struct_array``.
"""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = r"""
import slangpy;

int sum(int[4] data) { int s = 0; for (int i = 0; i < 4; i++) s += data[i]; return s; }

struct Val { int x; }
int sum_vals(Val[4] vals) { int s = 0; for (int i = 0; i < 4; i++) s += vals[i].x; return s; }
int inc(int val) { return val + 1; }
float double_it(float x) { return x * 2.0; }
int inc_val(Val val) { return val.x + 1; }

struct Holder { Tensor<float, 1> x; }
float inc_held(Holder h) { return h.x[0] + 1; }
float add_held(Holder h, float v) { return h.x[0] + v; }

struct Foo { int vals[4]; }
int sum_foo(Foo foo) { int s = 0; for (int i = 0; i < 4; i++) s += foo.vals[i]; return s; }

struct Inner { int x; }
struct Outer { Inner items[4]; }
int sum_items(Outer o) { int s = 0; for (int i = 0; i < 4; i++) s += o.items[i].x; return s; }

struct Middle { int vals[4]; }
struct Nest { Middle m; int scale; }
int sum_nested(Nest n)
{
    int s = 0;
    for (int i = 0; i < 4; i++) s += n.m.vals[i];
    return s * n.scale;
}

struct Pair { int vals[2]; }
int pair_sum(Pair p) { return p.vals[0] + p.vals[1]; }
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("arrays", SOURCE, cache_dir=cache_dir)


@pytest.fixture
def ints(tdev):
    return lambda *values: torch.tensor(values, dtype=torch.int32, device=tdev)


def test_simple_array(m):
    assert m.sum([1, 2, 3, 4]).item() == 10


def test_typed_struct_array(m, ints):
    assert m.sum_vals({"_type": "Val", "x": ints(1, 2, 3, 4)}).item() == 10
    assert m.sum_vals([{"x": x, "_type": "Val"} for x in (1, 2, 3, 4)]).item() == 10


def test_vectorize_array(m):
    result = m.inc([1, 2, 3, 4], _result="numpy")
    assert result.shape == (4,) and result.dtype.name == "int32" and result.tolist() == [2, 3, 4, 5]


def test_vectorize_float_array(m):
    result = m.double_it([1.5, 2.5, 3.5, 4.5], _result="numpy")
    assert result.dtype.name == "float32" and result.tolist() == [3.0, 5.0, 7.0, 9.0]


def test_vectorize_struct_array(m, ints):
    for vals in (
        {"_type": "Val", "x": ints(1, 2, 3, 4)},
        [{"x": x, "_type": "Val"} for x in (1, 2, 3, 4)],
    ):
        result = m.inc_val(vals, _result="numpy")
        assert result.dtype.name == "int32" and result.tolist() == [2, 3, 4, 5]


def test_vectorize_struct_with_tensor_array(m, tdev):
    held = torch.arange(1.0, 5.0, device=tdev)[:, None]
    for holders in ({"_type": "Holder", "x": held}, [{"_type": "Holder", "x": x} for x in held]):
        result = m.inc_held(holders, _result="numpy")
        assert result.dtype.name == "float32" and result.tolist() == [2.0, 3.0, 4.0, 5.0]


def test_2d_vectorize_struct_with_tensor_array(m, tdev):
    held = torch.arange(1.0, 5.0, device=tdev)[:, None, None]
    result = m.add_held(
        {"_type": "Holder", "x": held}, torch.tensor([5.0, 10, 15, 20], device=tdev)
    )
    want = [[6, 11, 16, 21], [7, 12, 17, 22], [8, 13, 18, 23], [9, 14, 19, 24]]
    assert result.tolist() == want


def test_struct_with_scalar_array_field(m):
    assert m.sum_foo({"vals": [1, 2, 3, 4], "_type": "Foo"}).item() == 10


def test_struct_with_struct_array_field(m, ints):
    assert m.sum_items({"items": {"x": ints(10, 20, 30, 40)}, "_type": "Outer"}).item() == 100


def test_nested_struct_with_array_field(m):
    nest = {"m": {"vals": [1, 2, 3, 4], "_type": "Middle"}, "scale": 2, "_type": "Nest"}
    assert m.sum_nested(nest).item() == 20


def test_broadcast_array_to_scalar(m, ints):
    pairs = {"vals": ints(1, 2, 3, 4, 5, 6).reshape(3, 2), "_type": "Pair"}
    result = m.pair_sum(pairs, _result="numpy")
    assert result.dtype.name == "int32" and result.tolist() == [3, 7, 11]
    with pytest.raises(
        TypeError, match=r"pair_sum: map: parameter 'p': only a tensor fed elementwise"
    ):
        m.pair_sum.map((0,))(pairs)
