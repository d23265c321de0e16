"""Shrinking a cache that outgrew its bound (which ``Cache.enforce_bound`` finds with a few
``stat`` calls), off the thread that noticed: least recently used entries are evicted down to
``LOW_WATER`` of the bound on a thread of their own (one per root at a time), which the process
finishes before it exits."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

from .disk import DiskTier
from .location import CacheWarning
from .policy import LOW_WATER, enforce_bound

_shrinking: dict[Path, threading.Thread] = {}
_lock = threading.Lock()


def shrink(disk: DiskTier, bound: int) -> threading.Thread:
    """The thread shrinking ``disk`` to within ``bound`` bytes: started now, or the one
    already at it."""
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


def _shrink(disk: DiskTier, bound: int) -> None:
    try:
        enforce_bound(disk, bound, LOW_WATER)
    except Exception as exc:  # the cache stays over its bound until the next build
        warnings.warn(f"slangspec could not shrink {disk.root}: {exc}", CacheWarning, 2)
