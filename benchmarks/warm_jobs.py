"""Wall time of `specialize warm --jobs N` on a manifest of 24 specializations, each with a
forward and up to seven backward kernels, into an empty cache per run.

    python benchmarks/warm_jobs.py [--jobs 1 2] [--device D]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def run(jobs: int, device: str | None) -> float:
    work = Path(tempfile.mkdtemp(prefix="slangspec-warm-"))
    command = [
        sys.executable,
        "-m",
        "slangspec",
        "warm",
        str(manifest(work)),
        "--jobs",
        str(jobs),
        "--cache-dir",
        str(work / "cache"),
    ]
    if device:
        command += ["--device", device]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    args = p.parse_args()
    print(f"{'jobs':>4s} {'seconds':>8s} {'speed-up':>8s}", flush=True)
    base = None
    for jobs in args.jobs:
        seconds = run(jobs, args.device)
        base = base or seconds
        print(f"{jobs:4d} {seconds:8.1f} {base / seconds:8.2f}", flush=True)


if __name__ == "__main__":
    main()
