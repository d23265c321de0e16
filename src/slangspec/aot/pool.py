"""The worker processes of ``warm --jobs``, which never import torch.

Workers build from signatures alone (``runtime/module_base.py``), so none imports torch: slangpy
would (seconds a worker, with many contending), and nothing a worker does needs it. A CUDA worker
opens no context and imports no slangpy: it builds for an architecture
(``SLANGSPEC_CUDA_ARCH``: the one ``warm --arch`` names, else the GPU's, asked of the driver)
through Slang's C API and NVRTC, and keeps what it built without loading it. This module
imports neither torch nor slangpy into the parent.

Forked workers write their output (both streams) to a pipe this process copies to its standard
error: a worker's messages stay out of the command's standard output (``--json``), and a
reader of the command's output sees its end when the command exits, not once the killed
workers' CUDA contexts are torn down.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import importlib
import multiprocessing
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from typing import TypeVar

from ..cache_store import process_stat
from ..runtime.cuda_api import CudaDriverError
from ..runtime.devices import cuda_arch, gpu_driver_present, opened
from ..settings import setting, unknown_variables_said

_Executor = TypeVar("_Executor", bound=futures.Executor | None)

_BUILDER = ("slangspec.aot.warm", "slangspec.runtime.module_base")
"""What a worker imports before its first task: slangspec's builder (and on Vulkan slangpy)."""


