"""The worker processes of ``warm --jobs``; for CUDA, started before this process imports torch.

A CUDA worker spends 1-2 s creating its context (16 workers at once on an H200) and, forked
from a process that has not imported torch yet, about as long importing torch. It does both at
once, as soon as it starts: the context is created on a thread of its own while the worker
imports, since the driver call releases the GIL, and the parent imports torch meanwhile. This
module imports neither torch nor slangpy into the parent.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import importlib
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from .cuda_api import CudaDriverError, primary_context

_Pool = TypeVar("_Pool", bound=futures.Executor | None)

_BUILDER = ("slangspec.warm", "slangspec.runtime")
"""What a worker imports before its first task: torch, and slangspec's builder."""


def start(jobs: int, device: str | None) -> futures.ProcessPoolExecutor:
    """``jobs`` worker processes, all started before this returns. Each imports slangspec's
    builder (and torch) first, and for CUDA (``wants_cuda``) creates its context meanwhile."""
    pool = futures.ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("fork" if _fork_safe() else "spawn"),
        initializer=_prepare,
        initargs=(wants_cuda(device),),
    )
    # The executor starts workers as tasks arrive; one task per worker starts them all now.
    for _ in range(jobs):
        pool.submit(os.getpid)
    return pool


@contextlib.contextmanager
def released(pool: _Pool) -> Iterator[_Pool]:
    """``pool`` for the block, then shut down without waiting for its workers to exit: each
    has written its work to the cache before reporting it, and their exits (on CUDA each tears
    down a context: 0.5 s for 8 workers, 1.1 s for 16 on the H200) overlap with what comes
    next. Shutting a pool down twice is harmless; None passes through."""
    try:
        yield pool
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _fork_safe() -> bool:
    """Whether a forked child may use CUDA and Vulkan: this process has opened neither."""
    devices = sys.modules.get("slangspec.devices")
    torch = sys.modules.get("torch")
    return not (devices and devices.opened()) and not (torch and torch.cuda.is_initialized())


def wants_cuda(device: str | None) -> bool:
    """Whether workers for ``device`` will run CUDA: it is asked for, or nothing is and this
    machine has an NVIDIA GPU (asked of the kernel driver: this process must not start CUDA
    before it forks). Only then does starting the pool before torch is imported pay: other
    workers have no context to create, and forked after torch is imported they inherit it."""
    name = device or os.environ.get("SLANGSPEC_DEVICE")
    if name is not None:
        return name.lower() == "cuda"
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def _prepare(cuda: bool) -> None:
    """Runs first in each worker: the context on a thread, the builder's imports meanwhile."""
    if cuda:
        threading.Thread(target=_create_context, name="slangspec-context", daemon=True).start()
    for name in _BUILDER:
        importlib.import_module(name)


def _create_context() -> None:
    # Device 0 is torch's current device in a new process. Without a driver or a GPU this
    # leaves the worker as it was; choosing the device kind, later, reports why.
    with contextlib.suppress(OSError, CudaDriverError):
        primary_context(0)
