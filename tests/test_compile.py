"""slangspec calls inside torch.compile: no graph break, and eager mode's results and gradients."""

import itertools
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo.testing

import slangspec
from slangspec.settings import compile_counts
from slangspec.signatures import values
from slangspec.signatures.value_row import ValueRow
from workers import python

SHADERS = Path(__file__).parent / "shaders"
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def ops(cache_dir):
    return slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()


def leaf(*shape, tdev, grad=True):
    return torch.randn(*shape, device=tdev).requires_grad_(grad)


def outputs_and_grads(fn, inputs, mark_dynamic=False):
    """``fn``'s output and each input's gradient after backpropagating a fixed cotangent; with
    ``mark_dynamic``, the inputs' first dimensions marked dynamic for torch.compile."""
    twins = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    for t in twins if mark_dynamic else ():
        torch._dynamo.mark_dynamic(t, 0)
    out = fn(*twins)
    torch.manual_seed(1)
    out.backward(torch.randn_like(out))
    return out.detach(), [t.grad for t in twins]


def assert_same(eager, compiled):
    torch.testing.assert_close(compiled[0], eager[0], **TOL)
    for e, c in zip(eager[1], compiled[1], strict=True):
        if e is None:
            assert c is None
        else:
            torch.testing.assert_close(c, e, **TOL)


def model(ops, tdev):
    """torch layers around elementwise, vector, grid-indexed IDiffTensor and frozen-input
    slangspec calls."""
    layer = torch.nn.Linear(4, 4, device=tdev)
    frozen = torch.randn(4, 4, device=tdev)

    def run(x, b, c):
        h = layer(x)  # (N, 4)
        y = ops.f3(h, b, c)
        v = ops.scale3(y[:, :3], 2.0)  # (N, 3) as N float3
        n = v.shape[0]
        z = ops.mix2(v[:, 0].contiguous(), v[:, 1].contiguous(), slangspec.grid((n,)))
        w = ops.gather2d(h[:4], frozen, slangspec.grid((4, 4)))
        return z.sum() + w.sum() + torch.tanh(y).mean()

    return run


class _Unknown:
    """A type no call passes."""


class _UnknownRow(ValueRow):
    python_types = (_Unknown,)


def test_a_first_call_torch_compiles_finds_its_values_rows_without_a_graph_break(ops, tdev):
    """As in a process whose first call is compiled: no value's row was looked up before."""
    values.unregister(values.register(_UnknownRow()))
    inputs = [leaf(6, 4, tdev=tdev), leaf(6, 4, tdev=tdev), leaf(6, 4, tdev=tdev, grad=False)]
    explained = torch._dynamo.explain(model(ops, tdev))(*inputs)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_a_model_mixing_torch_and_slangspec_compiles_without_a_graph_break(ops, tdev):
    run = model(ops, tdev)
    inputs = [leaf(6, 4, tdev=tdev), leaf(6, 4, tdev=tdev), leaf(6, 4, tdev=tdev, grad=False)]
    explained = torch._dynamo.explain(run)(*inputs)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(run, fullgraph=True)
    assert_same(outputs_and_grads(run, inputs), outputs_and_grads(compiled, inputs))


@pytest.mark.parametrize("mask", ["".join(m) for m in itertools.product("01", repeat=3)])
def test_fullgraph_matches_eager_under_every_grad_mask(ops, tdev, mask):
    def f(a, b, c):
        return ops.f3(a, b, c) * 2

    inputs = [leaf(9, tdev=tdev, grad=g == "1") for g in mask]
    if mask == "000":
        eager = f(*inputs)
        torch.testing.assert_close(torch.compile(f, fullgraph=True)(*inputs), eager, **TOL)
        return
    compiled = torch.compile(f, fullgraph=True)
    assert_same(outputs_and_grads(f, inputs), outputs_and_grads(compiled, inputs))


def test_sizes_in_one_signature_class_compile_no_kernel_again(ops, tdev):
    def f(a, b, c):
        return ops.f3(a, b, c)

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    first = [leaf(7, tdev=tdev) for _ in range(3)]
    compiled(*first).sum().backward()
    counts = dict(compile_counts)
    for n in (9, 23):
        inputs = [leaf(n, tdev=tdev) for _ in range(3)]
        assert_same(outputs_and_grads(f, inputs), outputs_and_grads(compiled, inputs))
    assert dict(compile_counts) == counts


def _calls(ops):
    """An elementwise call, a vector parameter, and whole IDiffTensors indexed by a grid."""

    def f(a, b, v):
        n = a.shape[0]
        y = ops.f3(a, b, a) + ops.scale3(v, 2.0).sum(1)
        return y + ops.mix2(a, b, slangspec.grid((n,)))

    return f


def _inputs(n, tdev):
    return [leaf(n, tdev=tdev), leaf(n, tdev=tdev), leaf(n, 3, tdev=tdev)]


