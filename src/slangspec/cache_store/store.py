"""How entries are kept: an index of JSON rows (diskcache over SQLite) plus content-addressed
kernel sources and CUDA binaries, each checked on read.

Nothing stored is executable by Python: rows go through diskcache's JSONDisk, never pickle;
sources are plain text and binaries raw GPU code, each named by the hash of its content.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import xxhash

from .location import BINARIES, INDEX, KERNELS, lease_seconds, part, write_atomic
from .preimage import canonical

ENTRY = "entry:"
RECORD = "record:"
LOCK = "lock:"
HITS = "stat:hits"
MISSES = "stat:misses"


_GARBLED = object()


class CacheWarning(UserWarning):
    """A damaged piece of the cache was dropped and will be rebuilt."""


def _checksum(row: dict[str, Any]) -> str:
    body = {k: v for k, v in row.items() if k != "checksum"}
    return xxhash.xxh3_64_hexdigest(canonical(body))


def seal(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its checksum set."""
    row = dict(row)
    row["checksum"] = _checksum(row)
    return row


def source_name(source: str | bytes) -> str:
    """The module name of a generated source (text or its UTF-8 bytes): its content hash, so
    equal sources share a file."""
    data = source.encode() if isinstance(source, str) else source
    return "k_" + xxhash.xxh3_64_hexdigest(data)


def binary_name(data: bytes) -> str:
    """The file stem of a stored binary: its content hash."""
    return "b_" + xxhash.xxh3_64_hexdigest(data)


