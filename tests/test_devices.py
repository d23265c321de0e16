"""Device selection and a smoke kernel straight through slangpy."""

import numpy as np
import pytest
import slangpy as spy

import slangspec
from slangspec import devices
from slangspec.cache_store import ShaderSnapshots
from slangspec.compiler import Compiler


def shaders(path):
    return ShaderSnapshots(path, 1 << 20)


def test_bad_device_names_are_value_errors(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match=r"device='metal' is not a device kind"):
        devices.select_device("metal", shaders(tmp_path))
    monkeypatch.setenv("SLANGSPEC_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"SLANGSPEC_DEVICE='tpu' is not a device kind"):
        devices.select_device(None, shaders(tmp_path))


def test_argument_wins_over_environment(monkeypatch, kind, cache_dir):
    monkeypatch.setenv("SLANGSPEC_DEVICE", "nonsense")
    shaders = slangspec.Cache(cache_dir).shader_cache()
    assert devices.select_device(kind, shaders)[0] == kind


def test_auto_falls_back_and_reports_every_failure(monkeypatch, tmp_path):
    monkeypatch.delenv("SLANGSPEC_DEVICE", raising=False)

    def refuse(kind, shaders):
        raise devices.DeviceUnavailableError(f"{kind}: refused for the test")

    monkeypatch.setattr(devices, "open_device", refuse)
    with pytest.raises(
        devices.DeviceUnavailableError,
        match="tried cuda: refused for the test; vulkan: refused for the test",
    ):
        devices.select_device(None, shaders(tmp_path))


def test_auto_prefers_cuda_then_vulkan(monkeypatch, tmp_path):
    monkeypatch.delenv("SLANGSPEC_DEVICE", raising=False)
    tried = []

    def open_device(kind, shaders):
        tried.append(kind)
        if kind == "cuda":
            raise devices.DeviceUnavailableError("cuda: none")
        return "vulkan-device"

    monkeypatch.setattr(devices, "open_device", open_device)
    assert devices.select_device(None, shaders(tmp_path)) == ("vulkan", "vulkan-device")
    assert tried == ["cuda", "vulkan"]


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
    shaders = slangspec.Cache(cache_dir).shader_cache()
    _, device = devices.select_device(kind, shaders)
    (tmp_path / "smoke.slang").write_text(SMOKE)
    session = Compiler(device, tmp_path).session([tmp_path], {})
    kernel = device.create_compute_kernel(session.load_program("smoke", ["smoke"]))
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    x = np.linspace(-2, 2, 100, dtype=np.float32)
    bx = device.create_buffer(data=x, usage=usage)
    by = device.create_buffer(size=x.nbytes, usage=usage)
    kernel.dispatch(thread_count=[100, 1, 1], n=100, x=bx.device_address, y=by.device_address)
    np.testing.assert_allclose(by.to_numpy().view(np.float32), x * x + 1, rtol=1e-6)
