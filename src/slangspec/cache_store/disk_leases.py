"""A local cache's compile leases: one process compiles a key while the others that need it
wait, held in the cache's index where every process sharing the directory sees it; a holder
that died is taken over at once on its host."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .location import process_gone

_log = logging.getLogger("slangspec.cache_store.disk")
_NOTED_WAIT_S = 0.05
"""Lease waits shorter than this are not logged."""
LOCK = "lock:"
lease_waits: list[float] = []
"""Seconds this process spent on each lease before holding it or seeing the result, for
benchmarks."""


class DiskLeases:
    """The lease methods of ``DiskTier``, which gives them whether it writes (``writable``),
    its index's calls (``_call``, ``_read``) and transactions (``_transact``)."""

    writable: bool
    _call: Callable[..., Any]
    _read: Callable[..., Any]
    _transact: Callable[[], contextlib.AbstractContextManager[None]]

    @contextlib.contextmanager
    def lease(self, name: str, done: Callable[[], bool], seconds: float) -> Iterator[None]:
        """Hold the compile lease ``name`` until the block ends, or stop waiting once ``done()``
        (an index in trouble lets every caller through). A holder that dies is taken over at
        once on its host.

        The caller checks again for the result inside the block, since it may have been built
        while it waited.
        """
        if not self.writable:
            yield
            return
        token = {"pid": os.getpid(), "host": socket.gethostname(), "token": uuid.uuid4().hex}
        delay = 0.01
        start = time.monotonic()
        # The result first: waiters that see it together must not take the lease in turns.
        while not done():
            if self._call("add", LOCK + name, token, expire=seconds, fallback=True):
                break
            holder = self._read(LOCK + name)
            if _dead(holder):
                self._delete_if(LOCK + name, holder)
                continue
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        waited = time.monotonic() - start
        lease_waits.append(waited)
        if waited > _NOTED_WAIT_S:
            _log.info("waited %.2f s on the compile lease %s", waited, name)
        try:
            yield
        finally:
            self._delete_if(LOCK + name, token)

    def _delete_if(self, key: str, value: Any) -> None:
        """Delete ``key`` if it still holds ``value``, atomically."""
        with self._transact():
            if self._read(key) == value:
                self._call("delete", key)


def _dead(holder: Any) -> bool:
    """Whether a lease's holder is a process of this host that no longer runs (or a zombie)."""
    if not isinstance(holder, dict) or holder.get("host") != socket.gethostname():
        return False
    pid = holder.get("pid")
    return isinstance(pid, int) and pid > 0 and process_gone(pid)
