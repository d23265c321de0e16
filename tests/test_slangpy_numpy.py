"""slangpy 0.43.1's ``test_numpy.py`` (from the wheel's ``tests/slangpy_tests``), called through
slangspec: numpy arrays as arguments, ``_result=`` a numpy array to write into, ``"numpy"`` and
``return_type(numpy.ndarray)``, kernels of another array shape, and matrices of every size from
2x2 to 4x4, returned and passed.

Where slangpy returns its own buffer for numpy arguments, slangspec returns a torch tensor (on
the device's torch device), and where slangpy takes its own matrix values (``spy.float2x3``),
slangspec takes a tensor whose trailing dimensions are the matrix's: both are compared by value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import slangspec

SOURCE = """
float add_floats(float a, float b) { return a + b; }
float3 add_float3s(float3 a, float3 b) { return a + b; }
matrix<float, R, C> matFunc<int R, int C>() { return matrix<float, R, C>(1); }
struct Wrapper { float[16] data; }
Wrapper flattenMatrix<int R, int C>(matrix<float, R, C> mat)
{
    Wrapper res;
    for (int i = 0; i < 16; i++) { res.data[i] = 0; }
    for (int i = 0; i < R; i++) { for (int j = 0; j < C; j++) { res.data[i * C + j] = mat[i][j]; } }
    return res;
}
matrix<float, R, C> matFunc1<int R, int C>(matrix<float, R, C> input) { return input + 2.0f; }
"""

SIZES = [(r, c) for r in range(2, 5) for c in range(2, 5)]


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("numpy_port", SOURCE, cache_dir=cache_dir)


def pair(*shape: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(len(shape))
    return rng.random(shape, dtype=np.float32), rng.random(shape, dtype=np.float32)


def test_pass_numpy_floats(m):
    a, b = pair(2, 2)
    res = m.add_floats(a, b)
    assert isinstance(res, torch.Tensor) and tuple(res.shape) == (2, 2)
    np.testing.assert_allclose(res.cpu().numpy(), a + b, rtol=1e-6)


def test_return_numpy_floats(m):
    a, b = pair(2, 2)
    res = np.zeros_like(a)
    m.add_floats(a, b, _result=res)
    np.testing.assert_allclose(res, a + b, rtol=1e-6)


def test_return_numpy_floats_auto(m):
    a, b = pair(2, 2)
    res = m.add_floats(a, b, _result="numpy")
    assert isinstance(res, np.ndarray)
    np.testing.assert_allclose(res, a + b, rtol=1e-6)


def test_returntype_numpy_floats(m):
    a, b = pair(2, 2)
    np.testing.assert_allclose(m.add_floats.return_type(np.ndarray)(a, b), a + b, rtol=1e-6)


def test_pass_numpy_float3s(m):
    a, b = pair(2, 2, 3)
    np.testing.assert_allclose(m.add_float3s.return_type(np.ndarray)(a, b), a + b, rtol=1e-6)


def test_fail_numpy_float3s(m):
    a, b = pair(2, 2, 2)
    with pytest.raises(
        ValueError,
        match=r"^numpy_port::add_float3s: argument 1 \('a'\): expected a tensor whose trailing "
        r"dimensions are \(3,\) for vector<float,3>, got shape \(2, 2, 2\)$",
    ):
        m.add_float3s.return_type(np.ndarray)(a, b)


def test_cache(m):
    for shape in ((3, 2, 2), (2, 2)):
        a, b = pair(*shape)
        np.testing.assert_allclose(m.add_floats.return_type(np.ndarray)(a, b), a + b, rtol=1e-6)


@pytest.mark.parametrize("r, c", SIZES)
def test_return_numpy_matrix(m, r, c):
    res = m[f"matFunc<{r}, {c}>"]().cpu().numpy()
    assert res.shape == (r, c)
    np.testing.assert_array_equal(res, np.ones((r, c)))


@pytest.mark.parametrize("r, c", SIZES)
def test_setup_numpy_matrix(m, r, c, tdev):
    res = m[f"flattenMatrix<{r}, {c}>"](torch.ones(r, c, device=tdev))
    np.testing.assert_array_equal(res["data"].cpu().numpy()[: r * c], np.ones(r * c))


@pytest.mark.parametrize("r, c", SIZES)
def test_numpy_matrix_as_result(m, r, c):
    given = np.arange(1, r * c + 1, dtype=np.float32).reshape(r, c)
    res = m[f"matFunc1<{r}, {c}>"](given, _result="numpy")
    assert isinstance(res, np.ndarray) and res.shape == (r, c)
    np.testing.assert_array_equal(res, given + 2.0)
