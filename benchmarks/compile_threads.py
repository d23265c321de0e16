"""Whether a forward and a backward kernel can be compiled at once in one process.

    python benchmarks/compile_threads.py [--device cuda|vulkan] [--repeat 3]

slangspec generates the kernels of ``mix2`` (benchmarks/bench.slang, which imports slangpy's
Slang library) into a fresh cache, in a process of its own. This process then compiles the
forward and the first backward kernel through slangpy, as slangspec does, each in a Slang
session of its own: one after the other, then on two threads at once (medians of
``--repeat``). It also reports, per kernel, the share of the time a Python thread counting in a
loop got, against what it gets while the interpreter is idle: near 0% means slangpy held the
GIL throughout, so threads cannot overlap that step. With ``enable_compilation_reports``,
slangpy splits a kernel's compile into Slang's own time and the downstream compiler's
(NVRTC on CUDA).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import slangpy as spy

HERE = Path(__file__).parent
ENTRY = "slangspec_main"

GENERATE = """
import sys, torch, slangspec
kind, cache = sys.argv[1], sys.argv[2]
dev = "cuda" if kind == "cuda" else "cpu"
m = slangspec.load(sys.argv[3], cache_dir=cache, device=kind)
a = torch.randn(64, device=dev, requires_grad=True)
b = torch.randn(64, device=dev, requires_grad=True)
m.mix2(a, b, slangspec.grid((64,))).sum().backward()
"""


def kernel_sources(kind: str, cache: Path) -> list[Path]:
    """The forward and backward kernels slangspec generates for ``mix2``, oldest first."""
    command = [sys.executable, "-c", GENERATE, kind, str(cache), str(HERE / "bench.slang")]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    return sorted((cache / "kernels").glob("k_*.slang"), key=lambda p: p.stat().st_mtime)


def bench_session(device: spy.Device, module_cache: Path) -> spy.SlangSession:
    """A Slang session in which the kernels of ``kernel_sources`` compile: slangpy's library and
    bench.slang loaded, compiled IR kept in ``module_cache``."""
    import slangpy as spy

    options = {"include_paths": [str(HERE), spy.SHADER_PATH]}
    session = device.create_slang_session(compiler_options=options, cache_path=module_cache)
    session.load_module("slangpy")
    bench = HERE / "bench.slang"
    session.load_module_from_source("bench", bench.read_text(), str(bench))
    return session


class Spinner:
    """A thread counting as fast as the GIL lets it."""

    def __init__(self) -> None:
        self.count = 0
        threading.Thread(target=self._run, daemon=True).start()
        time.sleep(0.2)
        start = self.count
        time.sleep(0.5)
        self.idle_rate = (self.count - start) / 0.5

    def _run(self) -> None:
        while True:
            self.count += 1


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default="vulkan")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="slangspec-threads-"))
    kernels = kernel_sources(args.device, work / "cache")[:2]

    import slangpy as spy

    device = spy.Device(type=getattr(spy.DeviceType, args.device), enable_compilation_reports=True)
    module_cache = work / "ir"
    module_cache.mkdir()

    def session() -> spy.SlangSession:
        if args.device == "cuda":
            device.set_cuda_context_current()
        return bench_session(device, module_cache)

    built = 0

    def build(s: spy.SlangSession, kernel: Path) -> tuple[float, float, dict]:
        """Seconds to compile ``kernel`` in ``s``, the spinner's share meanwhile, the report."""
        nonlocal built
        if args.device == "cuda":
            device.set_cuda_context_current()
        built += 1
        name = f"{kernel.stem}_{built}"
        start, counted = time.perf_counter(), spinner.count
        module = s.load_module_from_source(name, kernel.read_text(), str(work / f"{name}.slang"))
        program = s.link_program([module], [module.entry_point(ENTRY)])
        device.create_compute_kernel(program).pipeline  # noqa: B018
        seconds = time.perf_counter() - start
        share = (spinner.count - counted) / seconds / spinner.idle_rate
        return seconds, share, program.get_compilation_report()

    spinner = Spinner()
    warm_up = session()
    build(warm_up, kernels[0])
    print(f"{args.device}: {len(kernels)} kernels of mix2, one Slang session each\n")
    print("| kernel | compile | spinner's share | Slang | downstream |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kernel, label in zip(kernels, ("forward", "backward"), strict=False):
        seconds, share, report = build(session(), kernel)
        print(
            f"| {label} | {seconds * 1000:.0f} ms | {share * 100:.0f}% "
            f"| {report['compile_slang_time'] * 1000:.0f} ms "
            f"| {report['compile_downstream_time'] * 1000:.0f} ms |"
        )
    apart, together = [], []
    failures: list[BaseException] = []

    def run(s: spy.SlangSession, kernel: Path) -> None:
        try:
            build(s, kernel)
        except BaseException as exc:  # reported below: a failed build times nothing
            failures.append(exc)

    for _ in range(args.repeat):
        sessions = [session(), session()]
        start = time.perf_counter()
        for s, kernel in zip(sessions, kernels, strict=True):
            build(s, kernel)
        apart.append(time.perf_counter() - start)
        sessions = [session(), session()]
        threads = [
            threading.Thread(target=run, args=pair) for pair in zip(sessions, kernels, strict=True)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        together.append(time.perf_counter() - start)
        if failures:
            raise SystemExit(f"a build on a thread failed: {failures[0]}")
    print(f"\nboth kernels, medians of {args.repeat}:")
    print(f"one after the other: {statistics.median(apart) * 1000:.0f} ms")
    print(f"on two threads at once: {statistics.median(together) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
