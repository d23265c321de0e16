"""slangpy 0.43.1's ``test_generics.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec with torch tensors in place of slangpy's buffers and tensors (its two
containers are one here): a generic function's value parameters (``let N : int``) are read off
the call's arguments, as slangpy reads them, and the call goes to the function named with them.

Not ported: ``test_arithmetic_generic_arguments_bug`` passes struct instances of a generic
interface (``LinearLayer<12, 8>`` through ``get_this``); slangspec does not take instances or
interface parameters.
"""

from __future__ import annotations

import pytest
import torch

import slangspec
from slangspec.settings import compile_counts


def identity(cache_dir: str, slang_type: str, generics: str, name: str) -> slangspec.Module:
    source = f"{slang_type} get{generics}({slang_type} input) {{ return input; }}\n"
    return slangspec.load_source(name, source, cache_dir=cache_dir)


def check_identity(m: slangspec.Module, element: tuple[int, ...], tdev: str) -> None:
    x = torch.rand(1024, *element, device=tdev)
    y = m.get(x)
    assert y.dtype == x.dtype and torch.equal(y, x)


@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_generic_vector(cache_dir, tdev, dim):
    check_identity(identity(cache_dir, "vector<float,N>", "<let N: int>", "gen_vec"), (dim,), tdev)


@pytest.mark.parametrize("dim", [2])
def test_generic_array(cache_dir, tdev, dim):
    check_identity(identity(cache_dir, "float[N]", "<let N: int>", "gen_arr"), (dim,), tdev)


@pytest.mark.parametrize("dim", [2])
def test_generic_2d_array(cache_dir, tdev, dim):
    m = identity(cache_dir, "float[N][N]", "<let N: int>", "gen_arr2")
    check_identity(m, (dim, dim), tdev)


@pytest.mark.parametrize("dim", [2])
def test_generic_matrix(cache_dir, tdev, dim):
    m = identity(cache_dir, "matrix<float,N,N>", "<let N: int>", "gen_mat")
    check_identity(m, (dim, dim), tdev)


SOURCE = """
vector<T, N> scaled<T : __BuiltinFloatingPointType, let N : int>(vector<T, N> v, T s) {
    return v * vector<T, N>(s);
}
[Differentiable]
float weigh<let N : int>(float[N] w, vector<float, N> x) {
    float total = 0;
    [ForceUnroll]
    for (int i = 0; i < N; i++) total += w[i] * x[i];
    return total;
}
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("gen_values", SOURCE, cache_dir=cache_dir)


def test_a_type_and_a_value_parameter_read_off_one_call(m, tdev):
    v = torch.rand(7, 3, device=tdev, dtype=torch.float16)
    y = m.scaled(v, 2.0)
    assert y.dtype == torch.float16 and torch.equal(y, v * 2)


def test_keywords_a_tuple_and_gradients(m, tdev):
    w = (0.5, -1.0, 2.0)
    x = torch.rand(9, 3, device=tdev, requires_grad=True)
    y = m.weigh(x=x, w=w)
    want = torch.tensor(w, device=tdev)
    torch.testing.assert_close(y, x.detach() @ want)
    y.sum().backward()
    torch.testing.assert_close(x.grad, want.expand(9, 3))


def test_the_named_function_is_cached_as_any_other(m, cache_dir, tdev):
    x = torch.rand(5, 2, device=tdev)
    m.weigh((1.0, 1.0), x)
    before, hits = dict(compile_counts), slangspec.Cache(cache_dir).stats()["hits"]
    fresh = slangspec.load_source("gen_values", SOURCE, cache_dir=cache_dir)
    torch.testing.assert_close(fresh.weigh((1.0, 1.0), x), x.sum(-1))
    # A hit resolves no types and generates no source (on Vulkan, slangpy still builds the
    # pipeline from the cached kernel's module).
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work
    assert slangspec.Cache(cache_dir).stats()["hits"] > hits


def test_under_torch_compile(cache_dir, tdev):
    # A module of its own: the function is first looked up while torch traces the call.
    fresh = slangspec.load_source("gen_values", SOURCE, cache_dir=cache_dir)
    x = torch.rand(6, 4, device=tdev, requires_grad=True)
    compiled = torch.compile(lambda x: fresh.weigh((1.0, 2.0, 3.0, 4.0), x), fullgraph=True)
    y = compiled(x)
    want = torch.tensor([1.0, 2.0, 3.0, 4.0], device=tdev)
    torch.testing.assert_close(y, x.detach() @ want)
    y.sum().backward()
    torch.testing.assert_close(x.grad, want.expand(6, 4))


def test_a_value_an_argument_cannot_give_names_the_generic(m, tdev):
    with pytest.raises(
        TypeError,
        match=r"gen_values::weigh: argument 1: expected a tensor .*generic value N from; "
        r"name it explicitly \(gen_values::weigh<\.\.\.>\)",
    ):
        m.weigh(1.0, 2.0)
    with pytest.raises(
        ValueError,
        match=r"^gen_values::weigh<2>: argument 2 \('x'\): expected a tensor whose trailing "
        r"dimensions are \(2,\) for vector<float,2>, got shape \(4, 3\)$",
    ):
        m.weigh((1.0, 2.0), torch.rand(4, 3, device=tdev))  # N = 2 from w, x ends in 3
