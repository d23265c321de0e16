"""Worker processes for the cache tests, and loading the module they call."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from zygote import Zygote

import slangspec

HERE = Path(__file__).parent
SHADERS = HERE / "shaders"
WORKER = HERE / "jit_worker.py"


def last_line(out: str) -> str:
    """What a child process printed last: slangpy prints notices of its own to standard output
    (on CUDA, the shader model it assumes)."""
    return (out.strip().splitlines() or [""])[-1]


@functools.cache
def zygote() -> Zygote:
    """The zygote of this test run, which pytest's workers share (``zygote.Zygote``)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    return Zygote(Path(tempfile.gettempdir()) / f"slangspec-zygote-{run}")


def worker(cache_dir, *args: str, env: dict[str, str] | None = None):
    """Start one worker process; returns its Popen, or with ``FORKED_TEST_WORKERS=1`` its
    ``zygote.Forked`` (the same process, forked where torch is already imported)."""
    argv = [str(WORKER), str(cache_dir), *args]
    environment = {**os.environ, **(env or {})}
    if os.environ.get("FORKED_TEST_WORKERS") == "1":
        return zygote().fork(argv, environment)
    return subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def python(
    code: str, *args: object, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in the environment ``env`` (this one's by default), finished,
    its output as text; forked from the zygote with ``FORKED_TEST_WORKERS=1``, for code that
    imports torch anyway."""
    argv = ["-c", code, *map(str, args)]
    environment = dict(os.environ) if env is None else env
    if os.environ.get("FORKED_TEST_WORKERS") != "1":
        return subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment,
        )
    child = zygote().fork(argv, environment)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise
    return subprocess.CompletedProcess([sys.executable, *argv], child.returncode, out, err)


_COMMAND_LINE = "import runpy; runpy.run_module('slangspec', run_name='__main__')"
"""``python -m slangspec``, as code for ``python -c`` (or a zygote's fork) to run."""


def specialize(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m slangspec ARGS``, finished. A build ``--arch`` (which reflects slangpy's
    library, near a gigabyte) waits for any other of this machine's tests to finish its own:
    two at once made the suite's peak of memory. With ``FORKED_TEST_WORKERS=1`` it runs forked
    from the zygote, where torch is imported, and so builds in its own process instead of
    starting a worker beside it (0.7 GB more at the suite's peak)."""
    environment = {**os.environ, **(env or {})}
    if "--arch" not in map(str, args):
        command = [sys.executable, "-m", "slangspec", *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment)
    with one_at_a_time("arch-build"):
        return python(_COMMAND_LINE, *args, env=environment, timeout=600)


@contextlib.contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Held by one process of the machine at a time (pytest's workers among them)."""
    with open(Path(tempfile.gettempdir()) / f"slangspec-tests-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


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