@pytest.mark.parametrize("mode", ["dynamic", "automatic", "mark_dynamic"])
def test_dynamic_sizes_reuse_the_graph_within_a_signature_class(cache_dir, tdev, mode):
    """Sizes past 4 share the extent class x: one graph and one set of kernels; sizes of 1-4
    are classes of their own, so crossing into one recompiles."""
    ops = slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)
    f = _calls(ops)
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=mode == "dynamic" or None)
    sizes = (5, 9, 17, 33) if mode == "mark_dynamic" else (5, 9, 17, 33, 3, 1)
    frames = []
    for n in sizes:
        inputs = _inputs(n, tdev)
        eager = outputs_and_grads(f, inputs)
        assert_same(eager, outputs_and_grads(compiled, inputs, mode == "mark_dynamic"))
        frames.append(counter.frame_count)
    if mode == "automatic":  # the first size is static, the second marks it dynamic
        assert frames[:4] == [1, 2, 2, 2]
    else:
        assert frames[:4] == [1, 1, 1, 1]
    if mode != "mark_dynamic":
        assert frames[4] == frames[3] + 1 and frames[5] == frames[4] + 1
    # One specialization for the class past 4, and one per size of 1-4 asked.
    classes = {signature.split(",V")[-1].rstrip("]") for signature in ops.f3._specs}
    assert classes == ({"x"} if mode == "mark_dynamic" else {"x", "3", "1"})


def test_a_function_that_writes_its_tensor_compiles(ops, tdev):
    def f(o, v):
        ops.fill(o, slangspec.grid((o.shape[0],)), v)
        return o * 1

    eager = f(torch.zeros(5, device=tdev), 1.5)
    compiled = torch.compile(f, fullgraph=True)(torch.zeros(5, device=tdev), 1.5)
    torch.testing.assert_close(compiled, eager)


def test_a_bad_argument_raises_its_clear_error_while_tracing(ops, tdev):
    def f(a, b, c):
        return ops.f3(a, b, c)

    bad = [leaf(3, tdev=tdev), torch.ones(3, dtype=torch.int64, device=tdev), leaf(3, tdev=tdev)]
    with pytest.raises(Exception) as eager:
        f(*bad)
    with pytest.raises(RuntimeError) as traced:
        torch.compile(f, fullgraph=True)(*bad)
    # torch reports it, and the error itself is its cause, as the README says.
    assert isinstance(traced.value.__cause__, TypeError)
    assert str(traced.value.__cause__) == str(eager.value)


def test_a_bad_struct_raises_its_clear_value_error_while_tracing(cache_dir, tdev):
    sf = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)

    def f(ray, t):
        return sf.at(ray, t)

    bad = ({"origin": torch.zeros(4, 3, device=tdev)}, torch.ones(4, device=tdev))
    with pytest.raises(ValueError) as eager:
        f(*bad)
    with pytest.raises(RuntimeError) as traced:
        torch.compile(f, fullgraph=True)(*bad)
    assert "missing 'dir'" in str(eager.value)
    cause = traced.value.__cause__
    if cause is None:  # torch 2.11 raises its own error from None, with the message in its own
        assert str(eager.value) in str(traced.value)
    else:
        assert isinstance(cause, ValueError) and str(cause) == str(eager.value)


def test_a_function_that_writes_a_tensor_and_returns_is_ordered_with_its_uses(ops, tdev):
    def f(o, v):
        before = o.sum()
        y = ops.stamp(o, slangspec.grid((o.shape[0],)), v)
        return before + y.sum() + o.sum()

    eager = f(torch.zeros(5, device=tdev), 1.5)
    compiled = torch.compile(f, fullgraph=True)(torch.zeros(5, device=tdev), 1.5)
    torch.testing.assert_close(compiled, eager)


def test_a_function_that_writes_a_tensor_backpropagates_through_its_result(ops, tdev):
    def f(o, x):
        y = ops.note(o, slangspec.grid((x.shape[0],)), x)
        return y * o  # o as the call left it

    def run(fn):
        o = torch.zeros(5, device=tdev)
        out, (grad,) = outputs_and_grads(lambda x: fn(o, x), [x])
        return out, grad, o

    x = leaf(5, tdev=tdev)
    eager_out, eager_grad, eager_o = run(f)
    out, grad, o = run(torch.compile(f, fullgraph=True))
    torch.testing.assert_close(out, eager_out, **TOL)
    torch.testing.assert_close(grad, eager_grad, **TOL)
    torch.testing.assert_close(o, eager_o)
    assert not o.requires_grad


MASKS = ["".join(m) for m in itertools.product("01", repeat=3) if "1" in m]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("mask", MASKS)
def test_gradcheck_in_float64_under_every_mask(ops, kind, tdev, mask, compiled):
    if kind != "cuda":
        pytest.skip("float64 kernels are CUDA's")

    def f(a, b, c):
        return ops.d3(a, b, c)

    fn = torch.compile(f, fullgraph=True) if compiled else f
    inputs = tuple(
        torch.randn(5, dtype=torch.float64, device=tdev, requires_grad=g == "1") for g in mask
    )
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)


