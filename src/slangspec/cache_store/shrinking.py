"""Shrinking a cache that outgrew its bound (which ``Cache.enforce_bound`` finds with a few
``stat`` calls), off the thread that noticed: least recently used entries are evicted down to
``LOW_WATER`` of the bound on a thread of their own (one per root at a time), which the process
finishes before it exits.

The entry used last is never evicted, nor anything but entries and what only they use:
slangpy's compiled Slang library, built again, would cost every process seconds. So a bound
below what the cache holds beside its kernels is not reached; it is said once a process, with
the bound that would be (``policy.workable_bound``).
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

from ..settings import SettingWarning, caller_outside
from .disk import DiskTier
from .location import CacheWarning
from .policy import LOW_WATER, MIB, enforce_bound, workable_bound

_shrinking: dict[Path, threading.Thread] = {}
_lock = threading.Lock()
_said_unworkable = False


def shrink(disk: DiskTier, bound: int) -> threading.Thread:
    """The thread shrinking ``disk`` to within ``bound`` bytes: started now, or the one
    already at it. A bound too small to be workable is said first, once a process."""
    if not _said_unworkable:
        _say_if_unworkable(disk, bound)
    with _lock:
        running = _shrinking.get(disk.root)
        if running is not None and running.is_alive():
            return running
        thread = threading.Thread(
            target=_shrink, args=(disk, bound), name="slangspec-evict", daemon=False
        )
        _shrinking[disk.root] = thread
        thread.start()
        return thread


def _say_if_unworkable(disk: DiskTier, bound: int) -> None:
    beside = disk.beside_kernels()
    workable = workable_bound(beside)
    if bound >= workable:
        return
    global _said_unworkable
    _said_unworkable = True
    given = os.environ.get("SLANGSPEC_CACHE_SIZE")
    setting = f"SLANGSPEC_CACHE_SIZE={given}" if given else "SLANGSPEC_CACHE_SIZE (unset: 1 GiB)"
    warnings.warn(
        f"{setting} is below what the cache at {disk.root} needs: it holds "
        f"{beside / MIB:.1f} MiB beside its kernels (slangpy's compiled Slang library, the "
        f"shader cache, the index) and needs room for kernels; raise it to at least "
        f"{workable // MIB}M. Until then it keeps all of that and the kernel used last, and "
        "evicts the other kernels whenever it outgrows the bound",
        SettingWarning,
        stacklevel=caller_outside(),
    )


def _shrink(disk: DiskTier, bound: int) -> None:
    try:
        enforce_bound(disk, bound, LOW_WATER, keep_newest=True)
    except Exception as exc:  # the cache stays over its bound until the next build
        warnings.warn(f"slangspec could not shrink {disk.root}: {exc}", CacheWarning, 2)
