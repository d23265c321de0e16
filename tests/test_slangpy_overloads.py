"""slangpy's type-resolution cases (slangpy/tests/slangpy_tests/test_type_resolution.py, on the
functions of its type_resolution.slang) where they bear on overloads, with torch tensors in
place of slangpy buffers and tensors.

slangpy resolves each overload on its own and calls a name only where exactly one overload
resolves (``build_and_resolve`` over several functions, ``resolve_function`` over an overload
set). Each case here makes an overload set of two of its functions (their bodies as there:
each returns its argument) and takes slangpy's outcome for the set from its table's rows for
the two functions alone, quoted beside each case.

Not ported, each for a reason:

- slangpy vector and matrix values (``spy.float3(...)``, ``spy.float3x3.identity()``) where a
  tensor or a tuple of Python numbers stands for them; ``spy.int1`` into a scalar, ``range``,
  and a list of numbers for a scalar parameter (slangspec takes a tuple for a vector or an
  array only).
- Buffers, structured and byte-address buffers, pointers, textures, TensorView and
  DiffTensorView, interfaces, dicts with ``_type`` and arrays of structs: no torch argument
  stands for them here.
- Tensors of vector, matrix or array elements (``_Tensor("float3", 1)``): a torch tensor has
  scalar elements, and its trailing dimensions take those shapes, as the tensor-of-scalars rows
  are ported.
- Generic extents (``vector<T, N>``, ``float[N]``) inferred from shapes: not called yet (a
  clear TypeError, docs/calling.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import slangspec

TOL = {"rtol": 0.0, "atol": 0.0}  # every function returns its argument: exact

SOURCE = """
import slangpy;
float scalar(float a) { return a; }
int scalar(int a) { return a; }

float precision(float a) { return a; }
half precision(half a) { return a; }

float widths(float a) { return a; }
float3 widths(float3 a) { return a; }

float3 rows(float3 a) { return a; }
float3x3 rows(float3x3 a) { return a; }

float[4] array(float[4] a) { return a; }
float array(float a) { return a; }

void whole(ITensor<float, 2> a) { return; }
float whole(float a) { return a; }

void diff(IDiffTensor<float, 2> a) { return; }
int diff(int a) { return a; }