def test_cuda_graphs_hold_the_kernels_and_replay_new_inputs_right(ops, kind, tdev):
    if kind != "cuda":
        pytest.skip("CUDA graphs are CUDA's")

    def f(a, b, c):
        return ops.f3(a, b, c)

    compiled = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            inputs = [torch.randn(33, device=tdev) for _ in range(3)]
            out = compiled(*inputs).clone()
            torch.testing.assert_close(out, f(*inputs), **TOL)
    assert not [w for w in caught if "CUDA Graph is empty" in str(w.message)]


def test_an_eager_call_kept_out_of_the_graph_backpropagates_from_compiled_code(ops, tdev):
    square = torch.compiler.disable(ops.square)

    def step(x):
        y = square(x).sum()
        y.backward()  # a graph break: backward runs from a frame torch compiled
        return y

    x = leaf(8, tdev=tdev)
    torch.compile(step)(x)
    torch.testing.assert_close(x.grad, 2 * x.detach(), **TOL)


def _printed_last(cache_dir, code: str) -> str:
    """What a new process prints last that loads ops.slang as ``m`` (its tensors on ``dev``)
    and runs ``code``."""
    done = python(
        "import sys, torch, slangspec\n"
        f"m = slangspec.load({str(SHADERS / 'ops.slang')!r}, cache_dir={str(cache_dir)!r})\n"
        "dev = 'cuda' if m.device_kind == 'cuda' else 'cpu'\n" + code
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_eager_calls_never_import_torch_dynamo(tmp_path):
    """Eager mode leaves torch.compile's machinery unloaded: importing it costs a new process
    about 1.5 s before its first result."""
    code = (
        "a = torch.rand(8, device=dev, requires_grad=True)\n"
        "m.f3(a, a, a).sum().backward()\n"
        "print(sorted(k for k in sys.modules if k.startswith('torch._dynamo')))\n"
    )
    assert _printed_last(tmp_path, code) == "[]"


def test_a_new_process_compiles_its_graph_once_with_eager_calls_between(cache_dir):
    """A process's first graph serves later sizes of its class although eager calls come
    between its calls: torch guards the graph on the value rows' memo as tracing found it."""
    code = (
        "import torch._dynamo.testing\n"
        "f = lambda a: m.square(a) * 2\n"
        "counter = torch._dynamo.testing.CompileCounterWithBackend('aot_eager')\n"
        "compiled = torch.compile(f, backend=counter, fullgraph=True)\n"
        "for n in (5, 9, 17):\n"
        "    f(torch.rand(n, device=dev, requires_grad=True)).sum().backward()\n"
        "    a = torch.rand(n, device=dev, requires_grad=True)\n"
        "    torch._dynamo.mark_dynamic(a, 0)\n"
        "    compiled(a).sum().backward()\n"
        "print(counter.frame_count)\n"
    )
    assert _printed_last(cache_dir, code) == "1"


def test_the_constant_mark_set_without_dynamo_is_the_one_torch_sets():
    """The operators' name look-ups are marked constant the way
    torch._dynamo.assume_constant_result marks a function; a torch that marks differently would
    trace the cache look-ups instead."""

    def plain() -> str:
        return ""

    ours = slangspec.runtime.module._constant_while_traced(lambda: "")
    theirs = torch._dynamo.assume_constant_result(plain)
    assert vars(ours) == vars(theirs) != {}


def test_every_operator_passes_torchs_opcheck(ops, cache_dir, tdev):
    """Schema, autograd registration, fake implementation and dynamic-shape AOT dispatch of
    each operator, on real calls (a struct dict and a struct result among them)."""
    from slangspec.runtime import traced

    sf = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)
    a, b, c = (leaf(5, tdev=tdev) for _ in range(3))
    ray = [leaf(4, 3, tdev=tdev), leaf(4, 3, tdev=tdev)]
    n, o = torch.randn(4, 3, device=tdev), torch.zeros(4, device=tdev)
    f3, reflect = traced.operator_name(ops.f3), traced.operator_name(sf.reflect_ray)
    fill, stamp = traced.operator_name(ops.fill), traced.operator_name(ops.stamp)
    plain = (f3, [a, b, c], [True, True, True], "t,t,t", [], [])
    struct = (reflect, [*ray, n], [True, True, False], "t@0.origin,t@0.dir,t", [], [])
    cases = [
        (torch.ops.slangspec.call, plain),
        (torch.ops.slangspec.call_backward, (*plain, torch.randn(5, device=tdev))),
        (torch.ops.slangspec.call_outputs, struct),
        (torch.ops.slangspec.call_outputs_backward, (*struct, [None, torch.ones_like(n)])),
        (torch.ops.slangspec.call_writing, (fill, [o], [False], "t,g1,f", [1.5], [4])),
        (torch.ops.slangspec.call_writing_returning, (stamp, [o], [False], "t,g1,f", [1.5], [4])),
    ]
    for op, args in cases:
        results = torch.library.opcheck(op.default, args)
        assert set(results.values()) == {"SUCCESS"}, (op, results)
