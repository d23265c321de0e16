"""slangpy 0.43.1's ``test_tensor.py`` (from the wheel's ``tests/slangpy_tests``), called through
slangspec on the wheel's ``test_tensor.slang``: whole tensors copied through each tensor type,
element by element, an affine map of broadcast tensors through arrays, tensors, interfaces and a
generic, and bilinear ``sample``.

Each tensor type's copy runs in two of the original's six spellings (indices one by one, and
``load``/``store`` with an array of them): the others differ only inside the function, in how
it writes an index. Refused, naming the argument: ``IRWDiffTensor`` destinations and
``PrimalTensor``/``WPrimalTensor`` parameters (the migration page says what to declare
instead). ``matrix_vector_matrices`` declares four biases for three rows, of which the
original's test passes three; it gets four here. Not ported: ``test_existential_type_bug``
compiles a program for an entry point of its own, which is not a call, and the original skips
both ``DiffTensor``/``PrimalTensor`` sampling cases.
"""

from __future__ import annotations

import pytest
import torch
from slangpy_wheel import wheel_shader

import slangspec

SHADER = wheel_shader("test_tensor.slang")
TOL = {"rtol": 1e-4, "atol": 1e-4}  # the original's bound on the largest difference


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load(SHADER, cache_dir=cache_dir)


@pytest.mark.parametrize("kind", ["itensor", "tensor", "difftensor"])
@pytest.mark.parametrize("spelling", ["each_index", "array_loadstore"])
def test_simple_copy(m, tdev, kind, spelling):
    src = torch.randn(1000, 3, device=tdev)
    dst = torch.zeros_like(src)
    m[f"copy_{kind}_{spelling}"](slangspec.grid(tuple(src.shape)), src, dst)
    assert torch.equal(dst, src)


@pytest.mark.parametrize(
    "function, argument",
    [
        ("copy_idifftensor_each_index", "3 \\('dst'\\): expected a tensor type slangspec binds"),
        ("copy_primaltensor_each_index", "2 \\('src'\\): expected a tensor type slangspec binds"),
    ],
)
def test_tensor_types_not_bound_are_refused_by_argument(m, tdev, function, argument):
    src = torch.randn(10, 3, device=tdev)
    with pytest.raises(TypeError, match=f"^test_tensor::{function}: argument {argument}"):
        m[function](slangspec.grid(tuple(src.shape)), src, torch.zeros_like(src))


def test_simple_copy_by_element(m, tdev):
    src = torch.randn(1000, 3, device=tdev)
    dst = torch.zeros_like(src)
    m.copy_tensor_by_element(src, dst)
    assert torch.equal(dst, src)


@pytest.mark.parametrize(
    "function",
    [
        "matrix_vector_direct",
        "matrix_vector_tensorized",
        "matrix_vector_interfaces",
        "matrix_vector_generic<8, 5>",
    ],
)
def test_affine_map_of_broadcast_tensors(m, tdev, function):
    torch.manual_seed(0)
    w, b, x = (torch.randn(*s, device=tdev) for s in ((5, 8), (5,), (8,)))
    y = m[function](w.expand(4, 5, 8), b.expand(4, 5), x.expand(4, 8))
    torch.testing.assert_close(y, (w @ x + b).expand(4, 5), **TOL)


def test_matrix_parameters(m, tdev):
    torch.manual_seed(0)
    w, b, x = (torch.randn(*s, device=tdev) for s in ((3, 4), (4,), (4,)))
    y = m.matrix_vector_matrices(w.expand(4, 3, 4), b.expand(4, 4), x.expand(4, 4))
    torch.testing.assert_close(y, (w @ x + b[:3]).expand(4, 3), **TOL)


def bilinear(data: torch.Tensor, u: float, v: float) -> torch.Tensor:
    """``sample``'s bilinear filter: ``u`` across the columns, ``v`` down the rows, the texel
    at the floor of each and its next neighbour, clamped to the last."""
    rows, cols = data.shape[:2]
    tx, ty = torch.tensor(u * cols), torch.tensor(v * rows)
    x0, y0 = int(tx.floor()), int(ty.floor())
    fx, fy = tx - tx.floor(), ty - ty.floor()
    x1, y1 = min(x0 + 1, cols - 1), min(y0 + 1, rows - 1)
    d = data.cpu()
    top = d[y0, x0] * (1 - fx) + d[y0, x1] * fx
    bottom = d[y1, x0] * (1 - fx) + d[y1, x1] * fx
    return top * (1 - fy) + bottom * fy


