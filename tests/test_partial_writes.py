"""Calls that write part of a tensor: what each call wrote takes the gradient of exactly the
elements it wrote, and the rest of the tensor's gradient passes to what it held before, as the
same program written in torch (``o[i] = v``) gives, eagerly and under ``torch.compile``."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch._dynamo
import torch._functorch.config

import slangspec

SOURCE = """
import slangpy;

[Differentiable]
void put(float x, int i, WDiffTensor<float, 1> o) { o.store(int[1](i), x * x); }

[Differentiable]
void put_i(float x, int i, IWDiffTensor<float, 1> o) { o[i] = x * x; }

[Differentiable]
void square_load(DiffTensor<float, 1> input, WDiffTensor<float, 1> output, int idx)
{
    float x = input.load(int[1](idx));
    output.store(int[1](idx), x * x);
}

[Differentiable]
void square_load_once(DiffTensor<float, 1> input, WDiffTensor<float, 1> output, int idx)
{
    float x = input.load_once(int[1](idx));
    output.store(int[1](idx), x * x);
}

[Differentiable]
void broadcast_load(DiffTensor<float, 1> w, WDiffTensor<float, 1> output, int idx)
{
    output.store(int[1](idx), w.load(int[1](0)));
}

[Differentiable]
void broadcast_load_uniform(DiffTensor<float, 1> w, WDiffTensor<float, 1> output, int idx)
{
    output.store(int[1](idx), w.load_uniform(int[1](0)));
}

[Differentiable]
void square_out(float x, out float y) { y = x * x; }
"""
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("partial_writes", SOURCE, cache_dir=cache_dir)


def puts(put, count: int):
    """A program that writes ``x[i]**2`` into element ``i`` of a tensor for ``i < count``, one
    call each, over what ``base`` made of it, weighted so every element's gradient differs."""

    def program(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        o = base * 3.0
        for i in range(count):
            put(x[i], i, o)
        return o * torch.arange(1.0, 5.0, device=o.device)

    return program


def in_torch(count: int):
    def program(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        o = base * 3.0
        for i in range(count):
            o[i] = x[i] * x[i]
        return o * torch.arange(1.0, 5.0, device=o.device)

    return program


@pytest.mark.parametrize("function", ["put", "put_i"])
@pytest.mark.parametrize("count", [2, 3])
def test_partial_writes_take_their_elements_gradients_and_pass_on_the_rest(
    m, tdev, function, count
):
    x = torch.tensor([1.0, 2.0, -3.0, 0.5], device=tdev)
    base = torch.tensor([7.0, -1.0, 2.0, 4.0], device=tdev)
    want_leaves = [x.clone().requires_grad_(), base.clone().requires_grad_()]
    want = in_torch(count)(*want_leaves)
    want.sum().backward()
    leaves = [x.clone().requires_grad_(), base.clone().requires_grad_()]
    got = puts(m[function], count)(*leaves)
    torch.testing.assert_close(got, want, **TOL)
    got.sum().backward()
    for leaf, want_leaf in zip(leaves, want_leaves, strict=True):
        torch.testing.assert_close(leaf.grad, want_leaf.grad, **TOL)


@pytest.mark.filterwarnings("ignore:Input #:UserWarning")
# gradcheck takes gradients twice from one graph, which a compiled backward that donates its
# buffers refuses.
@torch._functorch.config.patch(donated_buffer=False)
def test_gradcheck_of_partial_writes_eagerly_and_compiled(m, tdev):
    program = puts(m.put, 3)
    leaves = [
        torch.tensor([1.0, 2.0, -3.0, 0.5], device=tdev, requires_grad=True),
        torch.tensor([7.0, -1.0, 2.0, 4.0], device=tdev, requires_grad=True),
    ]
    torch._dynamo.reset()
    compiled = torch.compile(program, fullgraph=True)
    torch.testing.assert_close(compiled(*leaves), in_torch(3)(*leaves), **TOL)
    for mode in (program, compiled):
        assert torch.autograd.gradcheck(mode, leaves, eps=1e-3, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("function", ["square_load", "square_load_once"])
def test_one_call_per_element_reading_a_whole_tensor(m, tdev, function):
    """slangpy's own load variants' programs: each call writes one element of the result."""
    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=tdev, requires_grad=True)
    result = torch.zeros(5, device=tdev)
    for i in range(5):
        m[function](x, result, i)
    torch.testing.assert_close(result, (x * x).detach(), **TOL)
    result.sum().backward()
    torch.testing.assert_close(x.grad, 2.0 * x.detach(), **TOL)


@pytest.mark.parametrize("function", ["broadcast_load", "broadcast_load_uniform"])
def test_one_call_per_element_reading_one_shared_weight(m, tdev, function):
    w = torch.tensor([3.0], device=tdev, requires_grad=True)
    result = torch.zeros(5, device=tdev)
    for i in range(5):
        m[function](w, result, i)
    torch.testing.assert_close(result, torch.full((5,), 3.0, device=tdev), **TOL)
    (result * torch.arange(1.0, 6.0, device=tdev)).sum().backward()
    torch.testing.assert_close(w.grad, torch.tensor([15.0], device=tdev), **TOL)


def test_an_out_parameter_written_into_part_of_a_tensor_passes_on_the_rest(m, tdev):
    x = torch.tensor([1.0, -2.0], device=tdev, requires_grad=True)
    base = torch.tensor([5.0, 6.0, 7.0, 8.0], device=tdev, requires_grad=True)
    o = base * 2.0
    m.square_out(x, o[1:3])
    torch.testing.assert_close(o, torch.tensor([10.0, 1.0, 4.0, 16.0], device=tdev), **TOL)
    (o * torch.arange(1.0, 5.0, device=tdev)).sum().backward()
    torch.testing.assert_close(base.grad, torch.tensor([2.0, 0.0, 0.0, 8.0], device=tdev))
    torch.testing.assert_close(x.grad, torch.tensor([4.0, -12.0], device=tdev))


def _into_a_given_tensor(m):
    """A program writing into a tensor its caller allocated: a mutated input of a compiled
    graph, which no gradient reaches."""

    def program(x: torch.Tensor, o: torch.Tensor) -> None:
        m.put(x[0], 0, o)
        m.square_out(x[1], o[2:3])

    return program


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_tensor_the_caller_allocated_takes_what_the_calls_write_with_their_gradients(
    m, tdev, compiled
):
    torch._dynamo.reset()
    program = _into_a_given_tensor(m)
    x = torch.tensor([1.5, -2.0], device=tdev, requires_grad=True)
    o = torch.full((4,), 9.0, device=tdev)
    (torch.compile(program, fullgraph=True) if compiled else program)(x, o)
    torch.testing.assert_close(o, torch.tensor([2.25, 9.0, 4.0, 9.0], device=tdev), **TOL)
    (o * torch.arange(1.0, 5.0, device=tdev)).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([3.0, -12.0], device=tdev), **TOL)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_written_tensor_and_its_graph_are_freed_once_the_caller_drops_them(m, tdev, compiled):
    """Nothing a call records refers back to the tensor it wrote: else the tensor, its graph and
    every input that graph saved outlive the step that made them."""
    torch._dynamo.reset()
    program = _into_a_given_tensor(m)
    run = torch.compile(program, fullgraph=True) if compiled else program
    kept = []
    for _ in range(2):
        x = torch.tensor([1.5, -2.0], device=tdev, requires_grad=True)
        o = torch.zeros(4, device=tdev)
        run(x, o)
        kept += [weakref.ref(x), weakref.ref(o)]
    del x, o
    gc.collect()
    assert [ref() for ref in kept] == [None] * len(kept)
