"""slangpy 0.43.1's ``test_vectorizing.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec: where the original reads slangpy's bindings (``debug_build_call_data``: each
argument's vector mapping and type), this checks what the call gives for them, its shape and
values.

Refused here, each naming the function and the argument: a Python float or a float32 tensor for
an ``int`` parameter, mapped or not (slangpy converts; pass an int32 tensor, as torch would ask
for ``x.int()``). A type mapping for a generic ``T`` (``map("float")``) calls ``m["f<float>"]``,
as slangpy specializes it. slangpy's ``strict_broadcasting`` option has no
counterpart: arguments broadcast as torch broadcasts, so its failing case is not ported.
"""

from __future__ import annotations

import pytest
import slangpy
import torch

import slangspec

SOURCE = r"""
import slangpy;
float foo(float a) { return a; }
float intfoo(int a) { return float(a); }
T genericfoo<T>(T a) { return a; }
T genericconstrainedfoo<T : IFloat>(T a) { return a; }
float3 foo3(float3 a) { return a; }
float add(float a, float b) { return a + b; }
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("vectorizing", SOURCE, cache_dir=cache_dir)


@pytest.fixture
def buffer(tdev):
    return torch.arange(10.0, device=tdev)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.foo.map(())(10.0),
        lambda m: m.foo.map("float")(10.0),
        lambda m: m.foo(10.0),
        lambda m: m.genericfoo(10.0),
        lambda m: m.genericconstrainedfoo(10.0),
    ],
    ids=["explicit", "explicit type", "implicit", "generic", "generic constrained"],
)
def test_no_vectorization(m, call):
    result = call(m)
    assert result.shape == () and result.dtype == torch.float32 and result.item() == 10.0


@pytest.mark.parametrize(
    "call",
    [
        lambda m, b: m.foo(b),
        lambda m, b: m.genericfoo.map((0,))(b),
        lambda m, b: m.genericconstrainedfoo.map((0,))(b),
        lambda m, b: m.genericconstrainedfoo.map("float")(b),
    ],
    ids=["implicit", "generic explicit", "generic constrained explicit", "generic typed"],
)
def test_1d_vectorization(m, buffer, call):
    torch.testing.assert_close(call(m, buffer), buffer)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m, b: m.intfoo(10.0), "argument 1 \\('a'\\): expected an int32 tensor, a Python"),
        (lambda m, b: m.intfoo(b), "argument 1 \\('a'\\): expected an int32 tensor, got a float32"),
        (lambda m, b: m.intfoo.map((0,))(b), "argument 1 \\('a'\\): expected an int32 tensor"),
        (lambda m, b: m.intfoo.map(float)(b), "map: parameter 'a': expected a tuple of distinct"),
    ],
    ids=["implicit cast", "float to int 1d", "mapped float to int", "cast"],
)
def test_refused_conversions_name_the_argument(m, buffer, call, message):
    with pytest.raises(TypeError, match=f"^vectorizing::\\w+: {message}"):
        call(m, buffer)


def test_implicit_tensor_to_vector(m, tdev):
    a = torch.randn(10, 3, device=tdev)
    torch.testing.assert_close(m.foo3(a), a)


def test_none_strict_implicit_dimension_adding_vectorization(m, buffer, tdev):
    a = torch.randn(10, 10, device=tdev)
    torch.testing.assert_close(m.add(a, buffer), a + buffer)


@pytest.mark.parametrize("vector", [slangpy.float3, lambda *v: v], ids=["float3", "tuple"])
def test_broadcast_vector(m, tdev, vector):
    result = torch.empty(3, device=tdev)
    m.add(vector(1.0, 2.0, 3.0), vector(4.0, 5.0, 6.0), _result=result)
    assert result.tolist() == [5.0, 7.0, 9.0]
