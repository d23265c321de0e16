"""Device selection, closing devices at exit, and a smoke kernel straight through slangpy."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import slangpy as spy
import torch

import slangspec
from slangspec.cache_store import ShaderSnapshots
from slangspec.compile.slang.vulkan_compiler import Compiler
from slangspec.runtime import devices
from slangspec.settings import setting
from slangspec.signatures.module_text import ModuleText
from workers import python

OPS = Path(__file__).parent / "shaders" / "ops.slang"


def shaders(path):
    return ShaderSnapshots(path, 1 << 20)


def asked(device):
    """The kind ``device=`` else ``SLANGSPEC_DEVICE`` asks for, read as the runtime reads it:
    devices reads no setting itself."""
    return setting("SLANGSPEC_DEVICE", device, "device")


def test_bad_device_names_are_value_errors(monkeypatch, tmp_path):
    with pytest.raises(
        ValueError, match=r"^device='metal': expected one of cuda, vulkan, like cuda$"
    ):
        slangspec.load(OPS, device="metal", cache_dir=tmp_path)
    monkeypatch.setenv("SLANGSPEC_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"^SLANGSPEC_DEVICE='tpu': expected one of cuda, vulkan"):
        slangspec.load(OPS, cache_dir=tmp_path)


def test_argument_wins_over_environment(monkeypatch, kind):
    monkeypatch.setenv("SLANGSPEC_DEVICE", "nonsense")
    assert devices.device_kind(asked(kind)) == kind
    monkeypatch.setenv("SLANGSPEC_DEVICE", kind.upper())
    assert devices.device_kind(asked(None)) == kind


@pytest.mark.parametrize("gpu", [True, False])
def test_auto_is_cuda_when_torch_sees_a_gpu_else_vulkan(monkeypatch, tmp_path, gpu):
    monkeypatch.delenv("SLANGSPEC_DEVICE", raising=False)
    monkeypatch.setattr(devices, "GPU_DRIVER_NODES", (str(tmp_path),))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert devices.device_kind(None) == ("cuda" if gpu else "vulkan")


def test_without_a_gpu_driver_the_default_kind_is_vulkan_and_torch_is_not_imported():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "from slangspec.runtime import devices\n"
        "devices.GPU_DRIVER_NODES = ('/nonexistent/nvidiactl',)\n"
        "print(devices.device_kind(None))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SLANGSPEC_DEVICE"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "vulkan"


def test_choosing_a_kind_opens_no_device(monkeypatch, kind):
    def refuse(*_a):
        raise AssertionError("chose a kind by opening a device")

    monkeypatch.setattr(devices, "_open", refuse)
    assert devices.device_kind(kind) == kind


def test_a_cuda_identity_is_what_torch_reports_of_the_device(kind, tmp_path):
    """Warming workers name their device through the driver, JIT processes beside torch: the
    two must key the same entries."""
    if kind != "cuda":
        pytest.skip("needs CUDA")
    index = devices.cuda_ordinal()
    major, minor = torch.cuda.get_device_capability(index)
    assert index == torch.cuda.current_device()
    m = slangspec.load_source("m", "float f(float x) { return x; }", cache_dir=tmp_path)
    assert m.backend.identity() == {"kind": "cuda", "arch": f"sm_{major}{minor}"}


def test_only_vulkan_devices_are_opened(tmp_path):
    shaders = slangspec.Cache(tmp_path).files.shader_cache()
    with pytest.raises(devices.DeviceUnavailableError, match="Vulkan only"):
        devices.open_device("cuda", shaders)


def test_a_device_slangpy_cannot_open_names_the_kind(monkeypatch, tmp_path):
    def refuse(kind, shaders):
        raise RuntimeError("refused for the test")

    monkeypatch.setattr(devices, "_open", refuse)
    with pytest.raises(devices.DeviceUnavailableError, match="vulkan: refused for the test"):
        devices.open_device("vulkan", shaders(tmp_path / "elsewhere"))


CLOSED_AT_EXIT = """
import atexit, sys
import slangpy as spy
import torch
closed = []
close = spy.Device.close
spy.Device.close = lambda self: (closed.append(self), close(self))[1]
atexit.register(lambda: print("devices closed before teardown:", len(closed)))
import slangspec
m = slangspec.load(sys.argv[1], device=sys.argv[2], cache_dir=sys.argv[3])
dev = "cuda" if sys.argv[2] == "cuda" else "cpu"
a = torch.rand(8, device=dev, requires_grad=True)
m.poly(a, torch.rand(8, device=dev)).sum().backward()
"""


def test_a_process_closes_its_device_before_the_interpreter_tears_down(kind, tmp_path):
    # A device left to the teardown could be destroyed after what it uses and crash the
    # process after its work was done. On CUDA no slangpy device is opened at all.
    shader = Path(__file__).parent / "shaders" / "ops.slang"
    done = python(CLOSED_AT_EXIT, shader, kind, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    opened = 1 if kind == "vulkan" else 0
    assert f"devices closed before teardown: {opened}" in done.stdout, done.stdout


SMOKE = """
[shader("compute")]
[numthreads(32, 1, 1)]
void smoke(uint3 tid : SV_DispatchThreadID, uniform uint n, uniform float* x, uniform float* y)
{
    if (tid.x >= n)
        return;
    y[tid.x] = x[tid.x] * x[tid.x] + 1.0;
}
"""


def test_smoke_kernel_runs_and_checks_numbers(kind, tmp_path, cache_dir):
    if kind == "cuda":
        pytest.skip("CUDA kernels build through compile/ (tests/test_cuda_step.py), not a device")
    shaders = slangspec.Cache(cache_dir).files.shader_cache()
    device = devices.open_device(kind, shaders)
    text = ModuleText("smoke", tmp_path / "smoke.slang", SMOKE)
    module = Compiler(device, tmp_path / "slang", tmp_path).front_end(text, [], {}, "").module
    program = module.session.link_program([module], [module.entry_point("smoke")])
    kernel = device.create_compute_kernel(program)
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    x = np.linspace(-2, 2, 100, dtype=np.float32)
    bx = device.create_buffer(data=x, usage=usage)
    by = device.create_buffer(size=x.nbytes, usage=usage)
    kernel.dispatch(thread_count=[100, 1, 1], n=100, x=bx.device_address, y=by.device_address)
    np.testing.assert_allclose(by.to_numpy().view(np.float32), x * x + 1, rtol=1e-6)
