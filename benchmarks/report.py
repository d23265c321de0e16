"""Charts of the figures in docs/benchmarks.md, written beside it as PNG files.

    pip install -e '.[bench]'          # matplotlib
    python benchmarks/report.py [--doc docs/benchmarks.md] [--out docs/charts]

The document is the record: each chart reads the table of a named section, so a chart never
shows a number the text does not. Charts:

- dispatch.png: slangspec / slangpy per hot call, both runs (H200); the training step against
  torch eager before and after cotangents were read in place, with the goal;
- startup.png: a whole process's first forward+backward from "torch ready", per mode (H200);
- warm_jobs.png: `specialize warm --jobs` speed-up by jobs, lavapipe and H200, with the goals
  and what sixteen equal pure-Python loops get from the H200 host's cores;
- edit_loop.png: a new or edited function's first forward+backward on the H200, against the
  tree it is measured with, and the goals.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DOC = HERE.parent / "docs" / "benchmarks.md"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")

Table = list[dict[str, str]]


def tables(text: str) -> dict[str, list[Table]]:
    """Every markdown table of the document, by the heading of the section it is in."""
    found: dict[str, list[Table]] = {}
    section = ""
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            found.setdefault(section, []).append(_table(block))
            block = []
        if line.startswith("#"):
            section = line.lstrip("#").strip()
    return found


def _table(lines: list[str]) -> Table:
    def cells(line: str) -> list[str]:
        inner = line.strip().removeprefix("|").removesuffix("|")
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]

    header = cells(lines[0])
    rows = [cells(line) for line in lines[2:]]  # lines[1] is the alignment row
    return [dict(zip(header, row, strict=True)) for row in rows]


def numbers(cell: str) -> list[float]:
    """The numbers a cell shows, in order ("0.73 / 0.77", "362.2 µs (1.14)", "**+27.5 ms**")."""
    return [float(n) for n in NUMBER.findall(cell.replace("\u2212", "-"))]


def section(found: dict[str, list[Table]], heading: str, index: int = 0) -> Table:
    if heading not in found or len(found[heading]) <= index:
        raise LookupError(f"docs/benchmarks.md has no table {index} under '{heading}'")
    return found[heading][index]


def dispatch_figures(found: dict[str, list[Table]]) -> dict[str, Any]:
    """Per-call ratios against slangpy (two runs) and the training step against torch."""
    hot = section(found, "Hot dispatch against slangpy (H200)")
    step = section(found, "The training step")
    return {
        "hot": [
            (f"{r['function']} {r['elements']} {r['mode']}", *numbers(r["slangspec / slangpy"]))
            for r in hot
        ],
        "step": [
            (
                f"{r['function']} {r['elements']} {r['mode']}",
                numbers(r["before"])[-1],
                numbers(r["after"])[-1],
            )
            for r in step
        ],
    }


def startup_figures(found: dict[str, list[Table]]) -> list[tuple[str, str, float]]:
    """(function, mode, ms from torch ready) per row."""
    rows = section(found, "A whole process, from exec (H200)")
    return [(r["function"], r["mode"], numbers(r["from torch ready"])[0]) for r in rows]


def warm_figures(found: dict[str, list[Table]]) -> dict[str, list[tuple[float, float]]]:
    """(jobs, speed-up) per machine."""
    heading = "`specialize warm --jobs` (lavapipe, 2 cores)"
    machines = {
        "lavapipe, 2 cores": 0,
        "H200, 16 cores": 1,
        "H200, kernel by kernel (28dce91)": 2,
        "H200, kernel by kernel (1a094d8)": 4,
        "H200, workers started before torch (27eb617)": 8,
        "H200, no wait at exit (acf6365)": 11,
        "H200, workers without torch (0c40fdb)": 12,
        "lavapipe, nothing loaded twice (365b78d)": 19,
        "H200, nothing loaded twice (d4d7fe4)": 20,
    }
    return {
        name: [(float(r["jobs"]), float(r["speed-up"])) for r in section(found, heading, i)]
        for name, i in machines.items()
    }


def host_figures(found: dict[str, list[Table]]) -> list[tuple[float, float]]:
    """(copies, speed-up) of equal pure-Python loops run at once on the H200 host."""
    rows = section(found, "`specialize warm --jobs` (lavapipe, 2 cores)", 22)
    return [(float(r["copies"]), numbers(r[list(r)[1]])[0]) for r in rows]


def edit_loop_figures(found: dict[str, list[Table]]) -> list[tuple[str, float, float, float]]:
    """(function and mode, ms before, ms now, goal ms or NaN) per row."""
    rows = section(found, "The edit-compile loop, phase by phase (H200)")
    before, now = list(rows[0])[2:4]
    return [
        (
            f"{r['function'].replace('`', '')} {r['mode']}",
            numbers(r[before])[0],
            numbers(r[now])[0],
            (numbers(r["goal"]) or [float("nan")])[0],
        )
        for r in rows
    ]


def render(found: dict[str, list[Table]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []

    d = dispatch_figures(found)
    fig, (hot, step) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [r[0] for r in d["hot"]]
    y = range(len(labels))
    hot.barh([i - 0.2 for i in y], [r[1] for r in d["hot"]], 0.4, label="run 1")
    hot.barh([i + 0.2 for i in y], [r[2] for r in d["hot"]], 0.4, label="run 2")
    hot.axvline(1.0, color="k", lw=1)
    hot.set_yticks(list(y), labels)
    hot.invert_yaxis()
    hot.set_xlabel("slangspec / slangpy (below 1: slangspec faster)")
    hot.set_title("Hot calls against slangpy (H200)")
    hot.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    labels = [r[0] for r in d["step"]]
    y = range(len(labels))
    step.barh([i - 0.2 for i in y], [r[1] for r in d["step"]], 0.4, label="cotangent copied")
    step.barh([i + 0.2 for i in y], [r[2] for r in d["step"]], 0.4, label="read in place")
    step.axvline(1.0, color="k", lw=1)
    step.axvline(1.2, color="r", ls="--", lw=1, label="goal for a training step")
    step.set_yticks(list(y), labels)
    step.invert_yaxis()
    step.set_xlabel("slangspec / torch eager")
    step.set_title("Against torch eager (H200)")
    step.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize="small")
    fig.tight_layout()
    written.append(_save(fig, out / "dispatch.png"))

    rows = startup_figures(found)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{f}: {m}" for f, m, _ in rows]
    ax.barh(range(len(rows)), [ms for *_, ms in rows], color=[_mode_colour(m) for _, m, _ in rows])
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ms from torch ready to the first forward+backward (log scale)")
    ax.set_title("A new process's first call (H200)")
    fig.tight_layout()
    written.append(_save(fig, out / "startup.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in warm_figures(found).items():
        ax.plot([j for j, _ in points], [s for _, s in points], "o-", label=name)
    top = max(j for points in warm_figures(found).values() for j, _ in points)
    ticks = [2**k for k in range(int(top).bit_length())]
    ax.plot(ticks, ticks, color="grey", ls=":", label="ideal")
    ax.plot([2, 16], [1.8, 12], "r*", ms=12, ls="", label="goals (2 jobs on 2 cores, 16 on 16)")
    host = host_figures(found)
    ax.plot(*zip(*host, strict=True), "kx", ms=9, ls="", label="16 equal loops on the H200 host")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("jobs")
    ax.set_ylabel("speed-up over one job")
    ax.set_title("specialize warm: 24 specializations into an empty cache")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "warm_jobs.png"))

    rows = edit_loop_figures(found)
    heading = section(found, "The edit-compile loop, phase by phase (H200)")
    before, now = list(heading[0])[2:4]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], [r[1] for r in rows], 0.4, label=before, color="grey")
    ax.barh([i + 0.2 for i in y], [r[2] for r in rows], 0.4, label=now, color="tab:green")
    ax.plot([r[3] for r in rows], list(y), "r|", ms=22, mew=2, ls="", label="goal")
    ax.set_yticks(list(y), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ms to the first forward+backward, from slangpy's device ready (log scale)")
    ax.set_title("The edit-compile loop (H200)")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "edit_loop.png"))
    return written


def _mode_colour(mode: str) -> str:
    for word, colour in (
        ("slangpy", "tab:blue"),
        ("torch", "grey"),
        ("warm", "tab:green"),
        ("cold", "tab:red"),
    ):
        if word in mode:
            return colour
    return "tab:purple"


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    # No timestamps in the file, so an unchanged chart is an unchanged file.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--out", type=Path, default=None, help="default: charts/ beside the doc")
    args = p.parse_args()
    found = tables(args.doc.read_text())
    for path in render(found, args.out or args.doc.parent / "charts"):
        print(path)


if __name__ == "__main__":
    main()
