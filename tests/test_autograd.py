"""Forward results and gradients of real Slang kernels against the same maths in torch."""

import random
from pathlib import Path

import pytest
import torch

import slangspec
from parity import F32, check_parity, leaf

SHADERS = Path(__file__).parent / "shaders"
F16 = {"rtol": 1e-2, "atol": 1e-2}


@pytest.fixture(scope="module")
def ops(cache_dir):
    return slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)


def grads(*tensors):
    return [None if t.grad is None else t.grad.clone() for t in tensors]


# --- seed bug 1: autograd dropped after a no-grad first call ----------------------------------


@pytest.mark.parametrize("order", ["nograd-first", "grad-first"])
def test_grad_call_after_nograd_call_of_the_same_shape_keeps_autograd(ops, tdev, order):
    calls = (
        ["nograd", "grad", "nograd", "grad"]
        if order == "nograd-first"
        else ["grad", "nograd", "grad", "nograd"]
    )
    for kind in calls:
        x = leaf(8, 5, tdev=tdev, grad=kind == "grad")
        y = ops.square(x)
        if kind == "nograd":
            assert y.grad_fn is None and not y.requires_grad
            continue
        assert y.grad_fn is not None, "output lost its autograd graph"
        y.sum().backward()
        torch.testing.assert_close(x.grad, 2 * x.detach(), **F32)


def test_grad_tensor_under_no_grad_then_outside(ops, tdev):
    x = leaf(16, tdev=tdev)
    with torch.no_grad():
        assert ops.square(x).grad_fn is None
    y = ops.square(x)
    assert y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach(), **F32)


# --- seed bug 2: mixed requires_grad over two IDiffTensor inputs ------------------------------


@pytest.mark.parametrize("ga,gb", [(True, True), (True, False), (False, True), (False, False)])
def test_mixed_requires_grad_idifftensor(ops, tdev, ga, gb, monkeypatch):
    from slangspec.runtime import vulkan_binding

    n = 64
    a, b = leaf(n, tdev=tdev, grad=ga), leaf(n, tdev=tdev, grad=gb)
    zeros_shapes = []
    real_zeros = vulkan_binding.VulkanBinding.zeroed

    def counting_zeros(self, shape, dtype):
        zeros_shapes.append(shape)
        return real_zeros(self, shape, dtype)

    monkeypatch.setattr(vulkan_binding.VulkanBinding, "zeroed", counting_zeros)
    y = ops.mix2(a, b, slangspec.grid((n,)))
    torch.testing.assert_close(y, (a * b + a).detach(), **F32)
    if not (ga or gb):
        assert y.grad_fn is None and not y.requires_grad
        return
    cot = torch.randn(n, device=tdev)
    if tdev == "cuda":
        # The backward allocates its gradients and nothing else.
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        y.backward(cot)
        allocated = torch.cuda.memory_stats()["allocation.all.allocated"] - before
        assert allocated == ga + gb, "gradient storage for a frozen input"
    else:
        y.backward(cot)
        assert zeros_shapes == [(n,)] * (ga + gb), "gradient storage for a frozen input"
    if ga:
        torch.testing.assert_close(a.grad, cot * (b.detach() + 1), **F32)
    else:
        assert a.grad is None
    if gb:
        torch.testing.assert_close(b.grad, cot * a.detach(), **F32)
    else:
        assert b.grad is None


def test_idifftensor_gradients_of_two_sizes(ops, tdev):
    n, step = 40, 3
    big, small = leaf(n * step, tdev=tdev), leaf(n, tdev=tdev)
    out = ops.strided(big, small, slangspec.grid((n,)), step)
    torch.testing.assert_close(out, (big[::step] * small).detach(), **F32)
    cot = torch.randn(n, device=tdev)
    out.backward(cot)
    expected_big = torch.zeros(n * step, device=tdev)
    expected_big[::step] = cot * small.detach()
    torch.testing.assert_close(big.grad, expected_big, **F32)
    torch.testing.assert_close(small.grad, cot * big.detach()[::step], **F32)
    assert big.grad.shape == big.shape and small.grad.shape == small.shape


