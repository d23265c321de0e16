"""slangpy 0.43.1's ``test_tensor_with_grads.py`` (from the wheel's ``tests/slangpy_tests``),
called through slangspec with torch tensors: an affine map of one sample through differentiable
tensor interfaces, and through a matrix and vectors, each with its parameters broadcast over four
calls and its gradients through torch's autograd; and an ``inout`` value written in place.

Ported with one change: ``matrix_vector_matrices`` declares four biases for three rows, of which
the original's test passes three; the function here takes a ``float3``. Where the original
refuses a backward pass that would share an ``inout`` parameter's gradient buffer, a written
tensor here is a new version of it in torch's graph: a leaf that requires grad is refused
(torch's rule for in-place writes), and a tensor computed from one passes the gradient on.
"""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = r"""
import slangpy;

[Differentiable]
float[5] affine_through_tensors(IDiffTensor<float, 2> w, IDiffTensor<float, 1> b, float[8] x)
{
    float[5] y;
    for (int r = 0; r < 5; ++r)
    {
        float sum = b.load(r);
        for (int c = 0; c < 8; ++c)
            sum += w.load(r, c) * x[c];
        y[r] = sum;
    }
    return y;
}

[Differentiable]
float3 affine_through_values(float3x4 w, float3 b, float[4] x)
{
    float3 y = b;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c)
            y[r] += w[r][c] * x[c];
    return y;
}

[Differentiable]
void inc(float amount, inout float val) { val += amount; }
"""
CALLS = 4
TOL = {"rtol": 1e-4, "atol": 1e-4}  # the original's bound on the largest difference


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("tensor_with_grads", SOURCE, cache_dir=cache_dir)


@pytest.mark.parametrize(
    "function, rows, cols",
    [("affine_through_tensors", 5, 8), ("affine_through_values", 3, 4)],
    ids=["interface parameters", "matrix parameters"],
)
def test_broadcast_parameters_take_the_sum_of_every_calls_gradient(m, tdev, function, rows, cols):
    torch.manual_seed(0)
    w = torch.randn(rows, cols, device=tdev, requires_grad=True)
    b = torch.randn(rows, device=tdev, requires_grad=True)
    x = torch.randn(cols, device=tdev)
    y = m[function](w.expand(CALLS, rows, cols), b.expand(CALLS, rows), x.expand(CALLS, cols))
    tw, tb = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ty = (tw @ x + tb).expand(CALLS, rows)
    torch.testing.assert_close(y, ty, **TOL)
    cotangent = torch.rand(CALLS, rows, device=tdev)
    (y * cotangent).sum().backward()
    (ty * cotangent).sum().backward()
    torch.testing.assert_close(w.grad, tw.grad, **TOL)
    torch.testing.assert_close(b.grad, tb.grad, **TOL)


def test_an_inout_value_is_written_in_place_and_passes_its_gradient_on(m, tdev):
    amount = torch.tensor([1.0], device=tdev, requires_grad=True)
    held = torch.tensor([2.0], device=tdev, requires_grad=True)
    val = held * 3.0
    m.inc(amount, val)
    torch.testing.assert_close(val, torch.tensor([7.0], device=tdev))
    (val * 5.0).sum().backward()
    torch.testing.assert_close(amount.grad, torch.tensor([5.0], device=tdev))
    torch.testing.assert_close(held.grad, torch.tensor([15.0], device=tdev))


def test_an_inout_leaf_that_requires_grad_is_refused_by_name(m, tdev):
    amount = torch.tensor([1.0], device=tdev)
    val = torch.zeros(1, device=tdev, requires_grad=True)
    with pytest.raises(ValueError, match=r"tensor_with_grads::inc: argument 2 \('val'\)"):
        m.inc(amount, val)
