"""The torture benchmark's quick run, as a test: ``pytest -m slow tests/test_torture.py``.

Deselected by default (it takes minutes); every trial must end ok.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TORTURE = Path(__file__).parent.parent / "benchmarks" / "torture.py"


@pytest.mark.slow
def test_quick_torture_has_only_ok_trials(tmp_path, kind):
    table = tmp_path / "torture.md"
    subprocess.run(
        [sys.executable, str(TORTURE), "--quick", "--device", kind, "--markdown", str(table)],
        check=True,
        capture_output=True,
        env={**os.environ},
        timeout=1200,
    )
    rows = [line.split("|")[1:-1] for line in table.read_text().splitlines()[2:]]
    assert rows
    for trials, ok, *bad, what in rows:
        assert trials.strip() == ok.strip(), f"{what.strip()}: {bad}"