def test_idifftensor_gradients_start_from_zero_in_reused_memory(ops, tdev):
    """Whole-tensor gradients accumulate into storage slangspec zeroes: memory the allocator
    hands back still holds what was there before."""
    n = 4096
    for _ in range(3):
        dirty = torch.full((n,), float("nan"), device=tdev)
        del dirty
        a, b = leaf(n, tdev=tdev), leaf(n, tdev=tdev)
        cot = torch.randn(n, device=tdev)
        ops.mix2(a, b, slangspec.grid((n,))).backward(cot)
        torch.testing.assert_close(a.grad, cot * (b.detach() + 1), **F32)
        torch.testing.assert_close(b.grad, cot * a.detach(), **F32)


@pytest.mark.parametrize("n", [300, 20000], ids=["one copy", "four copies"])
def test_idifftensor_gradients_shared_by_calls_and_own(ops, tdev, n):
    """A whole tensor's gradient sums per warp where the warp's calls read one element, into
    copies of it that 4,096 or more calls share (``gradient_copies``); reads of elements a
    few calls share and of each call's own stay exact."""
    w = leaf(n, tdev=tdev)
    i = torch.arange(n, device=tdev, dtype=torch.int32)
    out = ops.shared_reads(w, i)
    x = w.detach().clone().requires_grad_(True)
    ref = 2 * x[0] + x[i.long() % 3] * x
    torch.testing.assert_close(out, ref.detach(), **F32)
    cot = torch.randn(n, device=tdev)
    out.backward(cot)
    ref.backward(cot)
    torch.testing.assert_close(w.grad, x.grad, rtol=1e-4, atol=1e-4)


# --- gradient parity ---------------------------------------------------------------------------


def test_polynomial_over_scalars(ops, tdev):
    check_parity(
        ops.poly, lambda a, x: a * x * x + 3 * a, [leaf(37, tdev=tdev), leaf(37, tdev=tdev)]
    )


def test_float3_function_over_n_by_3(ops, tdev):
    def ref(v, s):
        return v * s + torch.tensor([s, 0.0, 1.0], device=v.device)

    check_parity(lambda v: ops.scale3(v, 1.5), lambda v: ref(v, 1.5), [leaf(33, 3, tdev=tdev)])


def test_broadcast_length_one_against_n(ops, tdev):
    check_parity(
        ops.poly, lambda a, x: a * x * x + 3 * a, [leaf(1, tdev=tdev), leaf(50, tdev=tdev)]
    )
    check_parity(
        ops.poly,
        lambda a, x: a * x * x + 3 * a,
        [leaf(50, tdev=tdev), leaf(1, tdev=tdev, grad=False)],
    )


def test_two_dimensional_tensors_and_missing_leading_dims(ops, tdev):
    check_parity(
        ops.poly, lambda a, x: a * x * x + 3 * a, [leaf(6, 7, tdev=tdev), leaf(6, 7, tdev=tdev)]
    )
    check_parity(
        ops.poly, lambda a, x: a * x * x + 3 * a, [leaf(7, tdev=tdev), leaf(6, 7, tdev=tdev)]
    )
    check_parity(
        ops.poly, lambda a, x: a * x * x + 3 * a, [leaf(6, 1, tdev=tdev), leaf(1, 7, tdev=tdev)]
    )


def test_non_contiguous_inputs(ops, tdev):
    x = torch.randn(7, 6, device=tdev).t().requires_grad_(True)
    a = leaf(6, 7, tdev=tdev)
    check_parity(ops.poly, lambda a, x: a * x * x + 3 * a, [a, x])


def cotangents(shape, tdev):
    """Cotangents of ``shape`` laid out as torch hands them to a backward: contiguous, expanded
    from one element (what ``sum`` gives), transposed, and sliced with a step."""
    rows, cols = shape
    return {
        "contiguous": torch.randn(rows, cols, device=tdev),
        "expanded": torch.randn(1, device=tdev).expand(rows, cols),
        "transposed": torch.randn(cols, rows, device=tdev).t(),
        "sliced": torch.randn(rows, 2 * cols, device=tdev)[:, ::2],
        "broadcast row": torch.randn(cols, device=tdev).expand(rows, cols),
    }


CASES = {
    "poly": (2, (6, 7), lambda a, x: a * x * x + 3 * a),
    "f3": (3, (6, 7), lambda a, b, c: a * b + torch.sin(c) * a + b * c * c),
    "scale3": (1, (6, 3), lambda v: v * 1.5 + torch.tensor([1.5, 0.0, 1.0], device=v.device)),
}