def _read_named(path: Path, name: str, namer: Callable[[bytes], str]) -> bytes | None:
    """A content-addressed file's bytes, or None when it is missing or no longer hashes to
    ``name``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data if namer(data) == name else None


@dataclass
class Entry:
    """One specialization as stored: its key, the preimage it was built from, the plan as JSON,
    kernel module names by mask ("forward" or the grad mask) and metadata."""

    key: str
    row: dict[str, Any]

    @property
    def plan_json(self) -> str:
        return self.row["plan"]

    @property
    def kernels(self) -> dict[str, str]:
        return self.row["kernels"]

    @property
    def binaries(self) -> dict[str, dict[str, Any]]:
        """Per label, a CUDA binary of that kernel: file stem, parameter layout, group size."""
        return self.row.get("binaries", {})

    @property
    def meta(self) -> dict[str, Any]:
        return self.row["meta"]


class Store:
    """The index and kernel sources under one cache root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kernel_dir = part(root, KERNELS)
        self.binary_dir = part(root, BINARIES)
        self._index: diskcache.Cache | None = None

    # -- the index, recovered when SQLite finds it damaged ----------------------------------

    def _open(self) -> diskcache.Cache:
        return diskcache.Cache(
            str(part(self.root, INDEX)),
            disk=diskcache.JSONDisk,
            disk_compress_level=0,
            eviction_policy="none",
            size_limit=1 << 62,
            statistics=False,
            # Keep SQLite's write-ahead log small: it counts against the size bound too.
            sqlite_wal_autocheckpoint=64,
            sqlite_journal_size_limit=256 << 10,
        )

    @property
    def index(self) -> diskcache.Cache:
        if self._index is None:
            try:
                self._index = self._open()
                self._index.get(HITS)
            except sqlite3.DatabaseError as exc:
                self._rebuild_index(exc)
        return self._index

    def _rebuild_index(self, exc: Exception) -> None:
        warnings.warn(
            f"slangspec cache index at {self.root / INDEX} is damaged ({exc}); starting a new one",
            CacheWarning,
            stacklevel=4,
        )
        if self._index is not None:
            with contextlib.suppress(Exception):
                self._index.close()
        broken = self.root / f".{INDEX}.broken.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.root / INDEX, broken)
        shutil.rmtree(broken, ignore_errors=True)
        self._index = self._open()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self.index, method)(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            self._rebuild_index(exc)
            return getattr(self.index, method)(*args, **kwargs)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # -- entries ------------------------------------------------------------------------------

    def _row(self, key: str) -> Any:
        """The stored row of ``key`` as decoded, ``_GARBLED`` when it does not even decode."""
        try:
            return self._call("get", ENTRY + key)
        except (zlib.error, ValueError, UnicodeDecodeError):
            return _GARBLED

    def load(self, key: str, pre: dict[str, Any]) -> Entry | None:
        """The entry for ``key`` if it is whole and was built from exactly ``pre``."""
        row = self._row(key)
        if row is None:
            return None
        if not isinstance(row, dict) or row.get("checksum") != _checksum(row):
            self._drop(key, "it is garbled or its checksum does not match")
            return None
        if row.get("preimage") != pre:
            # Another format version, a collision or a damaged key: never serve it.
            self._drop(key, "its stored preimage differs from the requested one")
            return None
        return Entry(key, row)

    def _drop(self, key: str, why: str) -> None:
        warnings.warn(
            f"slangspec cache entry {key[:12]} dropped: {why}; rebuilding",
            CacheWarning,
            stacklevel=3,
        )
        self._call("delete", ENTRY + key)

    def insert(
        self,
        key: str,
        pre: dict[str, Any],
        plan_json: str,
        kernels: dict[str, str],
        meta: dict[str, Any],
    ) -> Entry:
        now = time.time()
        meta = {"created": now, "last_used": now, "hits": 0, **meta}
        row = seal({"preimage": pre, "plan": plan_json, "kernels": kernels, "meta": meta})
        self._call("set", ENTRY + key, row)
        return Entry(key, row)

    def update(self, key: str, change) -> Entry | None:
        """Apply ``change(row)`` to the stored row atomically; None if the entry is gone."""
        with self._transact():
            row = self._row(key)
            if not isinstance(row, dict) or row.get("checksum") != _checksum(row):
                return None
            change(row)
            row = seal(row)
            self._call("set", ENTRY + key, row)
            return Entry(key, row)

    def _transact(self) -> contextlib.AbstractContextManager:
        return self.index.transact()

    def add_kernel(self, key: str, mask: str, name: str, seconds: float) -> None:
        def change(row: dict[str, Any]) -> None:
            row["kernels"][mask] = name
            row["meta"]["compile_s"] = row["meta"].get("compile_s", 0.0) + seconds

        self.update(key, change)

    def add_binary(self, key: str, label: str, binary: dict[str, Any]) -> None:
        def change(row: dict[str, Any]) -> None:
            row.setdefault("binaries", {})[label] = binary

        self.update(key, change)

    def drop_binary(self, key: str, label: str) -> None:
        self.update(key, lambda row: row.get("binaries", {}).pop(label, None))

    def touch(self, key: str) -> None:
        """Count a hit and mark the entry used now (for LRU eviction)."""

        def change(row: dict[str, Any]) -> None:
            row["meta"]["hits"] += 1
            row["meta"]["last_used"] = time.time()

        self.update(key, change)
        self._bump(HITS)

    def count_miss(self) -> None:
        self._bump(MISSES)

    def _bump(self, counter: str) -> None:
        with self._transact():
            self._call("set", counter, int(self._call("get", counter, 0)) + 1)

    def counters(self) -> tuple[int, int]:
        return self._call("get", HITS, 0), self._call("get", MISSES, 0)

    def keys(self) -> list[str]:
        return [k[len(ENTRY) :] for k in self._call("iterkeys") if k.startswith(ENTRY)]

    def rows(self) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Every entry key with its row, or None where the row fails its checksum."""
        for key in self.keys():
            row = self._row(key)
            ok = isinstance(row, dict) and row.get("checksum") == _checksum(row)
            yield key, (row if ok else None)

    def delete(self, key: str) -> None:
        self._call("delete", ENTRY + key)

    # -- records of what the JIT compiled, for replay -------------------------------------------

    def record(self, record: dict[str, Any]) -> None:
        """Keep a record of a specialization, once however often it is recorded."""
        self._call("set", RECORD + xxhash.xxh3_64_hexdigest(canonical(record)), record)

    def records(self) -> list[dict[str, Any]]:
        out = []
        for k in self._call("iterkeys"):
            if k.startswith(RECORD):
                with contextlib.suppress(zlib.error, ValueError, UnicodeDecodeError):
                    value = self._call("get", k)
                    if isinstance(value, dict):
                        out.append(value)
        return out

    # -- kernel sources -------------------------------------------------------------------------

    def source_path(self, name: str) -> Path:
        return self.kernel_dir / f"{name}.slang"

    def write_source(self, source: str) -> str:
        """Store a generated source; returns its module name."""
        name = source_name(source)
        path = self.source_path(name)
        if not self.source_ok(name):
            write_atomic(path, source.encode())
        return name

    def source_ok(self, name: str) -> bool:
        """The source file exists and its content still hashes to its name."""
        return _read_named(self.source_path(name), name, source_name) is not None

    # -- CUDA binaries --------------------------------------------------------------------------

    def binary_path(self, name: str) -> Path:
        return self.binary_dir / f"{name}.cubin"

    def write_binary(self, data: bytes) -> str:
        """Store a compiled binary; returns its name."""
        name = binary_name(data)
        if self.read_binary(name) is None:
            write_atomic(self.binary_path(name), data)
        return name

    def read_binary(self, name: str) -> bytes | None:
        """The binary's bytes, or None when it is missing or no longer hashes to its name."""
        return _read_named(self.binary_path(name), name, binary_name)

    # -- compile leases: one process compiles a key, the others wait ---------------------------

    @contextlib.contextmanager
    def lease(self, name: str, done, seconds: float | None = None) -> Iterator[None]:
        """Hold the compile lease ``name`` until the block ends, or stop waiting once ``done()``.

        A holder that dies frees the lease after ``seconds``; the caller checks again for the
        result inside the block, since it may have been built while it waited.
        """
        seconds = lease_seconds() if seconds is None else seconds
        token = {"pid": os.getpid(), "host": socket.gethostname(), "token": uuid.uuid4().hex}
        delay = 0.01
        while not self._call("add", LOCK + name, token, expire=seconds):
            if done():
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        try:
            yield
        finally:
            with self._transact():
                if self._call("get", LOCK + name) == token:
                    self._call("delete", LOCK + name)
