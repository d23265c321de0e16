"""The local disk tier: an index of JSON rows (diskcache over SQLite) plus content-addressed
kernel sources and CUDA binaries, each checked on read.

Nothing stored is executable by Python: rows go through diskcache's JSONDisk, never pickle;
sources are plain text and binaries raw GPU code, each named by the hash of its content.

The index also keeps the running size of the root, so the size bound is enforced without walking
the tree: the bytes of every blob and module source written or removed here, and of every file in
slangpy's module cache (its compiled Slang library, the modules it compiled, their seals, the CUDA
library and prelude) as each build leaves it (``note_module_cache``); the index and the shader
cache's snapshots are measured directly. Of that total it keeps apart what kernel sources and
binaries hold, which is all that evicting entries can free (``kernel_bytes``). ``resync`` walks
the tree and sets both to what it finds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import stat
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import diskcache
import xxhash

from . import travel
from .disk_leases import LOCK as LOCK
from .disk_leases import DiskLeases
from .disk_leases import lease_waits as lease_waits
from .entry import blobs_of, intact, seal
from .jsondisk import JSONOnlyDisk
from .keys import blob_kind, canonical, names
from .location import (
    BINARIES,
    INDEX,
    KERNELS,
    MODULES,
    PARTS,
    SHADERS,
    SLANG,
    CacheWarning,
    compiled_modules,
    file_bytes,
    part,
    present,
    tree_size,
    write_atomic,
)
from .tier import Found, Unusable

_log = logging.getLogger(__name__)

ENTRY = "entry:"
RECORD = "record:"
FACT = "fact:"
HITS = "stat:hits"
MISSES = "stat:misses"
BYTES = "stat:bytes"
KERNEL_BYTES = "stat:kernel_bytes"
"""The part of the running size that kernel sources and binaries hold. An index without it
predates this count (or is new): the first change to the running size walks the tree."""
MODULE_CACHE = "stat:module_cache"
"""Every file of slangpy's module cache as last counted: its path under the module cache and
its bytes."""
REMOVALS = "stat:removals"
"""How many times an eviction or repair removed entries or files, so that a build that failed
meanwhile knows the cache changed under it."""
INDEX_WAIT_SECONDS = 10.0
"""How long a call waits for another process's lock on the index before setting it aside."""
_TROUBLE = (sqlite3.OperationalError, diskcache.Timeout)
"""What a locked, read-only or full index raises; damage raises plain ``DatabaseError``."""
_COUNTED_PARTS = (KERNELS, BINARIES, MODULES, SLANG)
"""The parts whose bytes the running size counts; the index and slangpy's shader cache are
measured directly, by a few ``stat`` calls."""
_WRITES = frozenset({"set", "add", "delete"})
"""The index methods that change it, which a tier that may not write never calls."""
GARBLED = object()
"""What ``DiskTier.row`` returns for a row that is there but does not decode."""


