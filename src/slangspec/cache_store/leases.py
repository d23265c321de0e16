"""Compile leases over a cache's tiers: one process builds a kernel while those that need it
wait, held where every process sharing the cache sees it.

A lease is held on the farthest tier this process may write to (the shared server when it
publishes there, so machines build a key once), falling back to the nearer one while the server
cannot be used. Work that only machines sharing a server need done once, and the sharing out
of warming between them, use the shared tier alone: without one, each process does that work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence

from .location import lease_seconds
from .tier import SharedTier, Tier, Unavailable


class Leases:
    """The leases of one cache, over its tiers (nearest first)."""

    def __init__(self, tiers: Sequence[Tier]) -> None:
        self._writable = [t for t in tiers if t.writable]
        shared = [t for t in self._writable if t.shared]
        self._shared: SharedTier | None = shared[-1] if shared else None  # type: ignore[assignment]

    def hold(self, name: str, done: Callable[[], bool]) -> contextlib.AbstractContextManager[None]:
        """The compile lease ``name`` until the block ends, or until ``done()``; one whose
        holder died is taken over at once on the holder's host, and lapses after
        ``SLANGSPEC_CACHE_LEASE`` seconds elsewhere."""
        return _first_held(reversed(self._writable), name, done)

    def shared(
        self, name: str, done: Callable[[], bool]
    ) -> contextlib.AbstractContextManager[None]:
        """The lease ``name`` on the shared tier, for work machines sharing it need done once;
        no lease without such a tier, or while it cannot be used."""
        return _first_held([] if self._shared is None else [self._shared], name, done)

    def claim(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """Try once, without waiting, to take the lease ``name`` on the shared tier: the block
        sees whether it holds it (always True without such a tier), so machines share out work
        instead of waiting on each other."""
        if self._shared is None:
            return contextlib.nullcontext(True)
        return self._shared.claim(name, lease_seconds())

    def held_elsewhere(self, name: str) -> bool:
        """Whether the lease ``name`` is held on the shared tier (by any process of any
        machine), so that other work can come first."""
        return self._shared is not None and self._shared.leased(name)


@contextlib.contextmanager
def _first_held(tiers: Iterable[Tier], name: str, done: Callable[[], bool]) -> Iterator[None]:
    """The lease ``name`` on the first of ``tiers`` that can hold it now; none without one."""
    seconds = lease_seconds()
    with contextlib.ExitStack() as held:
        for tier in tiers:
            try:
                held.enter_context(tier.lease(name, done, seconds))
                break
            except Unavailable:
                continue
        yield
