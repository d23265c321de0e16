"""slangpy 0.43.1's ``test_packed_arg.py`` and ``test_map_type_sizes.py`` (from the wheel's
``tests/slangpy_tests``), called through slangspec: 64- and 32-bit integers from Python ints,
a type mapping that names a parameter's own type, and the values slangpy packs ahead of a call
(``spy.pack``), which slangspec takes as they are.

A list of dicts for a struct parameter is vectorized over, as slangpy does, and so is the one
dict whose fields are tensors over the list's elements.
"""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = r"""
import slangpy;

int64_t add_numbers(int64_t a, int64_t b) { return a + b; }
vector<float, N> add_generic<let N : int>(vector<float, N> a, vector<float, N> b) { return a + b; }
T add_typed<T : __BuiltinFloatingPointType>(T a, T b) { return a + b; }
uint32_t add_uint32s(uint32_t a, uint32_t b) { return a + b; }
int copy(int val) { return val; }

struct Packed { int value; }
int copy_packed(Packed val) { return val.value; }

struct Val { int x; }
int inc(Val val) { return val.x + 1; }

struct Holder { Tensor<float, 1> x; }
float inc_first(Holder h) { return h.x[0] + 1; }
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("packed_and_sized", SOURCE, cache_dir=cache_dir)


def test_add_int64s_explicitly_typed_and_implicitly(m):
    assert m.add_numbers.map("int64_t", "int64_t")(5000000000, 10000000000).item() == 15000000000
    assert m.add_numbers(5000000000, 10000000000).item() == 15000000000


def test_a_type_mapping_to_another_type_is_refused_by_parameter(m):
    with pytest.raises(
        TypeError,
        match=r"^packed_and_sized::add_numbers: map: parameter 'b': slangpy's type mapping "
        r"\('float'\) is taken only where it names the parameter's own type \(int64_t\)",
    ):
        m.add_numbers.map("int64_t", "float")


def test_a_type_mapping_gives_a_generic_its_arguments(m, tdev):
    """slangpy's ``map("float3")`` for ``vector<float, N>`` (N = 3) and ``map("float")`` for
    ``T``: the call goes to the function named with them (``add_generic<3>``), which then
    checks the tensors against them."""
    a, b = torch.randn(4, 3, device=tdev), torch.randn(4, 3, device=tdev)
    torch.testing.assert_close(m.add_generic.map("float3", "float3")(a, b), a + b)
    torch.testing.assert_close(m.add_typed.map("float", b="float")(a, b), a + b)
    with pytest.raises(ValueError, match=r"add_generic<3>: argument 1 \('a'\): expected a tensor"):
        m.add_generic.map("float3")(a[:, :2], b[:, :2])
    with pytest.raises(TypeError, match=r"add_generic: map: .* generic N two values, 3 and 4$"):
        m.add_generic.map("float3", "float4")


def test_add_uint32s(m):
    assert m.add_uint32s(0x8000000, 1).item() == 0x8000001


def test_what_slangpy_packs_is_passed_as_it_is(m):
    assert m.copy(42).item() == 42
    assert m.copy_packed({"_type": "Packed", "value": 42}).item() == 42


def test_a_struct_vectorized_over_its_fields(m, tdev):
    x = torch.tensor([1, 2, 3, 4], dtype=torch.int32, device=tdev)
    result = m.inc({"_type": "Val", "x": x}, _result="numpy")
    assert result.dtype.name == "int32" and result.tolist() == [2, 3, 4, 5]
    held = torch.arange(1.0, 5.0, device=tdev)[:, None]
    assert m.inc_first({"_type": "Holder", "x": held}).tolist() == [2.0, 3.0, 4.0, 5.0]


def test_a_list_of_dicts_is_vectorized_over_and_one_of_other_fields_refused(m):
    result = m.inc([{"x": 1, "_type": "Val"}, {"x": 2, "_type": "Val"}], _result="numpy")
    assert result.tolist() == [2, 3]
    with pytest.raises(
        TypeError,
        match=r"^packed_and_sized::inc: argument 1 \('val'\): cannot pass a list of dicts with "
        r"different fields \(\['_type', 'x'\] and \['_type', 'y'\]\); expected the fields of "
        r"one struct in each$",
    ):
        m.inc([{"x": 1, "_type": "Val"}, {"y": 2, "_type": "Val"}])


def test_a_list_of_dicts_of_numbers_in_compiled_code_asks_for_tensors(m):
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(lambda: m.inc([{"x": 1, "_type": "Val"}]), fullgraph=True)
    with pytest.raises(Exception, match="cannot pass a list of dicts holding Python numbers"):
        compiled()
