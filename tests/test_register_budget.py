"""A kernel that takes more registers than the budget is built again under launch bounds; the
kernels beside it in the same source come out as before. Runs NVRTC alone, without a GPU."""

from __future__ import annotations

import pytest

from slangspec.compile.cuda import build, nvrtc
from slangspec.compile.cuda.build import cubin_of
from slangspec.compile.cuda.cubin import kernel_registers
from slangspec.compile.cuda.registers import REGISTER_BUDGET, bounded, over_budget
from slangspec.compile.cuda.source import CudaEntry, CudaSource

try:
    nvrtc.library_path()
except nvrtc.NvrtcUnavailableError:
    pytest.skip("NVIDIA's NVRTC wheel is not installed", allow_module_level=True)

SOURCE = """
extern "C" __global__ void light(float* a) { a[threadIdx.x] *= 2.0f; }
extern "C" __global__ void heavy(const float* a, float* out, int n)
{
    float v[64];
    for (int i = 0; i < 64; i++)
        v[i] = a[i * n + threadIdx.x];
    float s = 0.0f;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            s += v[i] * v[(i + j) % 64] * (float)(i ^ j);
    for (int i = 0; i < 64; i++)
        out[i * n + threadIdx.x] = v[i] * s;
}
"""
ENTRIES = {name: CudaEntry(name, None, 128) for name in ("light", "heavy")}


@pytest.fixture(scope="module")
def plain() -> dict[str, int]:
    return kernel_registers(nvrtc.nvrtc().compile(SOURCE, "sm_90"))


def test_registers_are_read_per_kernel_of_a_cubin(plain):
    assert set(plain) == {"light", "heavy"}
    assert 0 < plain["light"] <= 16 < REGISTER_BUDGET < plain["heavy"]
    under = bounded(SOURCE, {"heavy": 128})
    assert "__launch_bounds__(128, 8) heavy(" in under
    assert kernel_registers(nvrtc.nvrtc().compile(under, "sm_90"))["heavy"] <= 64


def test_only_the_kernel_over_the_budget_is_bounded(plain):
    assert over_budget(plain, {"light": 128, "heavy": 128}) == {"heavy": 128}
    built = kernel_registers(cubin_of(CudaSource(SOURCE, ENTRIES, False), "sm_90", "t.cu"))
    assert built["heavy"] <= REGISTER_BUDGET
    assert built["light"] == plain["light"]


def test_a_kernel_whose_declaration_is_not_found_keeps_its_first_build(plain):
    assert bounded(SOURCE, {"absent": 128}) is None
    assert bounded(SOURCE.replace("void heavy(", "void  heavy("), {"heavy": 128}) is None
    text = SOURCE.replace('extern "C" __global__ void heavy', 'extern "C" __global__  void heavy')
    built = kernel_registers(cubin_of(CudaSource(text, ENTRIES, False), "sm_90", "t.cu"))
    assert built["heavy"] == plain["heavy"]


def test_a_cubin_whose_attributes_cannot_be_read_is_kept_as_built(plain, monkeypatch):
    def unreadable(cubin: bytes) -> dict[str, int]:
        raise ValueError("its kernels' attributes are unreadable")

    monkeypatch.setattr(build, "kernel_registers", unreadable)
    built = kernel_registers(cubin_of(CudaSource(SOURCE, ENTRIES, False), "sm_90", "t.cu"))
    assert built["heavy"] == plain["heavy"]


def test_a_group_too_large_for_the_budget_is_left_alone():
    assert over_budget({"heavy": 200}, {"heavy": 2048}) == {}


def test_an_unreadable_cubin_is_a_value_error():
    with pytest.raises(ValueError, match="unreadable"):
        kernel_registers(b"\x7fELF\x02" + b"\0" * 59)
