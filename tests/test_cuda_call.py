"""The generated forward and backward calls of CUDA specializations against the generic path."""

import ctypes
import struct
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import slangspec
from slangspec.codegen.uniforms import UniformBlock
from slangspec.runtime.cuda_call import forward_call
from slangspec.runtime.cuda_driver import LaunchParts

SHADERS = Path(__file__).parent / "shaders"


@pytest.fixture(scope="module")
def ops(cache_dir, tdev):
    if tdev != "cuda":
        pytest.skip("the generated calls are CUDA's")
    return slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)


def spec_of(fn, *args):
    return fn.specialization(fn.signature(*args))


CALLS = {
    "poly, broadcast": lambda t: ("poly", t(1), t(33)),
    "poly, strided": lambda t: ("poly", t(8, 5)[:, 1], t(8, 5)[:, 2]),
    "scale3, a vector": lambda t: ("scale3", t(9, 3), 1.5),
    "tscale, a uniform": lambda t: ("tscale", t(17), -2.0),
    "mix2, whole tensors": lambda t: ("mix2", t(12), t(12), slangspec.grid((12,))),
    "gather2d, two ranks": lambda t: ("gather2d", t(3, 4), t(3, 4), slangspec.grid((3, 4))),
    "pick, bool and float": lambda t: ("pick", t(6) > 0, t(6), t(6)),
}


@pytest.mark.parametrize("case", list(CALLS))
@pytest.mark.parametrize("grad", [False, True])
def test_generated_call_matches_the_generic_path(ops, tdev, case, grad, monkeypatch):
    def t(*shape):
        return torch.randn(*shape, device=tdev)

    name, *args = CALLS[case](t)
    fn = getattr(ops, name)
    if grad:
        args = [
            a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        ]
    out = fn(*args)
    spec = spec_of(fn, *args)
    assert spec._fast is not None, "no generated call for this specialization"
    monkeypatch.setattr(spec, "_fast", None)
    torch.testing.assert_close(out, fn(*args), rtol=0, atol=0)


def test_generated_call_leaves_refused_values_to_the_generic_errors(ops, tdev):
    x = torch.randn(5, device=tdev)
    ops.tscale(x, 1.0)
    assert spec_of(ops.tscale, x, 1.0)._fast is not None
    with pytest.raises(ValueError, match=r"argument 2 \('k'\)"):
        ops.tscale(x, 1e300)
    with pytest.raises(ValueError, match="argument 1"):
        ops.tscale(x.cpu(), 1.0)


def test_generated_call_launches_nothing_for_an_empty_call(ops, tdev):
    x = torch.randn(0, device=tdev)
    assert ops.square(x).shape == (0,)


def grads_of(fn, args, cot):
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    for a in leaves:
        a.grad = None
    out = fn(*args)
    if cot == "expanded":
        out.sum().backward()
    else:
        out.backward(cot)
    return [a.grad for a in leaves]


TRAINED = {case: make for case, make in CALLS.items() if not case.startswith("pick")}