class _Relay:
    """A pipe whose contents a thread of this process copies to its standard error, from
    ``start`` until every process holding the pipe's write end has closed it."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        self._lock = threading.Lock()
        self._open = True

    def start(self) -> None:
        """Start copying; called once the workers are forked (forking a process that runs
        threads of its own is unsafe)."""
        threading.Thread(target=self._run, name="slangspec-worker-output", daemon=True).start()

    def _run(self) -> None:
        while True:
            select.select([self.read_end], [], [])
            with self._lock:
                if not self._copy():
                    os.close(self.read_end)
                    return

    def _copy(self) -> bool:
        """Copy what the pipe holds now; False at its end (every writer gone)."""
        while True:
            try:
                data = os.read(self.read_end, 1 << 16)
            except BlockingIOError:
                return True
            if not data:
                return False
            with contextlib.suppress(OSError):  # nowhere left to write it
                while data:
                    data = data[os.write(2, data) :]

    def close(self) -> None:
        """Stop writing to the pipe from this process and copy what it holds by now: everything
        a worker wrote before it reported its last result."""
        with self._lock:
            if self._open:
                self._open = False
                os.close(self.write_end)
                self._copy()


class _WorkerPool(futures.ProcessPoolExecutor):
    """A process pool whose shutdown also closes its workers' output relay, if it has one, and
    returns at once when it was shut down before and is not asked to wait: from Python 3.12 the
    executor's own shutdown takes a lock that its manager thread holds while it joins the
    exiting workers, which on CUDA tear down a context each. Collecting the executor takes that
    lock too, so a pool shut down without waiting is kept (in ``_exiting``) until its workers
    have exited."""

    def __init__(self, relay: _Relay | None, **options) -> None:
        super().__init__(**options)
        self._relay = relay
        self._shut_down = False
        self._manager: threading.Thread | None = None

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if wait or not self._shut_down:
            # The executor's shutdown lets go of its manager thread, even one still joining.
            self._manager = self._executor_manager_thread or self._manager
            super().shutdown(wait, cancel_futures=cancel_futures)
        self._shut_down = True
        if self._relay is not None:
            self._relay.close()
        _exiting.difference_update([pool for pool in _exiting if not pool.joining()])
        if not wait and self.joining():
            _exiting.add(self)

    def joining(self) -> bool:
        """Whether, once shut down, its manager thread still runs: joining the workers."""
        return self._manager is not None and self._manager.is_alive()

    def cpu_ticks(self) -> int | None:
        """The CPU time its workers have used, in clock ticks; None where that cannot be read
        (no ``/proc``, or a worker gone)."""
        total = 0
        for pid in list(self._processes or {}):
            ticks = _cpu_ticks(pid)
            if ticks is None:
                return None
            total += ticks
        return total

    def kill_workers(self) -> None:
        for process in list((self._processes or {}).values()):
            with contextlib.suppress(OSError):
                process.kill()


_exiting: set[_WorkerPool] = set()


class StallWatch:
    """Tells when a pool's workers have all gone ``bound`` seconds without using the CPU: a
    worker that compiles uses it, and one that waits (for another's compile lease, say) waits
    for less than that, so one that does neither is stuck, and waiting on would never end."""

    def __init__(self, pool: _WorkerPool, bound: float) -> None:
        self.pool = pool
        self.bound = bound
        self._ticks: int | None = None
        self._since = time.monotonic()

    def progressed(self) -> None:
        """A result came in."""
        self._since = time.monotonic()

    def stuck(self) -> bool:
        ticks = self.pool.cpu_ticks()
        if ticks is None or ticks != self._ticks:
            self._ticks = ticks
            self.progressed()
            return False
        return time.monotonic() - self._since >= self.bound


def stall_watch(pool: futures.Executor, bound: float) -> StallWatch | None:
    """A watch on ``pool``'s workers when they are processes ``start`` made (a thread cannot be
    stopped, so a pool of threads has none)."""
    return StallWatch(pool, bound) if isinstance(pool, _WorkerPool) else None


def _cpu_ticks(pid: int) -> int | None:
    stat = process_stat(pid)
    try:
        return None if stat is None else int(stat[11]) + int(stat[12])  # utime and stime
    except (IndexError, ValueError):
        return None


def start(jobs: int, device: str | None) -> futures.ProcessPoolExecutor:
    """``jobs`` worker processes, all started before this returns. Each imports slangspec's
    builder first, and for CUDA (``wants_cuda``) builds for an architecture (see the
    module's text).
    Forked workers write their output through this process (see the module's text)."""
    fork = fork_safe()
    relay = _Relay() if fork else None
    pool = _WorkerPool(
        relay,
        max_workers=jobs,
        mp_context=multiprocessing.get_context("fork" if fork else "spawn"),
        initializer=_prepare,
        initargs=(wants_cuda(device), None if relay is None else relay.write_end),
    )
    # The executor starts workers as tasks arrive; one task per worker starts them all now.
    for _ in range(jobs):
        pool.submit(os.getpid)
    if relay is not None:
        relay.start()
    return pool


@contextlib.contextmanager
def released(pool: _Executor) -> Iterator[_Executor]:
    """``pool`` for the block, then shut down without waiting for its workers to exit: each
    has written its work to the cache before reporting it, and their exits (on CUDA each tears
    down a context) overlap with what comes
    next. Shutting a pool ``start`` made down twice costs nothing; None passes through."""
    try:
        yield pool
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def fork_safe() -> bool:
    """Whether workers may be forked from this process: it runs no thread but its main one, has
    not imported torch and has opened no device. A forked child inherits the locks other threads
    held (torch's native pools among them) and the parent's device state; elsewhere workers are
    spawned."""
    torch_imported = sys.modules.get("torch") is not None
    return threading.active_count() == 1 and not torch_imported and not opened()


def wants_cuda(device: str | None) -> bool:
    """Whether workers for ``device`` will likely run CUDA, so that each creates its context as
    it starts: it is asked for, or nothing is and a GPU driver is present (this process must
    not ask torch, which would start CUDA before it forks)."""
    name = setting("SLANGSPEC_DEVICE", device, "device")
    return name == "cuda" if name is not None else gpu_driver_present()


def _prepare(cuda: bool, output: int | None) -> None:
    """Runs first in each worker: its output to ``output`` (the relay's pipe), or, spawned, to
    the standard error it inherited (its standard output is the command's, which carries
    ``--json``, or in a process driven through its pipes, their protocol); torch kept out, the
    context on a thread, the builder's imports meanwhile."""
    if output is not None:
        os.dup2(output, 1)
        os.dup2(output, 2)
    else:
        os.dup2(2, 1)
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    unknown_variables_said()  # the command has said them
    # Workers build side by side; one server would take their builds one at a time.
    os.environ["SLANGSPEC_COMPILE_SERVER"] = "off"
    if cuda and os.environ.get("SLANGSPEC_CUDA_ARCH") is None:
        # Device 0 is torch's current device in a new process. Without a driver or a GPU this
        # leaves the worker as it was; its first build reports why.
        with contextlib.suppress(OSError, CudaDriverError):
            os.environ["SLANGSPEC_CUDA_ARCH"] = cuda_arch(0, None)
    for name in (*_BUILDER, *(() if cuda else ("slangpy",))):
        importlib.import_module(name)
