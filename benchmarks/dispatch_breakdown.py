"""Where a hot call's time goes: slangspec's forward and backward and the kernel dispatch inside
them, for forward-only calls, forward+backward, and forward calls from a second thread.

    python benchmarks/dispatch_breakdown.py [--device cuda] [--elements N]

Each line is the mean per iteration; the named parts are inclusive wall times measured by
wrapping slangspec's own functions.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import torch

import slangspec
from slangspec.runtime import launch, specialization, vulkan_binding

HERE = Path(__file__).parent
spent: defaultdict[str, float] = defaultdict(float)


def timed(owner, name: str, label: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def measure(label: str, body, sync, n: int, inner: int = 1) -> None:
    """Mean per iteration of ``n`` calls of ``body``, each doing ``inner`` iterations."""
    for _ in range(max(1, 50 // inner)):
        body()
    sync()
    spent.clear()
    start = time.perf_counter()
    for _ in range(n):
        body()
    sync()
    n *= inner
    total = (time.perf_counter() - start) / n
    parts = ", ".join(f"{k} {v / n * 1e6:.1f} us" for k, v in sorted(spent.items()))
    print(f"{label:34s} {total * 1e6:8.1f} us/iter   ({parts})", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--elements", type=int, default=1)
    p.add_argument("--iterations", type=int, default=2000)
    args = p.parse_args()
    m = slangspec.load(
        HERE / "bench.slang",
        device=args.device,
        cache_dir=tempfile.mkdtemp(prefix="slangspec-breakdown-"),
    )
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    timed(launch.CudaBinding, "dispatch", "dispatch")
    timed(vulkan_binding.VulkanBinding, "dispatch", "dispatch")
    timed(specialization.Specialization, "_forward_with_shape", "forward")
    timed(specialization.Specialization, "backward", "backward")
    a = torch.randn(args.elements, device=tdev, requires_grad=True)
    x = torch.randn(args.elements, device=tdev, requires_grad=True)
    cot = torch.ones(args.elements, device=tdev)
    n = args.iterations

    def forward_only():
        with torch.no_grad():
            m.poly(a, x)

    measure("forward (no grad)", forward_only, sync, n)
    measure("forward + backward", lambda: m.poly(a, x).backward(cot), sync, n)

    def from_thread():
        worker = threading.Thread(target=lambda: [forward_only() for _ in range(n)])
        worker.start()
        worker.join()

    measure("forward (no grad), second thread", from_thread, sync, 1, inner=n)


if __name__ == "__main__":
    main()
