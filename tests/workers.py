"""Worker processes for the cache tests, and loading the module they call."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import slangspec

HERE = Path(__file__).parent
SHADERS = HERE / "shaders"
WORKER = HERE / "jit_worker.py"


def last_line(out: str) -> str:
    """What a child process printed last: slangpy prints notices of its own to standard output
    (on CUDA, the shader model it assumes)."""
    return (out.strip().splitlines() or [""])[-1]


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


def copied(built: Path, into: Path) -> Path:
    """A copy of the cache root ``built`` (which a process has built and left) at ``into``: a
    fresh root, as a process that built it would have left it, without starting that process
    again for every test that needs one."""
    return Path(shutil.copytree(built, into, symlinks=True))


def load(cache_dir):
    return slangspec.load(
        SHADERS / "cached.slang", include_paths=[HERE / "slang_lib"], cache_dir=cache_dir
    )


def held_by_woken_waiters(
    hold: Callable[[], contextlib.AbstractContextManager[None]],
    wait: Callable[[Callable[[], bool]], contextlib.AbstractContextManager[None]],
    held_now: Callable[[], bool],
    waiters: int = 4,
) -> list[bool]:
    """Hold a lease (``hold()``) while ``waiters`` threads wait on it (``wait(done)``) until
    each has looked for the result; then land the result and let go. Returns, per waiter,
    whether the lease was held (``held_now()``) inside its block."""
    landed, all_waiting = threading.Event(), threading.Event()
    looked: set[int] = set()
    held: list[bool] = []

    def done() -> bool:
        if not landed.is_set():
            looked.add(threading.get_ident())
            if len(looked) == waiters:
                all_waiting.set()
        return landed.is_set()

    def waiter() -> None:
        with wait(done):
            held.append(held_now())

    with hold():
        threads = [threading.Thread(target=waiter) for _ in range(waiters)]
        for t in threads:
            t.start()
        assert all_waiting.wait(30)
        time.sleep(0.5)  # from looking to waiting on the lease takes each of them far less
        landed.set()
    for t in threads:
        t.join(30)
    return held