@pytest.mark.parametrize("case", list(TRAINED))
@pytest.mark.parametrize("cot", ["random", "expanded"])
def test_generated_backward_matches_the_generic_path(ops, tdev, case, cot, monkeypatch):
    def t(*shape):
        return torch.randn(*shape, device=tdev)

    name, *args = TRAINED[case](t)
    fn = getattr(ops, name)
    args = [a.requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out = fn(*args)
    cotangent = torch.randn(out.shape, device=tdev) if cot == "random" else cot
    generated = grads_of(fn, args, cotangent)
    spec = spec_of(fn, *args)
    (call,) = spec._calls.values()
    assert call.__name__ == "backward", "no generated backward for this specialization"
    monkeypatch.setattr(spec._binding, "backward_call", lambda *_: None)
    monkeypatch.setattr(spec, "_calls", {})
    generic = grads_of(fn, args, cotangent)
    assert len(generated) == len(generic) > 0
    for g, h in zip(generated, generic, strict=True):
        torch.testing.assert_close(g, h, rtol=0, atol=0)


@pytest.mark.parametrize(
    "case",
    [
        lambda t: ("poly", t(1), t(20000)),
        lambda t: ("mix2", t(20000), t(20000), slangspec.grid((20000,))),
    ],
    ids=["broadcast leaf", "whole tensors"],
)
def test_generated_backward_adds_into_copies_of_a_gradient(ops, tdev, case, monkeypatch):
    """20,000 calls add their parts into four copies of each gradient, which the generated and
    the generic backward alike sum (in whatever order the warps add: close, not equal)."""
    name, *args = case(lambda *shape: torch.randn(*shape, device=tdev, requires_grad=True))
    fn = getattr(ops, name)
    cot = torch.randn(20000, device=tdev)
    generated = grads_of(fn, args, cot)
    spec = spec_of(fn, *args)
    assert next(iter(spec._calls.values())).__name__ == "backward"
    monkeypatch.setattr(spec._binding, "backward_call", lambda *_: None)
    monkeypatch.setattr(spec, "_calls", {})
    generic = grads_of(fn, args, cot)
    for g, h in zip(generated, generic, strict=True):
        torch.testing.assert_close(g, h, rtol=1e-5, atol=1e-4)
    if name == "poly":
        x = args[1].detach()
        want = (cot * (x * x + 3)).sum(0, keepdim=True)
        torch.testing.assert_close(generated[0], want, rtol=1e-4, atol=1e-3)


def test_generated_backward_of_one_trained_input(ops, tdev):
    w, x = torch.randn(3, 4, device=tdev, requires_grad=True), torch.randn(3, 4, device=tdev)
    ops.gather2d(w, x, slangspec.grid((3, 4))).sum().backward()
    spec = spec_of(ops.gather2d, w, x, slangspec.grid((3, 4)))
    assert next(iter(spec._calls.values())).__name__ == "backward"
    torch.testing.assert_close(w.grad, 3 * x)
    assert x.grad is None


def test_an_empty_call_backpropagates_through_the_generic_path(ops, tdev):
    x = torch.randn(0, device=tdev, requires_grad=True)
    ops.square(x).sum().backward()
    assert x.grad.shape == (0,)


def test_a_function_with_no_parameters_gets_a_launcher(cache_dir, monkeypatch):
    """The generated forward of a call with no arguments compiles and launches, checked on any
    machine: the driver is a stub that notes the launch, and the block is the kernel's ``_n``
    and result pointer."""
    m = slangspec.load_source(
        "nolauncher",
        "float seven() { return 7.0; }\nT number<T : IInteger>() { return T(42); }",
        cache_dir=cache_dir,
    )
    launches = []

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launches.append((gx, bx))
        return 0

    layout = {"size": 16, "params": [["_n", 0, {"scalar": "I"}], ["_out0", 8, {"pointer": True}]]}
    buffer = ctypes.create_string_buffer(16)
    parts = LaunchParts(ctypes.c_void_p(), 32, threading.Lock(), buffer, None, launch)
    kernel = SimpleNamespace(block=UniformBlock(layout), parts=lambda: parts)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, raising=False)
    cpu = torch.device("cpu")
    for fn, dtype in [(m.seven, torch.float32), (m["number<int>"], torch.int32)]:
        call = forward_call(fn.plan(), kernel, cpu, lambda: None, lambda args: ())
        (out,), shape = call(())
        assert shape == () and out.shape == () and out.dtype == dtype
        assert struct.unpack_from("<I4xQ", buffer) == (1, out.data_ptr())
    assert launches == [(1, 32)] * 2


HOARDER = """
extern "C" __global__ void hoard(float* out, int n)
{
    volatile float kept[WORDS];
    for (int i = 0; i < WORDS; i++)
        kept[i] = out[i % n];
    out[threadIdx.x % n] = kept[(threadIdx.x * 7919) % WORDS];
}
"""


@pytest.mark.parametrize("words", [8, 200_000])
def test_a_launch_refused_for_local_memory_says_so(tdev, words):
    if tdev != "cuda":
        pytest.skip("a CUDA launch")
    from slangspec.compile.cuda.nvrtc import nvrtc
    from slangspec.runtime.cuda_api import CudaDriverError, P, check, driver, primary_context
    from slangspec.runtime.cuda_driver import launch_failed

    major, minor = torch.cuda.get_device_capability()
    cubin = nvrtc().compile(HOARDER.replace("WORDS", str(words)), f"sm_{major}{minor}")
    check(driver().cuCtxSetCurrent(primary_context(torch.cuda.current_device())), "cuCtxSetCurrent")
    module, function = P(), P()
    check(driver().cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
    check(driver().cuModuleGetFunction(ctypes.byref(function), module, b"hoard"), "get")
    out = torch.ones(64, device="cuda")
    args = (ctypes.c_void_p(out.data_ptr()), ctypes.c_int(64))
    params = (ctypes.c_void_p * 2)(*(ctypes.addressof(a) for a in args))
    grid = 132 * 16
    result = driver().cuLaunchKernel(function, grid, 1, 1, 128, 1, 1, 0, None, params, None)
    if words == 8:
        assert result == 0
        torch.cuda.synchronize()
        return
    assert result in (1, 2)  # CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY
    reason = {1: r"CUDA lets a thread keep \(512 KiB\)", 2: "all the threads it keeps"}[result]
    with pytest.raises(
        CudaDriverError, match=rf"800,\d{{3}} bytes of local memory a thread.*{reason}"
    ):
        launch_failed(function, result)
