"""Whole tensors whose element is a vector (``Tensor<float2, 1>``, ``IDiffTensor<float3, 1>``,
``ITensor<float4, 2>``): a torch tensor whose last dimension holds each vector's components,
read, written and differentiated in place, compared with torch and with slangpy."""

from __future__ import annotations

import numpy as np
import pytest
import slangpy as spy
import torch
from conftest import DEVICE_KIND

import slangspec

SOURCE = """
import slangpy;
void copy2(int i, Tensor<float2, 1> src, WTensor<float2, 1> dst) { dst[i] = src[i] * 2.0; }
void bump3(int i, RWTensor<float3, 1> v) { v[i] = v[i] + float3(1, 2, 3); }
float3 read3(int i, ITensor<float3, 1> src) { return src[i]; }
float4 read4(int2 p, ITensor<float4, 2> src) { return src[p]; }
float diagonal(ITensor<float2, 1> row) { return row[0].x + row[1].y; }
[Differentiable]
float weigh(int i, IDiffTensor<float2, 1> v) { float2 x = v[i]; return x.x * x.x + 3 * x.y; }
[Differentiable]
void square(int i, IDiffTensor<float3, 1> src, IWDiffTensor<float3, 1> dst)
{
    float3 v = src[i];
    dst[i] = v * v;
}
"""
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("vector_tensors", SOURCE, cache_dir=cache_dir)


def _index(n: int, tdev: str) -> torch.Tensor:
    return torch.arange(n, dtype=torch.int32, device=tdev)


def test_read_and_written_in_place(m, tdev):
    src = torch.randn(5, 2, device=tdev)
    dst = torch.zeros(5, 2, device=tdev)
    m.copy2(_index(5, tdev), src, dst)
    torch.testing.assert_close(dst, src * 2)
    v = torch.randn(4, 3, device=tdev)
    want = v + torch.tensor([1.0, 2.0, 3.0], device=tdev)
    m.bump3(_index(4, tdev), v)
    torch.testing.assert_close(v, want)
    torch.testing.assert_close(m.read3(_index(4, tdev), v), v)
    grid = torch.randn(3, 4, 4, device=tdev)
    torch.testing.assert_close(m.read4(slangspec.grid((3, 4)), grid), grid)


def test_leading_dimensions_are_call_dimensions(m, tdev):
    rows = torch.randn(6, 2, 2, device=tdev)
    torch.testing.assert_close(m.diagonal(rows), rows[:, 0, 0] + rows[:, 1, 1])


def test_gradients_have_the_tensors_shape_eagerly_and_compiled(m, tdev):
    import torch._dynamo

    x = torch.randn(5, 2, device=tdev, requires_grad=True)
    y = m.weigh(_index(5, tdev), x)
    torch.testing.assert_close(y, x[:, 0] ** 2 + 3 * x[:, 1], **TOL)
    y.sum().backward()
    want = torch.stack([2 * x[:, 0], torch.full_like(x[:, 1], 3.0)], dim=1).detach()
    torch.testing.assert_close(x.grad, want, **TOL)
    x.grad = None
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: m.weigh(_index(5, tdev), x) * 2, fullgraph=True)
    compiled(x).sum().backward()
    torch.testing.assert_close(x.grad, want * 2, **TOL)


def test_a_written_tensor_of_vectors_passes_gradients_through_torch(m, tdev):
    a = torch.randn(4, 3, device=tdev, requires_grad=True)
    out = torch.zeros(4, 3, device=tdev)
    m.square(_index(4, tdev), a, out)
    torch.testing.assert_close(out, a * a, **TOL)
    weights = torch.arange(12.0, device=tdev).reshape(4, 3)
    (out * weights).sum().backward()
    torch.testing.assert_close(a.grad, 2 * a.detach() * weights, **TOL)


def test_a_last_dimension_other_than_the_vectors_is_named(m, tdev):
    with pytest.raises(
        TypeError,
        match=r"^vector_tensors::read3: argument 2 \('src'\): expected a float32 tensor of rank 2 "
        r"whose last dimension is 3 \(the vector's\) for ITensor<vector<float,3>, 1>",
    ):
        m.read3(_index(4, tdev), torch.randn(4, 2, device=tdev))


def test_components_apart_in_memory_are_refused_naming_the_fix(m, tdev):
    apart = torch.randn(3, 4, device=tdev).t()  # (4, 3) with the components 4 floats apart
    with pytest.raises(ValueError, match=r"components are not side by side .* t\.contiguous\(\)"):
        m.read3(_index(4, tdev), apart)
    torch.testing.assert_close(m.read3(_index(4, tdev), apart.contiguous()), apart)


def test_values_as_slangpys_tensors_of_vectors(m, tdev):
    kind = spy.DeviceType.cuda if DEVICE_KIND == "cuda" else spy.DeviceType.vulkan
    values = np.random.default_rng(3).random((5, 2), dtype=np.float32)
    index = np.arange(5, dtype=np.int32)
    device = spy.create_device(type=kind)
    try:
        theirs = spy.Module.load_from_source(device, "vector_tensors", SOURCE)
        src = spy.Tensor.empty(device, shape=(5,), dtype="float2")
        src.copy_from_numpy(values)
        dst = spy.Tensor.empty(device, shape=(5,), dtype="float2")
        theirs.copy2(spy.Tensor.from_numpy(device, index), src, dst)
        want = dst.to_numpy().reshape(5, 2)
    finally:
        device.close()
    got = torch.zeros(5, 2, device=tdev)
    m.copy2(torch.from_numpy(index).to(tdev), torch.from_numpy(values).to(tdev), got)
    np.testing.assert_array_equal(got.cpu().numpy(), want)
