"""A package's first call in a fresh environment: its kernels shipped, or compiled there.

    python benchmarks/package_first_call.py [--device vulkan|cuda] [--repeat 5]

Builds examples/package once as its author would (``specialize warm``, then ``specialize cache
export --for-package``) and installs it with pip into a directory of its own. Then every
measurement is a fresh process with an empty cache that imports the package and calls it forward
and backward, in turns:

- shipped: the package as installed, its kernels served from its own files;
- compiled: the same package with its ``kernels/`` removed, so the process compiles them;
- local warm: the shipped package again, on the cache a shipped run filled.

Timing starts after ``import torch`` and torch's own first backward, and covers importing the
package (which loads its module) and the first forward and backward; each process also says
whether it imported slangpy.
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
from pathlib import Path

HERE = Path(__file__).parent
PACKAGE = HERE.parent / "examples" / "package"
MODES = ("shipped", "compiled", "local warm")

CHILD = r"""
import json, sys, time
import torch
tdev = "cuda" if sys.argv[1] == "cuda" else "cpu"
sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
warm = torch.ones(2, device=tdev, requires_grad=True)
(warm * 2).backward(torch.ones_like(warm))
start = time.perf_counter()
import polyops
c = torch.tensor([1.0, -2.0, 0.5, 0.25], device=tdev, requires_grad=True)
x = torch.linspace(-2, 2, 4096, device=tdev, requires_grad=True)
y = polyops.cubic(c, x)
y.sum().backward()
sync()
took = time.perf_counter() - start
print(json.dumps({"s": took, "slangpy": "slangpy" in sys.modules}))
"""


def specialize(*args: object) -> None:
    subprocess.run([sys.executable, "-m", "slangspec", *map(str, args)], check=True)


def install(root: Path, shipped: bool) -> Path:
    """The example package, installed with pip under ``root``; with its kernels, or without."""
    source = root / ("src" if shipped else "src-bare")
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("kernels", "build"))
    if shipped:
        author = root / "author-cache"
        specialize("warm", source / "polyops" / "warm.toml", "--cache-dir", author, "--jobs", "1")
        kernels = source / "polyops" / "kernels"
        specialize("cache", "export", "--for-package", kernels, "--cache-dir", author)
    site = root / ("site" if shipped else "site-bare")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(site), str(source)], check=True)
    return site


def child(kind: str, site: Path, cache: Path) -> dict:
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "SLANGSPEC_CACHE_DIR": str(cache)}
    env["SLANGSPEC_DEVICE"] = kind
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
        cwd=cache.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    # Each process builds its own misses, as measured before the compile server existed
    # (edit_loop.py --server measures the server).
    os.environ.setdefault("SLANGSPEC_COMPILE_SERVER", "off")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=["cuda", "vulkan"], default="vulkan")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    os.environ["SLANGSPEC_DEVICE"] = args.device
    root = Path(tempfile.mkdtemp(prefix="slangspec-package-"))
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    try:
        shipped, bare = install(root, True), install(root, False)
        for i in range(args.repeat):
            runs["shipped"].append(child(args.device, shipped, root / f"shipped-{i}"))
            runs["compiled"].append(child(args.device, bare, root / f"compiled-{i}"))
            runs["local warm"].append(child(args.device, shipped, root / f"shipped-{i}"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    compiled = statistics.median(r["s"] for r in runs["compiled"])
    print(f"{args.device}, medians of {args.repeat} fresh processes per mode\n")
    print("| mode | first forward+backward | of compiling | imported slangpy |")
    print("| --- | ---: | ---: | --- |")
    for mode, measured in runs.items():
        took = statistics.median(r["s"] for r in measured)
        imported = sorted({"yes" if r["slangpy"] else "no" for r in measured})
        print(f"| {mode} | {took:.3f} s | {took / compiled:.2f} | {', '.join(imported)} |")


if __name__ == "__main__":
    main()