@pytest.mark.parametrize(
    "layout", ["contiguous", "expanded", "transposed", "sliced", "broadcast row"]
)
@pytest.mark.parametrize("function", sorted(CASES))
def test_backward_takes_cotangents_of_any_layout(ops, tdev, layout, function):
    arity, shape, torch_fn = CASES[function]
    inputs = [leaf(*shape, tdev=tdev) for _ in range(arity)]
    twins = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = ops.scale3(*inputs, 1.5) if function == "scale3" else getattr(ops, function)(*inputs)
    cot = cotangents(shape, tdev)[layout]
    out.backward(cot)
    torch_fn(*twins).backward(cot)
    for got, want in zip(inputs, twins, strict=True):
        torch.testing.assert_close(got.grad, want.grad, **F32)


def test_float16(ops, tdev):
    check_parity(
        ops.hpoly,
        lambda a, x: a * x * x + a,
        [leaf(40, tdev=tdev, dtype=torch.float16), leaf(40, tdev=tdev, dtype=torch.float16)],
        tol=F16,
    )


def test_float64(ops, kind, tdev):
    if kind != "cuda":
        pytest.skip("float64 is supported on CUDA")
    check_parity(
        ops.dpoly,
        lambda a, x: a * x * x + a,
        [leaf(40, tdev=tdev, dtype=torch.float64), leaf(40, tdev=tdev, dtype=torch.float64)],
    )


def test_grid_indexed_idifftensor_2d(ops, tdev):
    w = leaf(5, 6, tdev=tdev)
    x = leaf(5, 6, tdev=tdev, grad=False)
    out = ops.gather2d(w, x, slangspec.grid((5, 6)))
    torch.testing.assert_close(out, (w * x * 3).detach(), **F32)
    cot = torch.randn(5, 6, device=tdev)
    out.backward(cot)
    torch.testing.assert_close(w.grad, cot * x * 3, **F32)


def test_no_diff_parameter_gets_no_gradient(ops, tdev):
    x, k = leaf(9, tdev=tdev), leaf(9, tdev=tdev)
    y = ops.tscale(x, k)
    y.sum().backward()
    torch.testing.assert_close(x.grad, k.detach(), **F32)
    assert k.grad is None