@pytest.mark.parametrize("function", ["sample_tensor_scalar", "sample_rwtensor_scalar"])
def test_tensor_sample_scalar(m, tdev, function):
    data = torch.rand(8, 6, device=tdev)
    for u, v in [(0.25, 0.35), (0.5, 0.5), (0.1, 0.9), (0.0, 0.0), (0.75, 0.125)]:
        got = m[function](data, u, v).cpu()
        torch.testing.assert_close(got, bilinear(data, u, v), rtol=0, atol=1e-5)


def test_tensor_sample_vector(m, tdev):
    data = torch.rand(8, 6, 3, device=tdev)
    got = m.sample_tensor_vector(data, 0.3, 0.4).cpu()
    torch.testing.assert_close(got, bilinear(data, 0.3, 0.4), rtol=0, atol=1e-5)


UNBOUND = r"""
import slangpy;
float primal(PrimalTensor<float, 1> t) { return t[0]; }
void wprimal(WPrimalTensor<float, 1> t) { t[0] = 1; }
void rwprimal(RWPrimalTensor<float, 1> t) { t[0] = 1; }
void irwdiff(IRWDiffTensor<float, 1> t) { t[0] = t[0]; }
void rwdiff(RWDiffTensor<float, 1> t) { t[0] = t[0]; }
struct Sphere { float3 c; float r; };
float radius(Tensor<Sphere, 1> t) { return t[0].r; }
float buffered(StructuredBuffer<float3> t) { return t[0].x; }
void rwbuffered(RWStructuredBuffer<float> t) { t[0] = 1; }
"""


@pytest.mark.parametrize(
    "function, declare",
    [
        ("primal", r"IDiffTensor<T, D> \(or ITensor<T, D>\)"),
        ("wprimal", r"IWDiffTensor<T, D> \(or IWTensor<T, D>\)"),
        ("rwprimal", r"IRWTensor<T, D>"),
        ("irwdiff", r"an IDiffTensor<T, D> to read and an IWDiffTensor<T, D> to write"),
        ("rwdiff", r"an IDiffTensor<T, D> to read and an IWDiffTensor<T, D> to write"),
    ],
)
def test_each_tensor_type_not_bound_says_what_to_declare(cache_dir, tdev, function, declare):
    m = slangspec.load_source("unbound", UNBOUND, cache_dir=cache_dir)
    with pytest.raises(
        TypeError,
        match=rf"^unbound::{function}: argument 1 \('t'\): expected a tensor type slangspec "
        rf"binds, got \w+<float, 1>: declare {declare}",
    ):
        m[function](torch.zeros(4, device=tdev))


@pytest.mark.parametrize(
    "function, shape, refusal",
    [
        (
            "radius",
            (4, 4),
            r"expected a tensor of numbers, vectors or matrices, got Tensor<Sphere, 1>, a tensor "
            r"of structs, which slangspec does not bind: take each field as a tensor of its own",
        ),
        (
            "buffered",
            (4, 3),
            r"expected a parameter type slangspec binds, got StructuredBuffer<vector<float,3>>: "
            r"declare ITensor<T, 1>",
        ),
        (
            "rwbuffered",
            (4, 3),
            r"expected a parameter type slangspec binds, got RWStructuredBuffer<float>: declare "
            r"IRWTensor<T, 1>",
        ),
    ],
)
def test_tensors_of_structs_and_buffers_say_what_to_take(cache_dir, tdev, function, shape, refusal):
    m = slangspec.load_source("unbound", UNBOUND, cache_dir=cache_dir)
    with pytest.raises(TypeError, match=rf"^unbound::{function}: argument 1 \('t'\): {refusal}"):
        m[function](torch.zeros(*shape, device=tdev))
