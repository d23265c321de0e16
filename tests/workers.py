"""Worker processes for the cache tests, and loading the module they call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import slangspec

HERE = Path(__file__).parent
SHADERS = HERE / "shaders"
WORKER = HERE / "jit_worker.py"


def worker(cache_dir, *args: str, env: dict[str, str] | None = None):
    """Start one worker process; returns the Popen."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(cache_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def report(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{out}\n{err}"
    return json.loads(out.strip().splitlines()[-1])


def run(cache_dir, *args: str, env: dict[str, str] | None = None) -> dict:
    return report(worker(cache_dir, *args, env=env))


def load(cache_dir):
    return slangspec.load(
        SHADERS / "cached.slang", include_paths=[HERE / "slang_lib"], cache_dir=cache_dir
    )