T generic<T>(T a) { return a; }
int generic(int a) { return a; }
"""

AMBIGUOUS, NONE = "ambiguous", "none"


@pytest.fixture(scope="module")
def tr(cache_dir):
    return slangspec.load_source("type_resolution", SOURCE, cache_dir=cache_dir)


def f32(*shape: int) -> Callable[[str], torch.Tensor]:
    return lambda device: torch.rand(*shape, device=device)


def i32(*shape: int) -> Callable[[str], torch.Tensor]:
    return lambda device: torch.randint(-5, 5, shape, dtype=torch.int32, device=device)


def f16(*shape: int) -> Callable[[str], torch.Tensor]:
    return lambda device: torch.rand(*shape, device=device).half()


def value(v: Any) -> Callable[[str], Any]:
    return lambda _device: v


# (overload set, argument, the overload slangpy's rule picks, or AMBIGUOUS or NONE)
CASES = [
    # ("func_float", 0, "float", 0), ("func_int", 42, "int", 0)
    ("scalar", value(42), AMBIGUOUS),
    # ("func_float", _Tensor("float", 1, False), "float", 1); int: no row, a float tensor
    # never feeds an int parameter ("we don't implicit cast AND vectorize")
    ("scalar", f32(5), "float scalar(float a)"),
    # ("func_float", _Tensor("int", 1, False), None, None); int takes its own dtype
    ("scalar", i32(5), "int scalar(int a)"),
    ("scalar", f32(3, 3), "float scalar(float a)"),  # ("func_float", _Tensor("float", 2..
    # ("func_half", 1.0, "half", 0), ("func_float", 1.5, "float", 0)
    ("precision", value(1.0), AMBIGUOUS),
    # ("func_half", 2, "half", 0), ("func_float", 0, "float", 0)
    ("precision", value(2), AMBIGUOUS),
    # ("func_half", _Tensor("half", 1, False), "half", 1)
    ("precision", f16(5), "half precision(half a)"),
    ("precision", f32(5), "float precision(float a)"),
    # ("func_float", _Tensor("float", 2, True), "float", 2),
    # ("func_float3", _Tensor("float", 2, True), "vector<float,3>", 1)
    ("widths", f32(3, 3), AMBIGUOUS),
    # ("func_float3", _Tensor("float4", 1, True), None, None): trailing 4 is no float3
    ("widths", f32(5, 4), "float widths(float a)"),
    # ("func_float3", _Tensor("float", 2, True), "vector<float,3>", 1),
    # ("func_float3x3", _Tensor("float", 2, True), "matrix<float,3,3>", 1)
    ("rows", f32(3, 3), AMBIGUOUS),
    # ("func_float3x3", _Tensor("float4x4", 1, True), None, None); float3 takes rows of 3
    ("rows", f32(5, 4, 3), "vector<float,3> rows(vector<float,3> a)"),
    # ("func_float_array", _Tensor("float", 1, True), "float[4]", 3),
    # ("func_float", _Tensor("float", 1, False), "float", 1)
    ("array", f32(2, 4), AMBIGUOUS),
    # ("func_float_array", ...) needs a trailing 4; ("func_float2_array", [1, 2, 3, 4], None..)
    ("array", f32(2, 5), "float array(float a)"),
    # ("func_iTensor", _Tensor("float", 2, False), "Tensor<float,2>", 2), and func_float
    ("whole", f32(3, 3), AMBIGUOUS),
    # ("func_iTensor", ...) needs rank 2 or more; func_float takes rank 1
    ("whole", f32(5), "float whole(float a)"),
    # ("func_iDiffTensor", _Tensor("int", 2, False), None, None), func_int takes it
    ("diff", i32(3, 3), "int diff(int a)"),
    # ("func_iDiffTensor", _Tensor("float", 2, False), "PrimalTensor<float,2>", 2)
    ("diff", f32(3, 3), "void diff(IDiffTensor<float, 2> a)"),
    # ("func_generic", 42, "int", 0), ("func_int", 42, "int", 0)
    ("generic", value(42), AMBIGUOUS),
    # ("func_half", _Tensor("half", 1, False), ...): neither a generic nor an int takes a
    # tuple; ("func_generic", spy.float1(2.5), None, None)
    ("generic", value((1.0, 2.0)), NONE),
    # ("func_int", _Tensor("float", ...)) fails, ("func_iDiffTensor", _Tensor("int"...)) fails
    ("diff", f16(3, 3), NONE),
    # ("func_float3", 1.0, "float", 0), slangpy's scalar-to-vector cast, beside func_float
    ("widths", value(1.0), AMBIGUOUS),
    # ("func_float", [1.5], "float", 1), a list spread over a scalar, beside the vector's
    ("widths", value((1.0, 2.0, 3.0)), AMBIGUOUS),
    ("array", value((1.0, 2.0, 3.0, 4.0)), AMBIGUOUS),
]


@pytest.mark.parametrize(
    ("name", "make", "expected"), CASES, ids=[f"{n}-{e.split('(')[0]}" for n, _, e in CASES]
)
def test_an_overload_set_resolves_as_slangpy_resolves_it(tr, tdev, name, make, expected):
    fn, arg = tr[name], make(tdev)
    if expected == AMBIGUOUS:
        with pytest.raises(TypeError, match=rf"type_resolution::{name}: the call .* is ambiguous"):
            fn(arg)
        return
    if expected == NONE:
        with pytest.raises(TypeError, match=rf"type_resolution::{name}: none of its 2 overloads"):
            fn(arg)
        return
    assert fn.plan(arg).overload == expected
    out = fn(arg)
    if expected.startswith("void"):
        assert out is None
    else:
        torch.testing.assert_close(out, arg, **TOL)


# Where slangspec's resolution of one function already refuses what slangpy takes, an overload
# set resolves to the one overload left, where slangpy finds the call ambiguous.
DIFFERENCES = [
    # ("func_int", 1.5, "int", 0) "passes, as invalid fractional value has to be detected at
    # runtime": slangspec never passes a Python float to an int parameter.
    ("scalar", value(1.5), "float scalar(float a)"),
    # ("func_generic", 3.5, "float", 0) and ("func_int", 1.5, "int", 0), as above.
    ("generic", value(3.5), "T generic(T a)"),
]


@pytest.mark.parametrize(
    ("name", "make", "expected"), DIFFERENCES, ids=[n for n, _, _ in DIFFERENCES]
)
def test_where_slangspec_takes_less_the_set_resolves_where_slangpy_finds_it_ambiguous(
    tr, tdev, name, make, expected
):
    fn, arg = tr[name], make(tdev)
    assert fn.plan(arg).overload == expected
    torch.testing.assert_close(fn(arg), torch.tensor(arg, device=tdev), **TOL)
