"""Wall time of `specialize warm --jobs N` on a manifest of 24 specializations, each with a
forward and up to seven backward kernels, into an empty cache per run.

    python benchmarks/warm_jobs.py [--jobs 1 2] [--device D]

Also prints, per run, the seconds every process spent in each phase (benchmarks/phase_timer.py)
and the workers' time outside them, and when the first phase and the first Slang compile
began and the last phase and the last task ended: what stays serial or idle as jobs grow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from phase_timer import COMMAND, summary, timeline

HERE = Path(__file__).parent
SHAPES = (
    "N",
    "N, 2",
    "N, 3",
    "N, 4",
    "2, N",
    "3, N",
    "N, N",
    "2, 2",
    "N, N, N",
    "2, N, N",
    "N, 2, N",
    "N, N, 2",
)


def manifest(directory: Path) -> Path:
    specs = ",\n  ".join(
        f'["f32[{s}] grad", "f32[{s}] grad", "f32[{s}] {g}"]'
        for s in SHAPES
        for g in ("grad", "nograd")
    )
    path = directory / "warm.toml"
    path.write_text(f"""[[module]]
path = "{HERE / "warm.slang"}"

[[module.function]]
name = "blend"
specializations = [
  {specs},
]
""")
    return path


def installed_env() -> dict[str, str]:
    """This environment, with bytecode cached as it is for an installed package (the GPU image
    turns that off, and a process that imports torch then compiles torch's sources: 5.9 s
    there instead of about 1 s)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


TIMED_CLI = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import phase_timer
phase_timer.install(Path(sys.argv[2]))
from slangspec.cli import run
run(sys.argv[3:])
"""


def run(
    jobs: int, device: str | None
) -> tuple[float, list[tuple[str, float, int]], dict[str, float]]:
    """Wall seconds of one warm run into an empty cache, its phases and their timeline (see
    phase_timer)."""
    work = Path(tempfile.mkdtemp(prefix="slangspec-warm-"))
    command = [sys.executable, "-c", TIMED_CLI, str(HERE), str(work / "phases")]
    command += ["warm", str(manifest(work)), "--jobs", str(jobs), "--cache-dir", str(work / "c")]
    if device:
        command += ["--device", device]
    began, start = time.time(), time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=installed_env())
    wall = time.perf_counter() - start
    return wall, summary(work / "phases", wall, jobs), timeline(work / "phases", began)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    args = p.parse_args()
    runs = {}
    print(f"{'jobs':>4s} {'seconds':>8s} {'speed-up':>8s}", flush=True)
    base = None
    for jobs in args.jobs:
        seconds, phases, _ = runs[jobs] = run(jobs, args.device)
        base = base or seconds
        print(f"{jobs:4d} {seconds:8.1f} {base / seconds:8.2f}", flush=True)
    print("\nPhases, seconds summed over every process (inclusive: a compile may open the device)")
    names = [name for name, *_ in next(iter(runs.values()))[1]]
    print(f"{'phase':<36s}" + "".join(f"{f'jobs {j}':>10s}" for j in runs))
    for name in names:
        cells = []
        for _, phases, _ in runs.values():
            found = {n: s for n, s, _ in phases}
            cells.append(f"{found.get(name, 0.0):10.1f}")
        print(f"{name:<36s}" + "".join(cells))
    print("\nWhen, seconds from the command's start")
    print(f"{'':<36s}" + "".join(f"{f'jobs {j}':>10s}" for j in runs))
    names = ["first phase", "first compile", "a worker's first compile, median"]
    names += ["the last worker's first compile", "last phase ends", "last task ends"]
    names += [f"{phase} {edge}" for phase in COMMAND for edge in ("begins", "ends")]
    for name in names:
        cells = (when.get(name, float("nan")) for *_, when in runs.values())
        print(f"{name:<36s}" + "".join(f"{seconds:10.1f}" for seconds in cells))
    print(f"{'command ends':<36s}" + "".join(f"{seconds:10.1f}" for seconds, *_ in runs.values()))


if __name__ == "__main__":
    main()
