"""The storage-tier interface: what the cache needs of any place that keeps entries, near (the
local disk) or far (a server shared by many machines).

A tier stores entries (plain JSON data) with the content-addressed blobs they name, under keys
the caller built; facts about inputs (plain JSON objects, which only grow); and compile leases.
It checks what its own storage can damage (a checksum, a blob against its name, a MAC); whether
an entry may be served for a preimage is decided above it, the same way for every tier.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol

from ..define import frozen
from ..errors import Error


class Unavailable(Error):
    """Raised on entering a lease of a tier that cannot hold leases now."""


@frozen
class Found:
    """An entry a tier holds: its row (preimage, plan, kernels, binaries; and on a local tier
    its use counts and times), and its blobs, read and checked when asked for (None when one
    is missing or damaged)."""

    row: dict[str, Any]
    blobs: Callable[[], Mapping[str, bytes] | None]
    usable: ClassVar[Literal[True]] = True
    """What a lookup result is, said as data: an entry to serve (``Found``) or not
    (``Unusable``)."""


@frozen
class Unusable:
    """Something stored under a key that cannot be served, and why."""

    why: str
    usable: ClassVar[Literal[False]] = False


class Tier(Protocol):
    """One storage tier."""

    writable: bool
    """Whether this process may write here."""
    shared: bool
    """Whether other machines see what is stored here (and the leases held here)."""
    proven: bool
    """Whether what it holds is proven: this user's own files, or sealed with a secret. Only
    what a proven tier says is copied into nearer tiers as it is: of another's entries, only
    what this process proves itself (``policy.proven``), and none of its facts."""

    def get(self, key: str) -> Found | Unusable | None:
        """The entry under ``key`` (``Found``, or ``Unusable`` when it cannot be served: a
        result's ``usable`` says which); None when there is none."""
        ...

    def put(self, key: str, row: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        """Store ``blobs`` and then the entry naming them, so that a reader never meets an
        entry whose blobs are not there."""
        ...

    def delete(self, key: str) -> None: ...

    def entry_keys(self) -> list[str]: ...

    def fact(self, name: str) -> dict[str, Any]:
        """What is noted under the fact ``name``; empty when nothing (usable) is."""
        ...

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        """Add ``value``'s items to the fact ``name``."""
        ...

    def lease(
        self, name: str, done: Callable[[], bool], seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the compile lease ``name`` until the block ends, or stop waiting once
        ``done()``; a holder that dies frees it after ``seconds`` at the latest. Entering
        raises ``Unavailable`` when this tier cannot hold leases now."""
        ...


class SharedTier(Tier, Protocol):
    """A tier that machines share, whose leases also share out work between them."""

    def claim(self, name: str, seconds: float) -> contextlib.AbstractContextManager[bool]:
        """Try once, without waiting, to take the lease ``name``: within the block, whether
        this process holds it (True too when this tier cannot hold leases now)."""
        ...

    def leased(self, name: str) -> bool:
        """Whether some process, on any machine, holds the lease ``name`` now."""
        ...
