"""Kernels a package ships: the example package (examples/package) warmed, exported with
``specialize cache export --for-package``, built and installed with pip, and run by fresh
processes with empty caches; then damaged, tampered with and made writable by others."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEVICE_KIND

from slangspec.cli import main

PACKAGE = Path(__file__).parent.parent / "examples" / "package"
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]

# A fresh process: imports the installed package, runs forward and backward, compares with
# torch's own (float32; tolerances cover the kernel's different order of operations).
RUN = """
import json, sys, warnings
import torch
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import polyops
    from slangspec.settings import compile_counts
    dev = "cuda" if torch.cuda.is_available() and "{kind}" == "cuda" else "cpu"
    c = torch.tensor([1.0, -2.0, 0.5, 0.25], device=dev, requires_grad=True)
    x = torch.linspace(-2, 2, 37, device=dev, requires_grad=True)
    y = polyops.cubic(c, x)
    y.sum().backward()
ref_c, ref_x = c.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
ref = ref_c[0] + ref_c[1] * ref_x + ref_c[2] * ref_x**2 + ref_c[3] * ref_x**3
ref.sum().backward()
ok = (
    torch.allclose(y, ref, atol=1e-5)
    and torch.allclose(c.grad, ref_c.grad, atol=1e-4)
    and torch.allclose(x.grad, ref_x.grad, atol=1e-5)
)
print(json.dumps({{
    "ok": bool(ok),
    "slangpy": "slangpy" in sys.modules,
    "counts": dict(compile_counts),
    "warnings": [str(w.message) for w in caught],
}}))
"""


def specialize(*args: object) -> tuple[int, str]:
    words = [str(a) for a in args]
    if words[0] == "warm":
        words += ["--jobs", "1"]
    result = CliRunner().invoke(main, words, catch_exceptions=False)
    return result.exit_code, result.output


def fresh_run(site: Path, cache: Path) -> dict:
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "SLANGSPEC_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", RUN.format(kind=DEVICE_KIND)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cache.parent,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example package, its kernels warmed and exported into it, installed with pip: the
    directory it is installed in."""
    root = tmp_path_factory.mktemp("package")
    source = root / "src"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("kernels", "build"))
    author = root / "author-cache"
    code, out = specialize("warm", source / "polyops" / "warm.toml", "--cache-dir", author)
    assert code == 0, out
    kernels = source / "polyops" / "kernels"
    code, out = specialize("cache", "export", "--for-package", kernels, "--cache-dir", author)
    assert code == 0, out
    assert "exported 3 entries" in out
    site = root / "site"
    pip = subprocess.run(
        [*PIP_INSTALL, "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    assert (site / "polyops" / "kernels" / "index.json").is_file()
    return site


def copy_of(site: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    return copy


def test_a_fresh_environment_runs_the_kernels_a_package_ships(installed, tmp_path):
    got = fresh_run(installed, tmp_path / "cache")
    assert got["ok"]
    assert got["warnings"] == []
    # No type resolution and no code generation: plans and sources come from the package.
    assert got["counts"].get("specialize", 0) == 0
    assert got["counts"].get("codegen", 0) == 0
    if DEVICE_KIND == "cuda":
        # Cubins and the facts a fresh process asks Slang or slangpy for ship too.
        assert got["counts"] == {}
        assert not got["slangpy"]
    # What the package served is now in the local cache: the next process hits it there.
    again = fresh_run(installed, tmp_path / "cache")
    assert again["ok"] and again["counts"].get("specialize", 0) == 0


def test_shipped_kernels_others_can_write_are_not_used(installed, tmp_path):
    site = copy_of(installed, tmp_path)
    index = site / "polyops" / "kernels" / "index.json"
    index.chmod(index.stat().st_mode | stat.S_IWOTH)
    got = fresh_run(site, tmp_path / "cache")
    assert got["ok"]
    assert got["counts"]["specialize"] == 1  # built here
    assert any("are not used: others can write to index.json" in w for w in got["warnings"])


def test_a_damaged_index_is_refused_whole_and_everything_built_here(installed, tmp_path):
    site = copy_of(installed, tmp_path)
    index = site / "polyops" / "kernels" / "index.json"
    index.write_bytes(index.read_bytes()[:500])
    got = fresh_run(site, tmp_path / "cache")
    assert got["ok"]
    assert got["counts"]["specialize"] == 1
    assert any("index.json cannot be read" in w for w in got["warnings"])


def test_a_misshapen_index_is_refused_naming_the_field(installed, tmp_path):
    site = copy_of(installed, tmp_path)
    index = site / "polyops" / "kernels" / "index.json"
    data = json.loads(index.read_text())
    key = sorted(data["entries"])[0]
    data["entries"][key]["kernels"]["forward"] = "../../etc/passwd"
    index.write_text(json.dumps(data))
    got = fresh_run(site, tmp_path / "cache")
    assert got["ok"]
    assert any(f"entries.{key}.kernels.forward" in w for w in got["warnings"])


def test_an_entry_whose_plan_was_edited_is_not_served(installed, tmp_path):
    site = copy_of(installed, tmp_path)
    index = site / "polyops" / "kernels" / "index.json"
    data = json.loads(index.read_text())
    for entry in data["entries"].values():
        plan = json.loads(entry["plan"])
        plan["args"][1]["scalar"] = "half"  # generates other code than the kernels named
        entry["plan"] = json.dumps(plan)
    index.write_text(json.dumps(data))
    got = fresh_run(site, tmp_path / "cache")
    assert got["ok"]
    assert got["counts"]["specialize"] == 1
    assert any("is not the source its plan generates" in w for w in got["warnings"])


@pytest.mark.skipif(DEVICE_KIND != "cuda", reason="only CUDA entries carry binaries")
def test_a_damaged_shipped_binary_is_built_here(installed, tmp_path):
    site = copy_of(installed, tmp_path)
    blobs = sorted((site / "polyops" / "kernels" / "blobs").iterdir())
    assert blobs
    for blob in blobs:
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0xFF
        blob.write_bytes(bytes(data))
    got = fresh_run(site, tmp_path / "cache")
    assert got["ok"]
    assert any("is damaged; building here" in w for w in got["warnings"])


def test_export_adds_to_what_a_directory_ships_and_keeps_off_other_directories(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("kernels", "build"))
    author = tmp_path / "author-cache"
    code, out = specialize("warm", source / "polyops" / "warm.toml", "--cache-dir", author)
    assert code == 0, out
    kernels = tmp_path / "kernels"
    first = ["cache", "export", "--for-package", kernels, "--cache-dir", author, "--json"]
    code, out = specialize(*first, "--function", "nothing_by_this_name")
    assert code == 1 and "no entry matched" in out
    code, out = specialize(*first, "--device", DEVICE_KIND)
    assert code == 0 and json.loads(out)["shipped"] == 3
    code, out = specialize(*first, "--device", DEVICE_KIND)  # again: the same 3, not 6
    assert code == 0 and json.loads(out)["entries"] == 3 and json.loads(out)["shipped"] == 3
    assert stat.S_IMODE((kernels / "index.json").stat().st_mode) == 0o644

    other = tmp_path / "docs"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, out = specialize("cache", "export", "--for-package", other, "--cache-dir", author)
    assert code == 2 and "holds no shipped kernels" in out
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    code, out = specialize("cache", "export", tmp_path / "b.json", "--module", "cubic")
    assert code == 2 and "--for-package" in out
    code, out = specialize("cache", "export", tmp_path / "b.json", "--for-package", kernels)
    assert code == 2 and "either FILE" in out


def test_verify_shipped_checks_a_directory_as_a_process_serving_it_would(installed, tmp_path):
    kernels = copy_of(installed, tmp_path) / "polyops" / "kernels"
    code, out = specialize("cache", "verify", "--shipped", kernels, "--json")
    assert code == 0, out
    assert json.loads(out)["checked"] == 3 and json.loads(out)["remaining"] == []
    index = kernels / "index.json"
    data = json.loads(index.read_text())
    key = sorted(data["entries"])[0]
    plan = json.loads(data["entries"][key]["plan"])
    plan["args"][0]["param"] = "renamed"  # the kernels it generates are the same
    data["entries"][key]["plan"] = json.dumps(plan)
    index.write_text(json.dumps(data))
    code, out = specialize("cache", "verify", "--shipped", kernels, "--json")
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert problem == {
        "key": key,
        "problem": "plan is not the one type resolution makes for its call",
    }
    index.chmod(0o666)
    code, out = specialize("cache", "verify", "--shipped", kernels)
    assert code == 1 and "not used: others can write to index.json" in out
    code, out = specialize("cache", "verify", "--shipped", kernels, "--repair")
    assert code == 2