class DiskTier(DiskLeases):
    """The index, blobs and slangpy's caches under one cache root; with ``writable`` False, a
    view of them that changes nothing."""

    shared = False
    proven = True

    def __init__(self, root: Path, writable: bool = True) -> None:
        self.root = root
        self.writable = writable
        self.kernel_dir = part(root, KERNELS)
        self.binary_dir = part(root, BINARIES)
        self._index: diskcache.Cache | None = None
        self._trouble: str | None = None

    # -- the index: rebuilt when SQLite finds it damaged, set aside when it is only in trouble --

    def _open(self) -> diskcache.Cache:
        db = self.root / INDEX / "cache.db"
        if self.writable and db.is_file():
            # diskcache retries a locked index for 60 s as it opens it, whatever its timeout:
            # ask for the write lock first, for as long as any operation waits.
            probe = sqlite3.connect(str(db), timeout=INDEX_WAIT_SECONDS, isolation_level=None)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            finally:
                probe.close()
        index = diskcache.Cache(
            str(part(self.root, INDEX)),
            timeout=INDEX_WAIT_SECONDS,
            disk=JSONOnlyDisk,
            disk_compress_level=0,
            disk_min_file_size=1 << 30,
            eviction_policy="none",
            size_limit=1 << 62,
            statistics=False,
            # Keep SQLite's write-ahead log small: it counts against the size bound too.
            sqlite_wal_autocheckpoint=64,
            sqlite_journal_size_limit=256 << 10,
        )
        for path in present(self.root / INDEX, "cache.db*"):
            with contextlib.suppress(OSError):
                path.chmod(0o600)
        return index

    @property
    def index(self) -> diskcache.Cache:
        if self._index is None:
            try:
                self._index = self._open()
                self._index.get(HITS)
            except _TROUBLE:
                raise
            except sqlite3.DatabaseError as exc:
                self._rebuild_index(exc)
            except ValueError:
                pass  # a refused row reads as garbled where it is used
        return self._index

    def _rebuild_index(self, exc: Exception) -> None:
        if type(exc) is not sqlite3.DatabaseError:
            raise exc  # not damage: a bug to see, not an index to throw away
        warnings.warn(
            f"slangspec cache index at {self.root / INDEX} is damaged ({exc}); starting a new one",
            CacheWarning,
            stacklevel=5,
        )
        self._drop_index()
        broken = self.root / f".{INDEX}.broken.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.root / INDEX, broken)
        shutil.rmtree(broken, ignore_errors=True)
        self._index = self._open()
        self.resync()

    def _set_aside(self, exc: Exception) -> None:
        """Stop using an index that is locked, read-only or on a full disk: this process goes on
        computing without caching, and the index keeps everything it held."""
        if self._trouble is None:
            self._trouble = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"slangspec cache index at {self.root / INDEX} cannot be used now "
                f"({self._trouble}); this process computes without caching from here on",
                CacheWarning,
                stacklevel=4,
            )

    def _call(
        self,
        method: str | Callable[[diskcache.Cache], Any],
        *args: Any,
        fallback: Any = None,
        **kwargs: Any,
    ) -> Any:
        """``method`` of the index (a name, or a function given the index); ``fallback`` once
        the index is in trouble."""
        if not self.writable and method in _WRITES:
            return fallback
        for attempt in (1, 2):
            if self._trouble is not None:
                return fallback
            try:
                if callable(method):
                    return method(self.index)
                return getattr(self.index, method)(*args, **kwargs)
            except _TROUBLE as exc:
                if attempt == 1 and self._removed(exc):
                    self._drop_index()  # opened again, and created where removed, on next use
                    continue
                self._set_aside(exc)
            except sqlite3.DatabaseError as exc:
                if attempt == 2:
                    raise
                self._rebuild_index(exc)
        return fallback

    def _removed(self, exc: Exception) -> bool:
        """Whether ``exc`` says the index was removed under this process (a ``cache clear``
        elsewhere): a connection opened since, on another thread say, finds no file or an empty
        one."""
        if not isinstance(exc, sqlite3.OperationalError):
            return False
        return "no such table" in str(exc) or not (self.root / INDEX / "cache.db").is_file()

    def _drop_index(self) -> None:
        """Let go of the open index, however its close goes; the next use opens it afresh."""
        if self._index is not None:
            with contextlib.suppress(Exception):
                self._index.close()
        self._index = None

    @contextlib.contextmanager
    def _transact(self) -> Iterator[None]:
        """One transaction over the block, or none once the index is in trouble (the block's
        calls then fall back)."""
        index = None
        try:
            with contextlib.ExitStack() as stack:
                if self._trouble is None:
                    with contextlib.suppress(*_TROUBLE):
                        index = self.index
                        stack.enter_context(index.transact())
                yield
        except _TROUBLE as exc:
            self._set_aside(exc)
        except sqlite3.ProgrammingError:
            if index is None or self._index is index:
                raise
            # Found damaged inside the block and replaced: its transaction went with it.

    def _keys(self, prefix: str) -> list[str]:
        """Every key with ``prefix``, read whole so that trouble shows here."""
        keys = self._call(lambda index: list(index.iterkeys()), fallback=[])
        return [k for k in keys if isinstance(k, str) and k.startswith(prefix)]

    def _read(self, key: str, default: Any = None) -> Any:
        """The value under ``key``, ``default`` when there is none, ``GARBLED`` when it does
        not decode or is refused."""
        try:
            return self._call("get", key, default, fallback=default)
        except (zlib.error, ValueError, UnicodeDecodeError):
            return GARBLED

    def _number(self, key: str) -> int:
        value = self._read(key, 0)
        return value if isinstance(value, int) else 0

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # -- rows ---------------------------------------------------------------------------------

    def row(self, key: str) -> Any:
        """The row stored under ``key`` as decoded, None when there is none, ``GARBLED`` when
        it does not decode."""
        return self._read(ENTRY + key)

    def get(self, key: str) -> Found | Unusable | None:
        row = self.row(key)
        if row is None:
            return None
        if not intact(row):
            return Unusable("it is garbled or its checksum does not match")
        try:
            travel.parts(row)
        except travel.Refused as exc:
            return Unusable(f"it does not have an entry's shape ({exc})")
        return Found(row, lambda: self.read_blobs(blobs_of(row)))

    def put(self, key: str, row: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        """Store the blobs, then the row sealed with its checksum."""
        for name, data in blobs.items():
            self.write_blob(name, data)
        self._call("set", ENTRY + key, seal(row))

    def update(self, key: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
        """Apply ``change`` to an intact stored row and store it again, atomically; the new row,
        or None when there is no intact row."""
        with self._transact():
            row = self.row(key)
            if not intact(row):
                return None
            change(row)
            row = seal(row)
            self._call("set", ENTRY + key, row)
            return row

    def delete(self, key: str) -> None:
        self._call("delete", ENTRY + key)

    def entry_keys(self) -> list[str]:
        return [k[len(ENTRY) :] for k in self._keys(ENTRY)]

    # -- blobs ----------------------------------------------------------------------------------

    def blob_path(self, name: str) -> Path:
        """Where the blob ``name`` lives: sources where Slang imports them, binaries beside."""
        if blob_kind(name) == "source":
            return self.kernel_dir / f"{name}.slang"
        return self.binary_dir / f"{name}.cubin"

    def read_blobs(self, wanted: Iterable[str]) -> dict[str, bytes] | None:
        """The blobs ``wanted``, by name; None when one is missing or damaged."""
        found = {name: self.read_blob(name) for name in wanted}
        return None if None in found.values() else found  # type: ignore[return-value]

    def read_blob(self, name: str) -> bytes | None:
        try:
            data = self.blob_path(name).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return data if names(name, data) else None

    def write_blob(self, name: str, data: bytes) -> None:
        if not self.writable or self.read_blob(name) is not None:
            return
        path = self.blob_path(name)
        if path.is_dir():  # damage: a directory where the blob belongs
            shutil.rmtree(path, ignore_errors=True)
        self._write(path, data, kernel=True)

    def delete_many(self, keys: Iterable[str], blobs: Iterable[str]) -> int:
        """Remove these entries and these blobs (with a source's compiled modules) in one
        transaction; bytes of blob files freed."""
        freed = 0
        if not self.writable:
            return freed
        with self._transact():
            for key in keys:
                self._call("delete", ENTRY + key)
            modules: list[Path] = []
            for name in blobs:
                freed += _remove(self.blob_path(name))
                if blob_kind(name) == "source":
                    modules += compiled_modules(self.root, name)
            self._add_bytes(-freed, kernel=True)
            if sum(map(_remove, modules)):
                self.note_module_cache()
            self.count(REMOVALS)
        return freed

    def removals(self) -> int:
        return self._number(REMOVALS)

    def blob_bytes(self, name: str) -> int:
        """Bytes a blob's file holds here."""
        return file_bytes([self.blob_path(name)])

    def blob_names(self) -> Iterator[str]:
        for directory, pattern in ((self.kernel_dir, "k_*.slang"), (self.binary_dir, "b_*.cubin")):
            for path in present(directory, pattern):
                yield path.stem

    # -- modules given as source strings --------------------------------------------------------

    def write_module(self, name: str, source: str) -> Path:
        """The file of a module given as a source string, written once per content (again
        when a ``cache clear`` removed it)."""
        directory = part(self.root, MODULES) / xxhash.xxh3_64_hexdigest(source.encode())
        path = directory / f"{name}.slang"
        data = source.encode()
        try:
            if path.read_bytes() == data:
                return path
            damaged = True
        except FileNotFoundError:
            damaged = False
        except OSError:  # a directory where the file belongs
            damaged = True
            shutil.rmtree(path, ignore_errors=True)
        if damaged:
            warnings.warn(
                f"slangspec cache module {path} is damaged; writing it again",
                CacheWarning,
                stacklevel=4,
            )
        self._write(path, data)
        return path

    def damaged_modules(self) -> list[Path]:
        """Module files whose content no longer hashes to the directory they were written to."""
        damaged = []
        for path in present(self.root / MODULES, "*/*.slang"):
            try:
                if xxhash.xxh3_64_hexdigest(path.read_bytes()) != path.parent.name:
                    damaged.append(path)
            except FileNotFoundError:  # removed meanwhile
                continue
            except OSError:  # a directory where the file belongs
                damaged.append(path)
        return damaged

    def delete_module(self, path: Path) -> None:
        """Remove a module file; ``load_source`` writes it again."""
        if self.writable:
            self._add_bytes(-_remove(path))

    # -- the running size -------------------------------------------------------------------------

    def _write(self, path: Path, data: bytes, kernel: bool = False) -> None:
        """Write a file the running size counts (``kernel``: a kernel source or binary)."""
        if not self.writable:
            return
        before = file_bytes([path])
        write_atomic(path, data)
        self._add_bytes(len(data) - before, kernel)

    def _add_bytes(self, delta: int, kernel: bool = False) -> None:
        if not delta:
            return
        with self._transact():
            if self._predates_count():
                self.resync()  # its walk counts this change too
                return
            self._call("set", BYTES, self._number(BYTES) + delta)
            if kernel:
                self._call("set", KERNEL_BYTES, self._number(KERNEL_BYTES) + delta)

    def _predates_count(self) -> bool:
        """Whether the index does not yet keep apart what kernels hold (see ``KERNEL_BYTES``)."""
        counted = self._read(KERNEL_BYTES)
        return self.writable and self._trouble is None and not isinstance(counted, int)

    def note_module_cache(self) -> None:
        """Count slangpy's module cache as it is now (after a build, which may have written
        slangpy's library, modules, seals and the CUDA library and prelude there, or removed
        damaged ones): a few directory listings, and a write to the index only when a file
        appeared, changed size or went."""
        if not self.writable:
            return
        now = _module_cache_files(self.root)
        if self._read(MODULE_CACHE) == now:
            return
        with self._transact():
            if self._predates_count():
                self.resync()
                return
            before = self._read(MODULE_CACHE)
            counted = sum(before.values()) if isinstance(before, dict) else 0
            self._call("set", MODULE_CACHE, now)
            self._add_bytes(sum(now.values()) - counted)

    def _measured(self, name: str) -> int:
        """Bytes of the files directly in the part ``name``, by a ``stat`` each."""
        try:
            return file_bytes([p for p in (self.root / name).iterdir() if p.is_file()])
        except FileNotFoundError:  # removed meanwhile by a clear
            return 0

    def size(self) -> int:
        """Bytes of the whole root, from the running size and a few ``stat`` calls."""
        return self._number(BYTES) + self._measured(INDEX) + self._measured(SHADERS)

    def kernel_bytes(self) -> int:
        """Bytes of the root's kernel sources and binaries: what evicting entries frees beside
        their rows in the index. The rest of ``size`` (slangpy's module cache, above all its
        compiled Slang library, the shader cache, the index, module files) no eviction of
        kernels frees (``beside_kernels``)."""
        if self._predates_count():
            self.resync()
        return self._number(KERNEL_BYTES)

    def beside_kernels(self) -> int:
        """Bytes of the root that evicting kernels does not free, or barely: ``size`` less what
        kernels hold, and less the index's write-ahead log, which its checkpoints empty."""
        database = file_bytes([self.root / INDEX / "cache.db"])
        return self._number(BYTES) - self.kernel_bytes() + database + self._measured(SHADERS)

    def measure(self) -> dict[str, int]:
        """Bytes per part of the layout, by walking it."""
        return {name: tree_size(self.root / name) for name in PARTS}

    def resync(self) -> None:
        """Set the running size, and what of it kernels hold, to what a walk of the counted
        parts finds."""
        with self._transact():
            walked = sum(tree_size(self.root / name) for name in _COUNTED_PARTS)
            self._call("set", BYTES, walked)
            kernels = tree_size(self.kernel_dir) + tree_size(self.binary_dir)
            self._call("set", KERNEL_BYTES, kernels)
            self._call("set", MODULE_CACHE, _module_cache_files(self.root))

    # -- counters and records -------------------------------------------------------------------

    def count(self, counter: str) -> None:
        with self._transact():
            self._call("set", counter, self._number(counter) + 1)

    def counters(self) -> tuple[int, int]:
        """Hits and misses."""
        return self._number(HITS), self._number(MISSES)

    def record(self, record: dict[str, Any]) -> None:
        """Keep a record of a specialization, once however often it is recorded."""
        self._call("set", RECORD + xxhash.xxh3_64_hexdigest(canonical(record)), record)

    def records(self) -> list[dict[str, Any]]:
        values = (self._read(k) for k in self._keys(RECORD))
        return [v for v in values if isinstance(v, dict)]

    def fact(self, name: str) -> dict[str, Any]:
        row = self._read(FACT + name)
        if not intact(row) or not isinstance(row.get("value"), dict):
            return {}
        return row["value"]

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        with self._transact():
            merged = {**self.fact(name), **value}
            self._call("set", FACT + name, seal({"value": merged}))

    def fact_names(self, prefix: str) -> list[str]:
        """Names of the facts that start with ``prefix``."""
        return sorted(k[len(FACT) :] for k in self._keys(FACT + prefix))

    def delete_fact(self, name: str) -> None:
        self._call("delete", FACT + name)


def _remove(path: Path) -> int:
    """Remove a file (or a directory damage left where a file belongs); bytes freed."""
    try:
        size = path.stat().st_size
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except FileNotFoundError:
        return 0
    return size


def _module_cache_files(root: Path) -> dict[str, int]:
    """Bytes of each file in the module cache of ``root``, by its path there: slangpy and
    ``compile.cuda.build`` keep every file two levels down (``location.COMPILED_MODULE``)."""
    directory = root / SLANG
    files = {}
    for path in present(directory, "*/*/*"):
        with contextlib.suppress(FileNotFoundError):
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode):
                files[path.relative_to(directory).as_posix()] = info.st_size
    return files
