"""Comparing slangspec's results and gradients with the same maths in torch, for the tests."""

import torch

F32 = {"rtol": 1e-5, "atol": 1e-5}


def leaf(*shape, tdev, grad=True, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device=tdev).requires_grad_(grad)


def twin(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` for torch's side, requiring grad as ``t`` does."""
    return t.detach().clone().requires_grad_(t.requires_grad)


def assert_grads(tensors, twins, tol=F32) -> None:
    """Each tensor has its twin's gradient, or none where the twin has none."""
    for t, w in zip(tensors, twins, strict=True):
        if w.grad is None:
            assert t.grad is None
        else:
            torch.testing.assert_close(t.grad, w.grad, **tol)


def compare(out, ref, tensors, twins, tol=F32) -> None:
    """``out`` against ``ref``; then the same random cotangent back through both, and every
    gradient of ``tensors`` against its twin's."""
    torch.testing.assert_close(out, ref.to(out.dtype), **tol)
    cot = torch.randn_like(ref)
    if ref.requires_grad:
        assert out.grad_fn is not None
        out.backward(cot)
        ref.backward(cot)
    else:
        assert out.grad_fn is None
    assert_grads(tensors, twins, tol)


def check_parity(slang_fn, torch_fn, inputs, tol=F32) -> None:
    """Run both on the same inputs (twins for torch) and ``compare``."""
    twins = [twin(t) for t in inputs]
    compare(slang_fn(*inputs), torch_fn(*twins), inputs, twins, tol)
