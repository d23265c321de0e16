"""slangpy's shader cache, kept as checked snapshots.

slangpy keeps Vulkan target code and pipelines in LMDB, which has no checksums and maps its file
into memory: damage inside a page makes pipeline creation fail, or kills the process with SIGBUS.
So no process opens a shared copy. ``shaders/`` holds whole copies of slangpy's data file, each
named by the hash of its bytes, and ``current``, which names the newest. A process copies the
current snapshot, checked against its name, into a directory of its own and gives slangpy that;
after slangpy generated target code the snapshot lacked, the process publishes its copy as the
new snapshot. Damage shows as a hash mismatch and costs one rebuild; when two processes publish
at once, what one of them added is lost and generated again later.

With a ``SnapshotSharing`` (a remote tier that proves what it holds), a published snapshot is
also offered to other machines, and a cache root that has none takes the newest one offered
before slangpy opens it: a fresh node creates no pipeline another node created already.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import struct
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Protocol

import xxhash

from .location import CacheWarning, process_gone, write_atomic

POINTER = "current"
_NAME = re.compile(r"[0-9a-f]{32}\.mdb")
_DATA = Path("rhi") / "data.mdb"
"""Where slangpy keeps its data file under the shader cache path it is given."""
_PRIVATE_PREFIX = "slangspec-shaders-"

_MAGIC = 0xBEEFC0DE
_PAGE_SIZE_AT = 40  # the free-list database's md_pad holds the page size
_MAGIC_AT = 16
_LAST_PAGE_AT = 136  # mm_last_pg, then mm_txnid


def lmdb_whole(data: bytes) -> bool:
    """Whether an LMDB data file holds every page its newest meta page names (a shorter one
    kills the process that maps it)."""
    if len(data) < 4096:
        return False
    page = struct.unpack_from("<I", data, _PAGE_SIZE_AT)[0]
    if page < 512 or page & (page - 1) or len(data) < 2 * page:
        return False
    metas = []
    for start in (0, page):
        if struct.unpack_from("<I", data, start + _MAGIC_AT)[0] == _MAGIC:
            metas.append(struct.unpack_from("<QQ", data, start + _LAST_PAGE_AT))
    if not metas:
        return False
    last_page, _ = max(metas, key=lambda m: m[1])
    return len(data) >= (last_page + 1) * page


def _digest(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def _private_dir() -> Path:
    """A shader cache directory of this process alone, removed when it exits; those left by
    processes that died are removed first."""
    temp = Path(tempfile.gettempdir())
    for left in temp.glob(f"{_PRIVATE_PREFIX}*"):
        pid = left.name[len(_PRIVATE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and process_gone(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    path = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, path, True)
    return path


class SnapshotSharing(Protocol):
    """Where snapshots travel between machines: ``fetch`` gives the newest one offered, checked
    against what it was offered as (None when there is none, or it fails); ``offer`` offers
    one."""

    def fetch(self) -> bytes | None: ...

    def offer(self, data: bytes) -> None: ...


class ShaderSnapshots:
    """The shader cache of one cache root (``directory``), as this process uses it; slangpy may
    let it grow to ``size`` bytes."""

    def __init__(self, directory: Path, size: int) -> None:
        self.directory = directory
        self.size = size
        self.lock = threading.RLock()
        """Held while slangpy builds pipelines into this process's copy, and while the copy is
        published, so that no snapshot is taken half-way through a write."""
        self._private: Path | None = None
        self._published_misses = 0
        self._sharing: SnapshotSharing | None = None

    def share_through(self, sharing: SnapshotSharing) -> None:
        """Offer what this process publishes through ``sharing``, and take from it the newest
        snapshot when this cache root has none."""
        self._sharing = sharing

    def checkout(self) -> Path:
        """The directory to give slangpy: this process's copy of the current snapshot (empty
        when there is none, or it is damaged)."""
        with self.lock:
            if self._private is None:
                private = _private_dir()
                data = self._current()
                if data is None and self._sharing is not None:
                    data = self._taken(self._sharing)
                if data is not None:
                    target = private / _DATA
                    target.parent.mkdir(mode=0o700)
                    write_atomic(target, data)
                self._private = private
            return self._private

    def publish(self, misses: int) -> None:
        """Publish this process's copy as the current snapshot when slangpy reports more
        ``misses`` than at the last publish (it generated target code the snapshot lacked)."""
        with self.lock:
            if self._private is None or misses <= self._published_misses:
                return
            self._published_misses = misses
            try:
                data = (self._private / _DATA).read_bytes()
            except OSError:
                return
            if not lmdb_whole(data):
                return
            if self._kept(data) and self._sharing is not None:
                self._sharing.offer(data)

    def _taken(self, sharing: SnapshotSharing) -> bytes | None:
        """The snapshot ``sharing`` offers, kept as this root's current one; None when there is
        none, or it is not a whole data file."""
        data = sharing.fetch()
        if data is None or not lmdb_whole(data):
            return None
        self._kept(data)
        return data

    def _kept(self, data: bytes) -> bool:
        """Keep ``data`` as the current snapshot; False (with a warning) when it cannot be."""
        name = f"{_digest(data)}.mdb"
        try:
            write_atomic(self.directory / name, data)
            write_atomic(self.directory / POINTER, name.encode())
        except OSError as exc:
            warnings.warn(
                f"slangspec could not keep the shader cache in {self.directory}: {exc}",
                CacheWarning,
                stacklevel=3,
            )
            return False
        self._remove_stale(keep={POINTER, name, self._pointer() or name})
        return True

    def _pointer(self) -> str | None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return (self.directory / POINTER).read_text(encoding="ascii").strip()
        return None

    def damaged(self) -> Path | None:
        """The file that makes the current snapshot unusable, or None when it is sound (or
        there is none)."""
        return self._read()[1]

    def discard(self) -> None:
        """Remove every snapshot; the next process starts an empty shader cache."""
        self._remove_stale(keep=set())

    def _current(self) -> bytes | None:
        """The newest snapshot; None when there is none, and with a warning when it is damaged
        (then it is removed)."""
        data, damaged = self._read()
        if damaged is not None:
            warnings.warn(
                f"slangpy shader cache {damaged} is damaged; starting an empty one",
                CacheWarning,
                stacklevel=4,
            )
            self.discard()
        return data

    def _read(self) -> tuple[bytes | None, Path | None]:
        """The newest snapshot checked against its name, or the file that failed."""
        for _ in range(3):
            path = self.directory / POINTER
            if not path.exists() and not path.is_symlink():
                return None, None
            name = self._pointer()
            if name is None or not _NAME.fullmatch(name):
                return None, path
            try:
                data = (self.directory / name).read_bytes()
            except FileNotFoundError:
                continue  # replaced by a newer snapshot meanwhile
            except OSError:
                return None, self.directory / name
            if _digest(data) != name[:-4] or not lmdb_whole(data):
                return None, self.directory / name
            return data, None
        return None, None

    def _remove_stale(self, keep: set[str]) -> None:
        with contextlib.suppress(FileNotFoundError):
            for path in self.directory.iterdir():
                if path.name in keep or path.name.startswith("."):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
