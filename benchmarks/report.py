"""Charts of the figures in docs/benchmarks.md, written beside it as PNG files.

    pip install -e '.[bench]'          # matplotlib
    python benchmarks/report.py [--doc docs/benchmarks.md] [--out docs/charts]

The document is the record: each chart reads the table of a named section, and its goals from
the table "Where the goals stand", so a chart never shows a number the text does not. Each
chart's title names the commit of the figures it shows. Charts:

- dispatch.png: each hot call's ratio to slangpy and to torch, forward and training step, with
  the goals against slangpy;
- startup.png: a new process's first forward+backward per mode, with the warm goal (H200);
- warm_jobs.png: `specialize warm --jobs` speed-up by jobs on each machine, with the goals;
- edit_loop.png: a new or edited function's first forward+backward on the H200, in-process and
  with the compile server, against the tree it is measured with, and the goals.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DOC = HERE.parent / "docs" / "benchmarks.md"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")

DISPATCH = "Hot dispatch and the training step (H100)"
STARTUP = "A new process's first call (H200)"
WARM = "`specialize warm --jobs`"
EDIT_LOOP = "The edit loop (H200)"
GOALS = "Where the goals stand"

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


def measured(text: str) -> dict[str, list[str]]:
    """The commits each section's "Measured:" line names (its first line), in order, by heading."""
    found: dict[str, list[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("Measured:") and heading not in found:
            found[heading] = COMMIT.findall(line)
    return found


def commit_of(text: str, heading: str) -> str:
    """The first commit the "Measured:" line under ``heading`` names."""
    commits = measured(text).get(heading)
    if not commits:
        raise LookupError(f"docs/benchmarks.md names no commit under '{heading}' ('Measured:')")
    return commits[0]


def goal(found: dict[str, list[Table]], benchmark: str) -> float:
    """The first number of a goal in the table "Where the goals stand"."""
    for row in section(found, GOALS):
        if row["benchmark"] == benchmark:
            return numbers(row["goal"])[0]
    raise LookupError(f"docs/benchmarks.md has no goal for '{benchmark}' under '{GOALS}'")


def dispatch_figures(found: dict[str, list[Table]]) -> list[tuple[str, float, float, float, float]]:
    """(call, forward / slangpy, forward / torch, step / slangpy, step / torch) per row."""
    return [
        (
            f"{r['function']} {r['elements']}",
            *numbers(r["forward"])[1:3],
            *numbers(r["training step"])[1:3],
        )
        for r in section(found, DISPATCH)
    ]


def startup_figures(found: dict[str, list[Table]]) -> list[tuple[str, str, float]]:
    """(function and commit, mode, ms) per cell that holds a figure."""
    rows = section(found, STARTUP)
    modes = list(rows[0])[2:]
    return [
        (f"{r['function'].strip('`')} at {r['commit']}", mode, numbers(r[mode])[0])
        for r in rows
        for mode in modes
        if numbers(r[mode])
    ]


def warm_figures(
    found: dict[str, list[Table]],
) -> tuple[dict[str, list[tuple[float, float]]], list[tuple[float, float]]]:
    """(jobs, speed-up) per machine and commit; (jobs, goal) where a row has a goal."""
    curves: dict[str, list[tuple[float, float]]] = {}
    goals = []
    for r in section(found, WARM):
        jobs = float(r["jobs"])
        curves.setdefault(f"{r['machine']} ({r['commit']})", []).append(
            (jobs, float(r["speed-up"]))
        )
        if numbers(r["goal"]):
            goals.append((jobs, numbers(r["goal"])[0]))
    return curves, goals


def edit_loop_figures(
    found: dict[str, list[Table]],
) -> tuple[str, list[tuple[str, float, float, float, float]]]:
    """The baseline's name, and (case, baseline ms, in-process ms, server ms, goal ms or NaN)."""
    rows = section(found, EDIT_LOOP)
    baseline = list(rows[0])[3]
    return baseline, [
        (
            r["case"].replace("`", ""),
            numbers(r[baseline])[0],
            numbers(r["in-process"])[0],
            numbers(r["with the server"])[0],
            (numbers(r["goal"]) or [float("nan")])[0],
        )
        for r in rows
    ]


def render(text: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = tables(text)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    rows = dispatch_figures(found)
    fig, (spy, vs_torch) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    y = range(len(rows))
    labels = [r[0] for r in rows]
    for ax, forward, step, against in ((spy, 1, 3, "slangpy"), (vs_torch, 2, 4, "torch eager")):
        ax.barh([i - 0.2 for i in y], [r[forward] for r in rows], 0.4, label="forward")
        ax.barh([i + 0.2 for i in y], [r[step] for r in rows], 0.4, label="training step")
        ax.axvline(1.0, color="k", lw=1)
        ax.set_xlabel(f"slangspec / {against} (below 1: slangspec faster)")
    spy.axvline(goal(found, "hot forward, against slangpy"), color="tab:blue", ls="--", lw=1)
    spy.axvline(goal(found, "training step, against slangpy"), color="tab:orange", ls="--", lw=1)
    spy.set_yticks(list(y), labels)
    spy.invert_yaxis()
    commit = commit_of(text, DISPATCH)
    card = DISPATCH.rsplit("(", 1)[1].rstrip(")")
    spy.set_title(f"Hot calls against slangpy, dashed: goals ({card}, {commit})")
    vs_torch.set_title(f"Against torch eager ({card}, {commit})")
    spy.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    written.append(_save(fig, out / "dispatch.png"))

    rows = startup_figures(found)
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.barh(range(len(rows)), [ms for *_, ms in rows], color=[_mode_colour(m) for _, m, _ in rows])
    ax.set_yticks(range(len(rows)), [f"{f}: {m}" for f, m, _ in rows])
    ax.invert_yaxis()
    warm_goal = goal(found, "a warm process's first forward+backward")
    ax.axvline(
        warm_goal, color="r", ls="--", lw=1, label=f"goal for a warm process: {warm_goal:g} ms"
    )
    ax.set_xscale("log")
    ax.set_xlabel("ms to the first forward+backward (log scale)")
    ax.set_title("A new process's first call (H200)")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "startup.png"))

    curves, goals = warm_figures(found)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        ax.plot([j for j, _ in points], [s for _, s in points], "o-", label=name)
    top = max(j for points in curves.values() for j, _ in points)
    ticks = [2**k for k in range(int(top).bit_length())]
    ax.plot(ticks, ticks, color="grey", ls=":", label="ideal")
    ax.plot(*zip(*goals, strict=True), "r*", ms=12, ls="", label="goals")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("jobs")
    ax.set_ylabel("speed-up over one job")
    ax.set_title("specialize warm: 24 specializations into an empty cache")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "warm_jobs.png"))

    baseline, rows = edit_loop_figures(found)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    y = range(len(rows))
    bars = (
        (1, baseline, "grey"),
        (2, "in-process", "tab:blue"),
        (3, "with the server", "tab:green"),
    )
    for k, (column, name, colour) in enumerate(bars):
        ax.barh(
            [i + (k - 1) * 0.27 for i in y],
            [r[column] for r in rows],
            0.27,
            label=name,
            color=colour,
        )
    ax.plot([r[4] for r in rows], list(y), "r|", ms=22, mew=2, ls="", label="goal")
    ax.set_yticks(list(y), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ms to the first forward+backward, from torch's CUDA start-up")
    ax.set_title(f"The edit loop (H200, {commit_of(text, EDIT_LOOP)})")
    ax.legend(loc="lower right")
    fig.tight_layout()
    written.append(_save(fig, out / "edit_loop.png"))
    return written


def _mode_colour(mode: str) -> str:
    for word, colour in (
        ("slangpy, no cache", "tab:blue"),
        ("slangpy", "tab:cyan"),
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
    for path in render(args.doc.read_text(), args.out or args.doc.parent / "charts"):
        print(path)


if __name__ == "__main__":
    main()
