"""benchmarks/report.py reads the tables its charts show out of docs/benchmarks.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402

DOC = (ROOT / "docs" / "benchmarks.md").read_text()


def test_cells_with_escaped_bars_and_signs_parse():
    found = report.tables("## A\n\n| x | y |\n| --- | ---: |\n| 1 \\| 2 | \u22123.5 ms (0.9) |\n")
    assert found == {"A": [[{"x": "1 | 2", "y": "\u22123.5 ms (0.9)"}]]}
    assert report.numbers(found["A"][0][0]["y"]) == [-3.5, 0.9]


def test_every_chart_finds_its_figures_in_the_document():
    found = report.tables(DOC)
    d = report.dispatch_figures(found)
    assert len(d["hot"]) == 8 and all(len(r) == 3 for r in d["hot"])
    assert all(0 < v < 3 for r in d["hot"] + d["step"] for v in r[1:])
    modes = {mode for _, mode, _ in report.startup_figures(found)}
    assert {"torch alone", "slangspec warm", "slangspec cold"} <= modes
    warm = report.warm_figures(found)
    assert all(points[0] == (1.0, 1.0) for points in warm.values())
    edits = report.edit_loop_figures(found)
    assert len(edits) == 5 and all(0 < ms < 10_000 for r in edits for ms in r[1:3])


def test_a_missing_section_is_named():
    with pytest.raises(LookupError, match="no table 0 under 'The training step'"):
        report.dispatch_figures(report.tables(DOC.replace("### The training step", "### Renamed")))


def test_charts_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    written = report.render(report.tables(DOC), tmp_path)
    names = ["dispatch.png", "startup.png", "warm_jobs.png", "edit_loop.png"]
    assert [p.name for p in written] == names
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
