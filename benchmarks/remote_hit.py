"""Where a remote hit's first call spends its time, beside a cold build and a local warm hit.

    python benchmarks/remote_hit.py [--device vulkan|cuda] [--repeat 5] [--function mix2]

Every measurement is a fresh process calling ``poly`` (tests/shaders/cached.slang, no imports)
or ``mix2`` (benchmarks/bench.slang: ``IDiffTensor`` parameters, so its module imports slangpy's
Slang library) forward and backward. Modes, taking turns so that drift hits them alike:

- cold: empty local cache, empty server;
- remote hit: empty local cache at the cache root path the cold node used (a fresh node of the
  same image), the server holding what the cold node published;
- remote hit at another path: the same, with a cache root at a path of its own (Slang reaches
  every node's module cache at one path, so slangpy's compiled library serves it too);
- local warm: the local cache a cold node filled, no server.

Timing starts after ``import torch`` and torch's own first backward, and covers loading the
module and the first forward and backward. Each process also reports the seconds spent in the
phases below (inclusive; a Slang compile opens the device on first use), so the table shows
where a remote hit's time goes, phase by phase. The packages the nodes import carry bytecode,
and the toolchain is prepared, as an install leaves them (``installed.py``). Needs
``redis-server`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
TESTS = HERE.parent / "tests"
MODES = ("cold", "remote hit", "remote hit at another path", "local warm")
MODULES = {
    "poly": (str(TESTS / "shaders" / "cached.slang"), str(TESTS / "slang_lib")),
    "mix2": (str(HERE / "bench.slang"), str(HERE)),
}

CHILD = r"""
import json, sys, time
from collections import defaultdict
import torch
kind, cache, function = sys.argv[1], sys.argv[2], sys.argv[5]
tdev = "cuda" if kind == "cuda" else "cpu"
sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
warm = torch.ones(2, device=tdev, requires_grad=True)
(warm * 2).backward(torch.ones_like(warm))
import slangpy, slangspec
from slangspec.runtime import devices
from slangspec.compile.slang import vulkan_compiler
from slangspec.compile.cuda import build as cuda_build
from slangspec.compile.cuda import nvrtc
from slangspec.cache_store import module_cache, remote
from slangspec.runtime import miss_path
spent = defaultdict(float)

def timed(owner, name, phase):
    real = getattr(owner, name)
    def wrapper(*a, **k):
        start = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[phase] += time.perf_counter() - start
    setattr(owner, name, wrapper)

timed(devices, "open_device", "open slangpy's device")
timed(remote.RemoteTier, "get", "fetch entries from the server")
timed(module_cache.ModuleCacheGuard, "check", "module cache: check, fetch compiled modules")
timed(
    module_cache.ModuleCacheGuard,
    "check_while",
    "module cache fetched, then written while the device opens",
)
timed(vulkan_compiler.Compiler, "_library", "slangpy's library (IR, or front-end)")
timed(vulkan_compiler.Compiler, "_loaded", "module front-end (with the library)")
timed(vulkan_compiler.Compiler, "kernel", "Slang to target code (Vulkan)")
timed(cuda_build, "cuda_source", "Slang to CUDA source")
timed(cuda_build, "slangpy_library", "slangpy's library to IR (CUDA)")
timed(nvrtc.Nvrtc, "compile", "NVRTC")
timed(miss_path, "kernel_source", "code generation")
start = time.perf_counter()
m = slangspec.load(sys.argv[3], include_paths=[sys.argv[4]], cache_dir=cache)
x = torch.randn(4096, device=tdev, requires_grad=True)
if function == "poly":
    a = torch.randn(1, device=tdev, requires_grad=True)
    y = m.poly(a, x)
    expected = (x.detach() ** 2 + 3).sum().reshape(1)
else:
    a = torch.randn(4096, device=tdev, requires_grad=True)
    y = m.mix2(a, x, slangspec.grid((4096,)))
    expected = x.detach() + 1
sync()
forward = time.perf_counter() - start
y.sum().backward()
sync()
total = time.perf_counter() - start
ok = torch.allclose(a.grad, expected, rtol=1e-4, atol=1e-3)
print(json.dumps({"total": total, "forward": forward, "ok": bool(ok), "phases": spent}))
"""


def child(kind: str, function: str, cache: Path, remote_url: str | None) -> dict:
    env = {**os.environ, "SLANGSPEC_DEVICE": kind}
    env.pop("SLANGSPEC_REMOTE", None)
    if remote_url is not None:
        env["SLANGSPEC_REMOTE"] = remote_url
        env["SLANGSPEC_REMOTE_SECRET"] = "the secret of the benchmark nodes"  # cubins travel
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(cache), *MODULES[function], function],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"], got
    return got


def main() -> None:
    # Each process builds its own misses, as measured before the compile server existed
    # (edit_loop.py --server measures the server).
    os.environ.setdefault("SLANGSPEC_COMPILE_SERVER", "off")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=["cuda", "vulkan"], default="vulkan")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--function", choices=sorted(MODULES), default="poly")
    args = p.parse_args()
    sys.path.insert(0, str(TESTS))
    sys.path.insert(0, str(HERE))
    from installed import compile_packages, package_directory, prepare
    from redis_server import RedisServer

    compile_packages(package_directory("slangspec"), package_directory("slangpy"))
    prepare(package_directory("slangspec").parent)

    root = Path(tempfile.mkdtemp(prefix="slangspec-remote-hit-"))
    server = RedisServer(root / "redis").start()
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    try:
        for i in range(args.repeat):
            server.client().flushall()
            for directory in ("warm", "node"):
                shutil.rmtree(root / directory, ignore_errors=True)
            call = (args.device, args.function)
            runs["cold"].append(child(*call, root / "node", server.url))
            child(*call, root / "warm", None)  # fills the local cache
            shutil.rmtree(root / "node")  # a fresh node at the same path
            runs["remote hit"].append(child(*call, root / "node", server.url))
            apart = child(*call, root / f"apart-{i}", server.url)
            runs["remote hit at another path"].append(apart)
            runs["local warm"].append(child(*call, root / "warm", None))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    cold = statistics.median(r["total"] for r in runs["cold"])
    print(f"{args.device}, {args.function}, medians of {args.repeat} fresh processes per mode\n")
    print("| mode | first forward | first forward+backward | of a cold build |")
    print("| --- | ---: | ---: | ---: |")
    for mode, measured in runs.items():
        total = statistics.median(r["total"] for r in measured)
        forward = statistics.median(r["forward"] for r in measured)
        print(f"| {mode} | {forward:.3f} s | {total:.3f} s | {total / cold:.2f} |")
    phases = sorted({name for rs in runs.values() for r in rs for name in r["phases"]})
    print("\nPhases (median seconds, inclusive):\n")
    print("| phase | " + " | ".join(MODES) + " |")
    print("| --- |" + " ---: |" * len(MODES))
    for name in phases:
        cells = [statistics.median(r["phases"].get(name, 0.0) for r in runs[m]) for m in MODES]
        print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    print(f"\n{time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
