"""The cache tests' worker processes forked from a zygote behave as spawned ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from workers import WORKER, python, report, zygote


def forked(*args: str, env: dict[str, str] | None = None):
    return zygote().fork([str(WORKER), *args], {**os.environ, **(env or {})})


def test_a_forked_worker_reports_as_a_spawned_one(tmp_path):
    spawned = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path / "a"), "--signatures", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = report(spawned)
    again = report(forked(str(tmp_path / "b"), "--signatures", "2"))
    assert first["ok"] and again["ok"]
    assert first["counts"] == again["counts"]
    assert first["slangpy_imported"] == again["slangpy_imported"]


def test_a_forked_worker_exits_as_its_script_does(tmp_path):
    killed = forked(str(tmp_path / "c"), "--lease-and-die")
    out, _ = killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL and '"leased"' in out
    refused = forked(str(tmp_path / "c"), env={"SLANGSPEC_CACHE_SIZE": "lots"})
    _, err = refused.communicate(timeout=120)
    assert refused.returncode == 1
    assert err.rstrip().splitlines()[-1].startswith("ValueError: SLANGSPEC_CACHE_SIZE='lots'")


def test_a_forked_worker_times_out_and_is_killed(tmp_path):
    slow = forked(str(tmp_path / "d"), "--signatures", "4")
    with pytest.raises(subprocess.TimeoutExpired):
        slow.communicate(timeout=0.01)
    slow.kill()
    slow.communicate(timeout=120)
    assert slow.returncode == -signal.SIGKILL


def test_code_forked_runs_as_python_c_runs_it(monkeypatch):
    code = "import os, sys\nprint(sys.argv, __name__, sys.path[0] == '', os.environ['MARK'])\n"
    env = {**os.environ, "MARK": "given"}
    monkeypatch.setenv("FORKED_TEST_WORKERS", "0")
    spawned = python(code, "a", 2, env=env)
    monkeypatch.setenv("FORKED_TEST_WORKERS", "1")
    forked = python(code, "a", 2, env=env)
    assert spawned.returncode == forked.returncode == 0
    assert forked.stdout == spawned.stdout == "['-c', 'a', '2'] __main__ True given\n"
    failed = python("raise SystemExit(3)")
    assert failed.returncode == 3
