"""The memory and time of a command and every process it starts: resident memory summed over
the whole process tree, sampled as it runs, its peak, the largest single process, and the wall
time.

    python benchmarks/suite_memory.py [--every 0.2] [--json F] [--budget] -- bash .ci/run

The sum counts a page that several processes share once per process, so it bounds the
machine's use from above. ``/usr/bin/time -v`` reports only the largest process.

``--budget`` passes the command's output through and ends with one line against the suite's
budget in CI: wall time, peak memory summed, and the tests pytest counted in its closing line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
BUDGET_S = 8 * 60
BUDGET_GB = 10.0
_CLOSING = re.compile(r"^=* ?(\d+ (passed|failed).*?) in [\d.]+s")


def _children() -> dict[int, list[int]]:
    """Each running process's children, by parent."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _resident(pid: int) -> int:
    """The process's resident bytes; 0 once it has ended."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_resident(root: int) -> tuple[int, int, int, list[tuple[int, int]]]:
    """Resident bytes summed over ``root`` and its descendants, the largest of them, how many
    processes there are, and each one's bytes by pid."""
    tree = _children()
    pending, sizes = [root], []
    while pending:
        pid = pending.pop()
        sizes.append((_resident(pid), pid))
        pending.extend(tree.get(pid, ()))
    alone = [size for size, _ in sizes]
    return sum(alone), max(alone), len(sizes), sizes


def _command(pid: int) -> str:
    """A process's command line, shortened, for the report of the peak."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(w.decode(errors="replace") for w in words if w)[:160]


def measure(command: list[str], every: float, tests: bool = False) -> dict[str, float | int | str]:
    """Run ``command``, sampling its process tree every ``every`` seconds; with ``tests``, its
    output passes through here and pytest's closing count is kept."""
    start = time.monotonic()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE if tests else None,
        stderr=subprocess.STDOUT if tests else None,
    )
    counted: list[str] = []
    reader = None
    if tests:
        reader = threading.Thread(target=_pass_through, args=(process.stdout, counted), daemon=True)
        reader.start()
    peak_sum = peak_one = most = 0
    at_peak: list[tuple[int, str]] = []
    while process.poll() is None:
        total, largest, count, each = tree_resident(process.pid)
        if total > peak_sum:
            big = sorted(each, reverse=True)[:6]
            at_peak = [(size, _command(pid)) for size, pid in big]
        peak_sum, peak_one, most = max(peak_sum, total), max(peak_one, largest), max(most, count)
        time.sleep(every)
    if reader is not None:
        reader.join()
    return {
        "returncode": process.returncode,
        "wall_s": round(time.monotonic() - start, 1),
        "peak_summed_gb": round(peak_sum / 1e9, 2),
        "peak_largest_process_gb": round(peak_one / 1e9, 2),
        "most_processes": most,
        "tests": counted[-1] if counted else "",
        "at_peak": [f"{size / 1e9:.2f} GB {command}" for size, command in at_peak],
    }


def _pass_through(stream, counted: list[str]) -> None:
    """Copy ``stream`` to stdout line by line, keeping each pytest closing count met."""
    for raw in iter(stream.readline, b""):
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        found = _CLOSING.match(raw.decode(errors="replace").strip())
        if found:
            counted.append(found.group(1))


def budget_line(result: dict[str, float | int | str]) -> str:
    """One line: the run against the suite's budget in CI."""
    wall, peak = float(result["wall_s"]), float(result["peak_summed_gb"])
    over = [what for what, bad in (("time", wall > BUDGET_S), ("memory", peak > BUDGET_GB)) if bad]
    return (
        f"suite budget: {int(wall // 60)}m {int(wall % 60):02d}s wall (budget "
        f"{BUDGET_S // 60}m), peak {peak:.1f} GB summed over its processes (budget "
        f"{BUDGET_GB:.0f} GB), tests: {result['tests'] or 'no pytest count'}"
        + (f"; OVER BUDGET in {' and '.join(over)}" if over else "")
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--every", type=float, default=0.2, help="seconds between samples")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--budget", action="store_true", help="end with the suite's budget line")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command to run after --")
    result = measure(command, args.every, tests=args.budget)
    if args.budget:
        for line in result["at_peak"]:
            print(f"at the peak: {line}")
        print(budget_line(result), flush=True)
    else:
        print(json.dumps(result), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    sys.exit(result["returncode"])


if __name__ == "__main__":
    main()
