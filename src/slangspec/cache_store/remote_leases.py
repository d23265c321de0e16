"""The remote tier's compile leases, shared by every machine of a cluster: one process builds
a kernel while the others wait on it, woken when it lands; a holder that dies frees its lease
within a heartbeat."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .remote_config import RemoteSettings
from .tier import Unavailable

_log = logging.getLogger("slangspec.cache_store.remote")
_NOTED_WAIT_S = 0.05
"""Lease waits shorter than this are not logged."""
_FAILED = object()
lease_waits: list[float] = []
"""Seconds each wait on another machine's lease took in this process, for tests and benchmarks."""


class RemoteLeases:
    """The lease methods of ``RemoteTier``, which gives them its key prefix, its settings, its
    calls to the server (``_call``) and its warnings (``warn``)."""

    prefix: str
    settings: RemoteSettings
    _call: Callable[..., Any]
    warn: Callable[..., None]

    def leased(self, name: str) -> bool:
        """Whether some process, on any machine, holds the compile lease ``name`` now."""
        return bool(self._call(lambda r: r.exists(self.prefix + "lease:" + name), 0))

    @contextlib.contextmanager
    def lease(self, name: str, done: Callable[[], bool], seconds: float) -> Iterator[None]:
        """Hold the compile lease ``name`` on the server until the block ends, renewed while
        it runs, or stop waiting once ``done()``. Waiters are woken when the holder lets go. A
        holder that dies frees it after ``seconds``. ``Unavailable`` without a usable server."""
        key = self.prefix + "lease:" + name
        channel = self.prefix + "landed:" + name
        token = uuid.uuid4().hex
        waiter = self._call(lambda r: r.subscribe(channel), _FAILED)
        if waiter is _FAILED:
            raise Unavailable(self.settings.shown)
        ms = int(seconds * 1000)
        start = time.monotonic()
        try:
            while True:
                # The result first: waiters woken together must not take the lease in turns.
                if done():
                    yield
                    return
                taken = self._call(lambda r: r.set(key, token, nx=True, px=_beat(ms)), _FAILED)
                if taken is _FAILED:
                    raise Unavailable(self.settings.shown)
                if taken:
                    break
                if time.monotonic() - start > seconds:
                    # No holder keeps anyone waiting past the bound: build without the lease.
                    self.warn("lease wait", f"lease {name[:24]} still held after {seconds:g} s")
                    yield
                    return
                self._cut(key, _beat(ms))
                waiter.wait(min(1.0, seconds))
        finally:
            waited = time.monotonic() - start
            lease_waits.append(waited)
            if waited > _NOTED_WAIT_S:
                _log.info("waited %.2f s on the remote compile lease %s", waited, name)
            waiter.close()
        with self._holding(key, token, _beat(ms), channel):
            yield

    def _cut(self, key: str, ms: int) -> None:
        """Make the lease ``key`` lapse within ``ms`` when it was set without an expiry or for
        longer than a heartbeat, as no holder sets one (someone set it by hand), warning once
        per key: else every waiter would wait for it the whole lease bound."""
        had = self._call(lambda r: r.eval(_CUT, [key], HEARTBEAT_MS, ms), 0)
        if had:
            expiry = "no expiry" if had == -1 else f"an expiry of {had / 1000:.0f} s"
            self.warn(
                f"lease {key}",
                f"holds lease {key} with {expiry}, which no holder sets; it lapses within "
                f"{ms / 1000:g} s now",
                then="waiting on it",
            )

    @contextlib.contextmanager
    def claim(self, name: str, seconds: float) -> Iterator[bool]:
        """Try once to take the lease ``name``: within the block, True while this process holds
        it (renewed, and let go at the end) or works without a usable server; False when
        another holds it."""
        key = self.prefix + "lease:" + name
        token = uuid.uuid4().hex
        ms = int(seconds * 1000)
        taken = self._call(lambda r: r.set(key, token, nx=True, px=_beat(ms)), _FAILED)
        if not taken or taken is _FAILED:
            yield taken is _FAILED
            return
        with self._holding(key, token, _beat(ms), self.prefix + "landed:" + name):
            yield True

    @contextlib.contextmanager
    def _holding(self, key: str, token: str, ms: int, channel: str) -> Iterator[None]:
        """Keep the lease ``key`` this process took with ``token`` (for ``ms``) for the block,
        renewing it, then let go and wake its waiters."""
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(key, token, ms, stop), daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            self._call(lambda r: r.eval(_RELEASE, [key], token))
            self._call(lambda r: r.publish(channel, token))

    def _renew(self, key: str, token: str, ms: int, stop: threading.Event) -> None:
        while not stop.wait(ms / 3000):
            self._call(lambda r: r.eval(_RENEW, [key], token, ms))


HEARTBEAT_MS = 5000
"""How long a lease on the server lasts unless its holder renews it (three times as often): a
killed holder's lapses within this, however long ``SLANGSPEC_CACHE_LEASE`` lets a build run."""


def _beat(ms: int) -> int:
    """The expiry a lease is set and renewed with: the heartbeat, or the bound if shorter."""
    return min(ms, HEARTBEAT_MS)


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_CUT = """
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 or ttl > tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return ttl
end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
