"""The size bound against slangpy's compiled Slang library (12 MiB and more): counted from the
build that writes it, never evicted for kernels' sake, and a bound too small for it said once a
process; an eviction that cannot reach its size refused before it evicts anything."""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import slangspec
from slangspec.cli import main
from workers import last_line, python

MIB = 1 << 20
SOURCE = "import slangpy;\n" + "".join(
    f"float f{i}(Tensor<float, 1> w, int j) {{ return w[j] * {i + 1}.0; }}\n" for i in range(4)
)
CALLS = """
import sys, torch, slangspec
m = slangspec.load_source("bounded", sys.argv[2], cache_dir=sys.argv[1])
for name in sys.argv[3:]:
    w = torch.arange(4.0, device="cuda" if m.device_kind == "cuda" else "cpu")
    torch.testing.assert_close(getattr(m, name)(w, slangspec.grid((4,))), w * (int(name[1:]) + 1))
print("ok")
"""


def calls(root: Path, *functions: str, bound: str | None = None) -> str:
    """Call ``functions`` of the module in a process of their own, with the cache at ``root``
    as its first module cache (so such processes read slangpy's library compiled by another
    one); its standard error."""
    env = {**os.environ, **({"SLANGSPEC_CACHE_SIZE": bound} if bound else {})}
    done = python(CALLS, root, SOURCE, *functions, env=env)
    assert last_line(done.stdout) == "ok", done.stderr[-3000:]
    return done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache root holding slangpy's compiled library and the kernels of f0 and f1, built
    once; tests take copies."""
    root = tmp_path_factory.mktemp("bound") / "built"
    calls(root, "f0", "f1")
    return root


@pytest.fixture
def root(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "cache")
    return tmp_path / "cache"


def library(root: Path) -> Path:
    (path,) = root.glob("slang/*/*/slangpy.slang-module")
    return path


def workable(beside_mib: float) -> int:
    """The bound, in MiB, the cache asks for: room for a MiB of kernels beside what it holds
    beside them, once shrunk to 90% of it."""
    return math.ceil((beside_mib + 1) / 0.9)


def functions(root: Path) -> list[str]:
    return sorted(e["function"] for e in slangspec.Cache(root).entries())


def test_slangpys_library_is_counted_by_the_build_that_writes_it(built):
    disk = slangspec.Cache(built).disk
    assert disk.size() == sum(disk.measure().values())
    assert disk.measure()["slang"] > library(built).stat().st_size > 8 * MIB


def test_a_bound_below_the_library_is_said_once_and_evicts_neither_it_nor_the_last_kernel(root):
    slangspec.Cache(root).verify()  # as after `cache verify`, which walks the tree
    before = library(root).stat()
    stderr = calls(root, "f2", "f3", bound="4M")
    said = re.findall(r"<string>:\d+: SettingWarning: (.*)", stderr)
    assert len(said) == 1, stderr[-3000:]
    pattern = (
        rf"SLANGSPEC_CACHE_SIZE=4M is below what the cache at {re.escape(str(root))} needs: it "
        r"holds ([\d.]+) MiB beside its kernels \(slangpy's compiled Slang library, the shader "
        r"cache, the index\) and needs room for kernels; raise it to at least (\d+)M\. Until "
        r"then it keeps all of that and the kernel used last, and evicts the other kernels "
        r"whenever it outgrows the bound"
    )
    beside, raised = re.fullmatch(pattern, said[0]).groups()
    assert float(beside) > before.st_size / MIB
    assert abs(int(raised) - workable(float(beside))) <= 1  # ``beside`` is rounded
    after = library(root).stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size), "built again"
    kept = functions(root)
    assert "f3" in kept and len(kept) < 4, kept


def test_an_eviction_that_cannot_reach_its_size_is_refused_and_evicts_nothing(root):
    cache = slangspec.Cache(root)
    parts = cache.disk.measure()
    beside = sum(parts.values()) - parts["kernels"] - parts["binaries"]
    refusal = (
        rf"^cannot shrink the cache at {re.escape(str(root))} to 10\.0 MiB: it holds "
        rf"{beside / MIB:.1f} MiB beside its kernels \(slangpy's compiled Slang library, the "
        r"shader cache, the index\), so evicting kernels cannot get it there and none was "
        rf"evicted; give at least {math.ceil(beside / MIB)}M, or "
        rf"{workable(beside / MIB)}M to keep room for kernels$"
    )
    with pytest.raises(ValueError, match=refusal):
        cache.evict(max_size=10 * MIB)
    command = ["cache", "evict", "--max-size", "10M", "--cache-dir", str(root)]
    r = CliRunner().invoke(main, command, catch_exceptions=False)
    assert r.exit_code == 1 and "none was evicted" in r.output, r.output
    assert functions(root) == ["f0", "f1"]
    assert library(root).exists()
