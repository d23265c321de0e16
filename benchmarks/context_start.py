"""How long a process takes to get its CUDA context when many start at once, as the workers of
``specialize warm --jobs N`` do, with none of slangspec's own work.

    python benchmarks/context_start.py [--copies 1 16] [--repeat 3]

Every copy is a fresh process, spawned ahead and then released at one instant. Modes:

- ``context``: the driver's primary context (``cuInit``, ``cuDevicePrimaryCtxRetain``) alone;
- ``context while importing``: the context on a thread while the main thread imports slangpy,
  as a warm worker does (torch kept out, as there);
- ``import, then context``: slangpy imported first, then the context.

Prints, per mode and number of copies, the median over runs of the median and of the slowest
copy's seconds from the release to its context, and to its import of slangpy where it has one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SRC = Path(__file__).parent.parent / "src"
MODES = ("context", "context while importing", "import, then context")
LEAD_S = 3.0


def _child(mode: str, release: float) -> None:
    sys.path.insert(0, str(SRC))
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # kept out, as in a worker
    from slangspec.runtime.cuda_api import primary_context

    times: dict[str, float] = {}

    def context() -> None:
        primary_context(0)
        times["context"] = time.time() - release

    wait = release - time.time()
    if wait < 0:
        raise SystemExit(f"ready {-wait:.2f} s after the release; raise LEAD_S")
    time.sleep(wait)
    if mode == "context":
        context()
    elif mode == "context while importing":
        thread = threading.Thread(target=context)
        thread.start()
        import slangpy

        times["import"] = time.time() - release
        thread.join()
    else:
        import slangpy  # noqa: F401

        times["import"] = time.time() - release
        context()
    print(json.dumps(times))


def _run(mode: str, copies: int) -> list[dict[str, float]]:
    release = time.time() + LEAD_S
    argv = [sys.executable, __file__, "--child", mode, "--release", repr(release)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(copies)]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"a copy of mode {mode!r} failed ({p.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", type=int, nargs="+", default=[1, 16])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--release", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        _child(args.child, args.release)
        return
    # (mode, copies) -> step -> per run: (median copy, slowest copy)
    found: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = {}
    for _ in range(args.repeat):
        for mode in MODES:  # taking turns, so that a noisy host's drift hits every mode alike
            for copies in args.copies:
                runs = _run(mode, copies)
                steps = found.setdefault((mode, copies), {})
                for step in runs[0]:
                    values = [r[step] for r in runs]
                    steps.setdefault(step, []).append((statistics.median(values), max(values)))
    print(f"seconds from the release, medians of {args.repeat} runs")
    print("| mode | copies | context: median copy | slowest copy | import: median | slowest |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for (mode, copies), steps in found.items():
        cells = []
        for step in ("context", "import"):
            runs = steps.get(step)
            if runs is None:
                cells += ["", ""]
                continue
            cells += [f"{statistics.median(r[i] for r in runs):.2f}" for i in (0, 1)]
        print(f"| {mode} | {copies} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
