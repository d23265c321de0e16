"""Frozen inputs get no gradient storage: measured with torch's CUDA allocator."""

from pathlib import Path

import pytest
import torch

import slangspec

SHADERS = Path(__file__).parent / "shaders"
MiB = 1 << 20


@pytest.fixture(scope="module")
def ops(cache_dir):
    return slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)


def backward_peak(ops, big_grad: bool) -> tuple[int, torch.Tensor, torch.Tensor]:
    n, step = 1024, 65536
    big = torch.randn(n * step, device="cuda").requires_grad_(big_grad)  # 256 MiB
    small = torch.randn(n, device="cuda", requires_grad=True)
    out = ops.strided(big, small, slangspec.grid((n,)), step)
    cot = torch.randn(n, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out.backward(cot)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before, big, small, cot


def test_frozen_256mib_idifftensor_costs_no_gradient_memory(ops, kind):
    if kind != "cuda":
        pytest.skip("measured with torch's CUDA allocator")
    peak, big, small, cot = backward_peak(ops, big_grad=False)
    assert big.grad is None
    idx = torch.arange(1024, device="cuda") * 65536
    torch.testing.assert_close(small.grad, cot * big.detach()[idx])
    assert peak < 4 * MiB, f"backward allocated {peak / MiB:.1f} MiB for a frozen input"
    # Control: when the big input does train, its gradient really is allocated.
    peak_trained, *_ = backward_peak(ops, big_grad=True)
    assert peak_trained >= 256 * MiB
