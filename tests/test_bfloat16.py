"""bfloat16 tensors: Slang 2026.12 (slangpy 0.43.1's) has a BFloat16 type, but slangpy cannot
reflect it and lavapipe rejects the SPIR-V it compiles to, so every parameter refuses bfloat16
tensors, saying so and what to pass instead."""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = """
import slangpy;
[Differentiable]
float square(float x) { return x * x; }
[Differentiable]
float at(IDiffTensor<float, 1> w, int i) { return w[i]; }
T twice<T : IFloat>(T x) { return x + x; }
float widen(BFloat16 x) { return float(x); }
"""
HINT = r"\(bfloat16 is not supported on Vulkan or CUDA: .*convert the tensor with \.float\(\)\)"


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("bf16", SOURCE, cache_dir=cache_dir)


def test_a_bfloat16_tensor_is_refused_with_the_conversion_to_make(m, tdev):
    x = torch.linspace(-1.0, 1.0, 5, device=tdev, dtype=torch.bfloat16)
    with pytest.raises(
        TypeError,
        match=r"^bf16::square: argument 1 \('x'\): expected a float32 tensor, got a bfloat16 "
        rf"tensor {HINT}$",
    ):
        m.square(x)
    with pytest.raises(TypeError, match=rf"^bf16::at: argument 1 \('w'\): .*{HINT}$"):
        m.at(x, slangspec.grid((5,)))
    with pytest.raises(TypeError, match=rf"^bf16::twice: argument 1 \('x'\): .*{HINT}"):
        m.twice(x)


def test_the_suggested_conversion_runs_and_matches_torch(m, tdev):
    x = torch.linspace(-1.0, 1.0, 5, device=tdev, dtype=torch.bfloat16).requires_grad_(True)
    xf = x.float()  # the conversion the error suggests, through autograd
    y = m.square(xf)
    y.sum().backward()
    ref = x.detach().clone().requires_grad_(True)
    (ref.float() ** 2).sum().backward()
    # float32 products of bfloat16 values are exact; the bfloat16 gradient rounds alike.
    torch.testing.assert_close(y, xf.detach() ** 2, rtol=0, atol=0)
    assert x.grad.dtype == torch.bfloat16
    torch.testing.assert_close(x.grad, ref.grad, rtol=0, atol=0)


def test_a_bfloat16_parameter_is_refused_by_name(m, tdev):
    with pytest.raises(
        TypeError, match=r"^bf16::widen: .*got unsupported parameter type BFloat16$"
    ):
        m.widen(torch.ones(3, device=tdev))