def test_all_eight_grad_masks_in_shuffled_order(ops, tdev):
    masks = [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    random.Random(7).shuffle(masks)
    for mask in masks * 2:
        inputs = [leaf(21, tdev=tdev, grad=bool(g)) for g in mask]
        check_parity(ops.f3, lambda a, b, c: a * b + torch.sin(c) * a + b * c * c, inputs)


# --- autograd behaviour ------------------------------------------------------------------------


def test_no_grad_builds_no_graph(ops, tdev):
    x = leaf(10, tdev=tdev)
    with torch.no_grad():
        y = ops.poly(x, x)
    assert y.grad_fn is None and not y.requires_grad


def test_retain_graph_and_repeated_backward_accumulate(ops, tdev):
    x = leaf(10, tdev=tdev)
    y = ops.square(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    torch.testing.assert_close(x.grad, 4 * x.detach(), **F32)


def test_double_backward_is_a_clear_error(ops, tdev):
    x = leaf(10, tdev=tdev)
    with pytest.raises(RuntimeError, match="ops::square: double backward is not supported"):
        torch.autograd.grad(ops.square(x).sum(), x, create_graph=True)


def test_chains_with_torch_ops(ops, tdev):
    x = leaf(12, tdev=tdev)
    a = leaf(1, tdev=tdev)
    check_parity(
        lambda a, x: ops.square(ops.poly(a, torch.tanh(x))) * 2,
        lambda a, x: (a * torch.tanh(x) ** 2 + 3 * a) ** 2 * 2,
        [a, x],
    )


# --- non-float parameters and results ------------------------------------------------------------


def test_integer_bool_and_uniform_arguments(ops, tdev):
    a = torch.arange(10, dtype=torch.int32, device=tdev)
    torch.testing.assert_close(ops.add_int(a, 5), a + 5)
    torch.testing.assert_close(ops.twice(a), a * 2)
    c = torch.tensor([True, False, True], device=tdev)
    x, y = torch.randn(3, device=tdev), torch.randn(3, device=tdev)
    torch.testing.assert_close(ops.pick(c, x, y), torch.where(c, x, y))
    torch.testing.assert_close(ops.pick(True, x, 2), x)
    torch.testing.assert_close(ops.positive(x), x > 0)


def test_rw_tensor_written_in_place(ops, tdev):
    out = torch.zeros(8, device=tdev)
    assert ops.fill(out, slangspec.grid((8,)), 0.5) is None
    torch.testing.assert_close(out, 0.5 * torch.arange(8.0, device=tdev))


def test_numpy_arrays_are_accepted(ops, tdev):
    import numpy as np

    x = np.linspace(-1, 1, 9, dtype=np.float32)
    y = ops.square(x)
    torch.testing.assert_close(y.cpu(), torch.from_numpy(x) ** 2)


def test_empty_call_shape(ops, tdev):
    y = ops.square(torch.zeros(0, device=tdev))
    assert y.shape == (0,)


# --- threads and streams -----------------------------------------------------------------------


def test_forward_and_backward_from_a_fresh_thread(ops, tdev):
    import threading

    x, a = leaf(33, tdev=tdev), leaf(1, tdev=tdev)
    failures: list[BaseException] = []

    def body():
        try:
            check_parity(ops.poly, lambda a, x: a * x * x + 3 * a, [a, x])
        except BaseException as exc:  # re-raised on the test's thread
            failures.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


def test_threads_calling_the_same_kernel_get_their_own_results(ops, tdev):
    from concurrent.futures import ThreadPoolExecutor

    def body(k: int) -> bool:
        ok = True
        for j in range(40):
            a = torch.full((1,), float(k), device=tdev)
            x = torch.full((17,), float(j), device=tdev)
            y = ops.poly(a, x)
            ok &= bool(torch.equal(y, a * x * x + 3 * a))
        return ok

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(body, range(1, 5)))


def test_kernels_run_in_order_on_torchs_current_stream(ops, tdev):
    if tdev != "cuda":
        pytest.skip("streams are CUDA's")
    side = torch.cuda.Stream()
    for stream in (torch.cuda.current_stream(), side):
        x = torch.zeros(1 << 16, device="cuda", requires_grad=True)
        cot = torch.ones_like(x)
        with torch.cuda.stream(stream):
            torch.cuda._sleep(50_000_000)  # a long kernel ahead of the fill on this stream
            with torch.no_grad():
                x.fill_(3.0)
            y = ops.square(x)
            doubled = y * 2  # a torch op that consumes the kernel's output on the same stream
            doubled.backward(cot)
        stream.synchronize()
        torch.testing.assert_close(doubled, torch.full_like(doubled, 18.0))
        torch.testing.assert_close(x.grad, torch.full_like(x, 12.0))


def test_a_struct_that_is_not_differentiable_says_its_fields_get_no_gradient(cache_dir, tdev):
    m = slangspec.load_source(
        "plainstruct",
        "struct Plain { float a; float b; };\n"
        "[Differentiable] float weigh(Plain p, float x) { return p.a * x + p.b; }\n",
        cache_dir=cache_dir,
    )
    a = torch.ones(3, device=tdev, requires_grad=True)
    x = torch.arange(3.0, device=tdev, requires_grad=True)
    with pytest.warns(
        UserWarning,
        match=r"^plainstruct::weigh: struct Plain is not IDifferentiable \(or its parameter is "
        r"no_diff\), so argument 1 \('p'\) requiring grad gets no gradient from it: make Plain "
        r"conform to IDifferentiable, or pass detached tensors$",
    ):
        y = m.weigh({"a": a, "b": torch.zeros(3, device=tdev)}, x)
    y.sum().backward()
    assert a.grad is None
    torch.testing.assert_close(x.grad, torch.ones(3, device=tdev))


def test_a_tensor_type_without_gradients_says_its_argument_gets_none(cache_dir, tdev):
    m = slangspec.load_source(
        "primaltensor",
        "import slangpy;\n"
        "[Differentiable] float scale(ITensor<float, 1> w, float x, int i) "
        "{ return w[i] * x; }\n",
        cache_dir=cache_dir,
    )
    w = torch.full((3,), 2.0, device=tdev, requires_grad=True)
    x = torch.arange(3.0, device=tdev, requires_grad=True)
    with pytest.warns(
        UserWarning,
        match=r"^primaltensor::scale: ITensor<float, 1> is a tensor type without gradients, so "
        r"argument 1 \('w'\) requiring grad gets no gradient from it: declare the parameter "
        r"IDiffTensor \(or DiffTensor\), or pass a detached tensor$",
    ):
        y = m.scale(w, x, slangspec.grid((3,)))
    y.sum().backward()
    assert w.grad is None
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, device=tdev))
