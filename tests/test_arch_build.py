"""CUDA kernels built for named architectures with ``specialize warm --arch``, on any machine
(CI has no GPU and no CUDA driver): each kept cubin is an ELF for its architecture, the package
export of them verifies, and on a GPU of that architecture a fresh process serving them builds
nothing and matches torch."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from test_cuda_step import elf_arch, needs_nvrtc

import slangspec
from workers import one_at_a_time, python, specialize

EXAMPLES = Path(__file__).parent.parent / "examples"
RUN_SHIPPED = """
import json, sys
import torch
import slangspec
from slangspec.settings import compile_counts
m = slangspec.load(sys.argv[1], shipped=sys.argv[2], cache_dir=sys.argv[3], device="cuda")
coeffs = torch.tensor([[0.5, -1.0, 2.0]], device="cuda", requires_grad=True)
damping = torch.tensor([0.25], device="cuda")
x = torch.linspace(-1, 1, 33, device="cuda")
y = m.model(coeffs, damping, x)
y.sum().backward()
c = coeffs.detach().clone().requires_grad_()
want = (c[:, 0] + c[:, 1] * x + c[:, 2] * x * x) * torch.exp(-damping * x * x)
want.sum().backward()
ok = torch.allclose(y, want, atol=1e-5) and torch.allclose(coeffs.grad, c.grad, atol=1e-4)
print(json.dumps({"ok": bool(ok), "counts": dict(compile_counts)}))
"""


def statuses_built_for_sm_90(manifest: Path, cache: Path) -> list[str]:
    """``specialize warm MANIFEST --device cuda --arch sm_90`` with no GPU visible: the status
    of each specialization it reports."""
    done = specialize(
        "warm", manifest, "--device", "cuda", "--arch", "sm_90", "--cache-dir", cache, "--json",
        env={"CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [r["status"] for r in json.loads(done.stdout)]


def cubins(cache: Path) -> list[bytes]:
    """Every kept binary of ``cache``, read through its entries."""
    c = slangspec.Cache(cache)
    found = {}
    for _, row in c.rows():
        for b in (row or {}).get("binaries", {}).values():
            found[b["file"]] = c.read_blob(b["file"])
    return list(found.values())


@needs_nvrtc
def test_a_process_building_without_workers_builds_every_architecture_it_is_given(tmp_path):
    """Where torch is imported the command cannot fork workers and builds each ``--arch`` in
    turn itself: the second must not be served the modules the first loaded."""
    cache = tmp_path / "cache"
    code = "import torch, runpy; runpy.run_module('slangspec', run_name='__main__')"
    with one_at_a_time("arch-build"):
        done = python(
            code, "warm", EXAMPLES / "warm.toml", "--device", "cuda", "--arch", "sm_90",
            "--arch", "sm_80", "--cache-dir", cache, "--json", "--jobs", "1",
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert {(r["arch"], r["status"]) for r in json.loads(done.stdout)} == {
        ("sm_90", "built"),
        ("sm_80", "built"),
    }
    assert sorted({elf_arch(c) for c in cubins(cache)}) == [80, 90]


@needs_nvrtc
def test_warm_for_architectures_builds_their_cubins_without_a_gpu_and_ships_them(tmp_path, kind):
    cache, package = tmp_path / "cache", tmp_path / "kernels"
    # No GPU is needed, and none is used where there is one.
    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    manifest = EXAMPLES / "warm.toml"
    done = specialize(
        "warm", manifest, "--device", "cuda", "--arch", "sm_90", "--arch", "sm_80",
        "--cache-dir", cache, "--json", env=no_gpu,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert {r["arch"] for r in results} == {"sm_90", "sm_80"}
    assert all(r["status"] == "built" for r in results), results
    made = cubins(cache)
    assert made and all(c[:4] == b"\x7fELF" for c in made)
    assert all(struct.unpack_from("<H", c, 18)[0] == 190 for c in made)  # EM_CUDA
    assert sorted({elf_arch(c) for c in made}) == [80, 90]
    counted = slangspec.Cache(cache).disk  # the prelude a build keeps is in the size
    assert counted.size() == sum(counted.measure().values())

    again = specialize("warm", manifest, "--arch", "sm_90", "--cache-dir", cache, env=no_gpu)
    assert again.returncode == 0 and "2 cached" in again.stdout, again.stdout

    exported = specialize("cache", "export", "--for-package", package, "--cache-dir", cache)
    assert exported.returncode == 0, exported.stderr[-3000:]
    verified = specialize("cache", "verify", "--shipped", package, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr[-3000:]
    assert json.loads(verified.stdout)["problems"] == []

    if kind != "cuda":
        return
    import torch

    if torch.cuda.get_device_capability() not in ((9, 0), (8, 0)):
        pytest.skip("the GPU is of neither architecture built for")
    served = subprocess.run(
        [sys.executable, "-c", RUN_SHIPPED, EXAMPLES / "quickstart.slang", package,
         tmp_path / "empty"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert served.returncode == 0, served.stderr[-3000:]
    out = json.loads(served.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["counts"] == {}, out


def test_a_bad_architecture_is_refused_by_name(tmp_path):
    done = specialize("warm", EXAMPLES / "warm.toml", "--arch", "90", "--cache-dir", tmp_path)
    assert done.returncode == 2
    assert "--arch" in done.stderr and "sm_90" in done.stderr


def test_a_process_building_for_an_architecture_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SLANGSPEC_CUDA_ARCH", "sm_90")
    with pytest.raises(slangspec.DeviceUnavailableError, match="SLANGSPEC_CUDA_ARCH=sm_90"):
        slangspec.load(EXAMPLES / "quickstart.slang", device="cuda", cache_dir=tmp_path)
