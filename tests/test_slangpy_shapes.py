"""slangpy 0.43.1's ``test_shapes.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec: the call shape that arguments of each shape make, broadcast and mapped, and
the mismatches refused. Where the original reads slangpy's bindings (each argument's call
dimensions and mapping), this checks the result's shape and its values against torch.

Not ported: ``copy_at_index`` takes ``StructuredBuffer``/``RWStructuredBuffer`` parameters
(slangpy buffers; ``Tensor<T, 1>`` here), and the original skips ``test_dotproduct_shape_error``
and four ``read_slice`` cases. A result that every call would write (slangpy's ``ValueRef``
beside a call of 100) is refused: a result has the call shape.
"""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = r"""
import slangpy;
float dot_product(float3 a, float3 b) { return dot(a, b); }
float read_slice(int2 index, Tensor<float, 2> texture) { return texture[index.x, index.y]; }
"""
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("shapes", SOURCE, cache_dir=cache_dir)


@pytest.fixture
def floats(tdev):
    return lambda *shape: torch.randn(*shape, device=tdev)


def dot(a, b) -> torch.Tensor:
    """torch's dot product of the last dimension, a tuple taken as a vector."""
    device = (a if isinstance(a, torch.Tensor) else b).device
    a, b = (torch.as_tensor(v, dtype=torch.float32, device=device) for v in (a, b))
    return (a * b).sum(-1)


def test_dotproduct_scalar(m, tdev):
    assert m.dot_product((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)).item() == 32.0
    result = torch.empty((), device=tdev)
    m.dot_product((1.0, 2.0, 3.0), (4.0, 5.0, 6.0), _result=result)
    assert result.item() == 32.0


@pytest.mark.parametrize(
    "a_shape, b_shape", [(None, (100, 3)), ((100, 3), None), ((100, 3), (1, 3))]
)
def test_dotproduct_broadcast(m, floats, a_shape, b_shape):
    a = (1.0, 2.0, 3.0) if a_shape is None else floats(*a_shape)
    b = (4.0, 5.0, 6.0) if b_shape is None else floats(*b_shape)
    result = m.dot_product(a, b)
    assert result.shape == (100,)
    torch.testing.assert_close(result, dot(a, b), **TOL)


def test_dotproduct_broadcast_error(m, floats):
    with pytest.raises(ValueError, match=r"^shapes::dot_product: "):
        m.dot_product(floats(100, 3), floats(1000, 3))


@pytest.mark.parametrize("result_shape", [(), (3,)], ids=["every call's", "wrong shape"])
def test_dotproduct_broadcast_invalid_result(m, floats, tdev, result_shape):
    with pytest.raises(ValueError, match=r"^shapes::dot_product: "):
        m.dot_product(floats(100, 3), floats(3), _result=torch.empty(result_shape, device=tdev))


def test_dotproduct_big_tensors(m, floats, tdev):
    a, b = floats(8, 1, 2, 3), floats(8, 4, 2, 3)
    result = torch.empty(8, 4, 2, device=tdev)
    m.dot_product(a, b, _result=result)
    torch.testing.assert_close(result, dot(a, b), **TOL)


def test_dotproduct_input_transform(m, floats):
    a, b = floats(8, 1, 2, 3), floats(4, 8, 2, 3)
    result = m.dot_product.map(b=(1, 0, 2))(a, b)
    assert result.shape == (8, 4, 2)
    torch.testing.assert_close(result, dot(a, b.transpose(0, 1)), **TOL)


def test_dotproduct_output_transform(m, floats):
    a, b = floats(10, 3), floats(5, 3)
    result = m.dot_product.map(a=(0,), b=(1,))(a, b)
    assert result.shape == (10, 5)
    torch.testing.assert_close(result, a @ b.T, **TOL)


@pytest.mark.parametrize("index_shape", [(), (50,)], ids=["scalar", "broadcast slice"])
def test_readslice(m, floats, tdev, index_shape):
    texture = floats(256, 128)
    index = torch.stack(
        [torch.randint(0, 256, index_shape), torch.randint(0, 128, index_shape)], dim=-1
    ).to(device=tdev, dtype=torch.int32)
    result = m.read_slice(index, texture)
    assert result.shape == index_shape
    torch.testing.assert_close(result, texture[index[..., 0].long(), index[..., 1].long()])


def test_readslice_float_indices_are_refused(m, floats):
    with pytest.raises(TypeError, match=r"^shapes::read_slice: argument 1 \('index'\)"):
        m.read_slice(floats(50, 2), floats(50, 256, 128))


def test_readslice_invalid_broadcast(m, floats, tdev):
    index = torch.zeros(50, 2, dtype=torch.int32, device=tdev)
    with pytest.raises(ValueError, match=r"^shapes::read_slice: "):
        m.read_slice(index, floats(75, 256, 128))
