"""benchmarks/report.py reads the tables its charts show out of docs/benchmarks.md."""

from __future__ import annotations

import re
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
    hot = report.dispatch_figures(found)
    assert len(hot) == 8 and all(0 < v < 3 for r in hot for v in r[1:])
    assert 0 < report.goal(found, "hot forward, against slangpy") < 1
    assert 0 < report.goal(found, "training step, against slangpy") < 1
    modes = {mode for _, mode, _ in report.startup_figures(found)}
    assert {"slangspec warm", "slangspec cold, empty cache", "slangpy, no cache"} <= modes
    assert report.goal(found, "a warm process's first forward+backward") == 45
    curves, goals = report.warm_figures(found)
    assert len(curves) == 2 and all(points[0] == (1.0, 1.0) for points in curves.values())
    assert {jobs for jobs, _ in goals} == {2.0, 16.0}
    baseline, edits = report.edit_loop_figures(found)
    assert baseline == "c365cd6"
    assert len(edits) == 5 and all(0 < ms < 10_000 for r in edits for ms in r[1:4])


def test_charts_name_the_commit_their_section_was_measured_at():
    assert report.measured("## A\n\nMeasured: H200; at e0fd74c, then 2c553e8.\n") == {
        "A": ["e0fd74c", "2c553e8"]
    }
    for heading in (report.DISPATCH, report.EDIT_LOOP):
        assert report.COMMIT.fullmatch(report.commit_of(DOC, heading))


def test_a_missing_section_is_named():
    renamed = DOC.replace(f"## {report.DISPATCH}", "## Renamed")
    with pytest.raises(LookupError, match=f"no table 0 under '{re.escape(report.DISPATCH)}'"):
        report.dispatch_figures(report.tables(renamed))
    with pytest.raises(LookupError, match="names no commit"):
        report.commit_of(renamed, report.DISPATCH)


def test_charts_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    written = report.render(DOC, tmp_path)
    names = ["dispatch.png", "startup.png", "warm_jobs.png", "edit_loop.png"]
    assert [p.name for p in written] == names
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
