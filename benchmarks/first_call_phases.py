"""Where a warm process's first call spends its time, phase by phase.

    python benchmarks/first_call_phases.py [--device cuda]

Fills a fresh cache in one process, then in a new process with that cache times: opening the
device, loading the module, reading the entry, getting the forward kernel (on CUDA, loading its
cached cubin; else the Slang session, the cached program, the kernel and its launch
preparation), the first dispatch, a second dispatch, the first call through slangspec and the
first backward.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent


def child(kind: str, cache: str) -> dict[str, float]:
    import torch

    import slangspec
    from slangspec.compile.slang.vulkan_compiler import CompiledKernel
    from slangspec.runtime import devices

    tdev = "cuda" if kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    warmup = torch.ones(2, device=tdev, requires_grad=True)
    (warmup * 2).backward(torch.ones_like(warmup))
    a = torch.randn(4096, device=tdev, requires_grad=True)
    x = torch.randn(4096, device=tdev, requires_grad=True)
    phases = {}
    t = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal t
        sync()
        now = time.perf_counter()
        phases[name] = now - t
        t = now

    if kind == "vulkan":  # a CUDA process opens no slangpy device
        devices.open_device(kind, slangspec.Cache(cache).files.shader_cache())
    mark("open device")
    m = slangspec.load(HERE / "startup.slang", device=kind, cache_dir=cache)
    mark("load module")
    fn = m.poly
    sig = fn.signature(a, x)
    pre = m.preimage("poly", sig)
    key = fn.cache_key(sig)
    entry = m.cache.lookup(key, pre)
    mark("read entry")
    bind = m.binding.begin()
    if "forward" in entry.binaries:
        # CUDA with a cached cubin: Slang is never started.
        launchable = m.backend.load(key, "forward", entry)
        mark("load cached cubin")
    else:
        session = m.backend.compiler.session(m.include_paths, m.defines, m.content)
        mark("slang session")
        program = session.load_program(entry.kernels["forward"], ["slangspec_main"])
        mark("load cached program")
        kernel = CompiledKernel(m.backend.device.create_compute_kernel(program))
        mark("create kernel")
        launchable = bind.prepare(kernel)
        mark("prepare for launch")
    out = torch.empty(4096, device=tdev)
    kw = {
        "_n": 4096,
        "_shape": [4096],
        "a0": bind.read(a)[0],
        "a0_st": [1],
        "a1": bind.read(x)[0],
        "a1_st": [1],
        "_out": bind.write(out),
    }
    bind.dispatch(launchable, 4096, kw)
    mark("first dispatch")
    bind.dispatch(launchable, 4096, kw)
    mark("second dispatch")
    y = fn(a, x)
    mark("first call (through slangspec)")
    y.backward(torch.ones_like(y))
    mark("first backward")
    return phases


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default="vulkan")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.device, args.child)), flush=True)
        return
    cache = tempfile.mkdtemp(prefix="slangspec-phases-")
    fill = (
        "import sys, torch, slangspec\n"
        f"m = slangspec.load({str(HERE / 'startup.slang')!r}, device={args.device!r}, "
        f"cache_dir={cache!r})\n"
        f"a, x = (torch.randn(4096, device={'cuda' if args.device == 'cuda' else 'cpu'!r}, "
        "requires_grad=True) for _ in range(2))\n"
        "y = m.poly(a, x)\ny.backward(torch.ones_like(y))\n"
    )
    subprocess.run([sys.executable, "-c", fill], check=True, capture_output=True)
    out = subprocess.run(
        [sys.executable, __file__, "--device", args.device, "--child", cache],
        capture_output=True,
        text=True,
        check=True,
    )
    phases = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'phase (warm process)':34s} {'time':>9s}")
    for phase, seconds in phases.items():
        print(f"{phase:34s} {seconds * 1e3:7.1f}ms")


if __name__ == "__main__":
    main()
