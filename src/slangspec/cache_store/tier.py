"""The storage-tier interface: what the cache needs of any place that keeps entries.

A tier stores rows (plain JSON data) under keys the caller built, content-addressed blobs under
their names, and compile leases. It checks only that a blob still hashes to its name; whether a
row may be served is decided above it, the same way for every tier.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

GARBLED = object()
"""What ``Tier.get`` returns for a row that is there but does not decode."""


class Tier(Protocol):
    """One storage tier: the local disk, or a shared remote store."""

    def get(self, key: str) -> Any:
        """The row stored under ``key`` as decoded, None when there is none, ``GARBLED`` when
        it does not decode."""
        ...

    def put(self, key: str, row: dict[str, Any]) -> None: ...

    def update(self, key: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
        """Apply ``change`` to an intact stored row and store it again, atomically; the new row,
        or None when there is no intact row."""
        ...

    def delete(self, key: str) -> None: ...

    def entry_keys(self) -> list[str]: ...

    def read_blob(self, name: str) -> bytes | None:
        """The blob's bytes, or None when it is missing or no longer hashes to its name."""
        ...

    def write_blob(self, name: str, data: bytes) -> None: ...

    def delete_blob(self, name: str) -> int:
        """Remove the blob and whatever was derived from it here; bytes freed."""
        ...

    def blob_names(self) -> Iterable[str]: ...

    def lease(
        self, name: str, done: Callable[[], bool], seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the compile lease ``name`` until the block ends, or stop waiting once
        ``done()``; a holder that dies frees it after ``seconds``."""
        ...
