"""slangpy's module cache as a build uses it: sealed (``module_seals``), reached by Slang at a
path that is the same on every node (``slang_path``), and shared through the remote tier under a
fact for that path and the toolchain (``keys.module_cache_fact``): a node fetches what its
module cache lacks before Slang reads it, instead of compiling slangpy's Slang library again,
and publishes what Slang compiled for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .location import opened_beside, put_in_place, write_atomic
from .module_seals import ModuleSeals

if TYPE_CHECKING:
    from .remote import RemoteTier

_T = TypeVar("_T")

FIRST_SLOT = 900
"""The descriptor number ``slang_path`` holds a process's first module cache at."""
_ROOM_PROBE = FIRST_SLOT + 100
"""Above the slots: ``make_room_for_slots`` takes and closes a descriptor here."""
_PROC_FD = Path("/proc/self/fd")
_slots: dict[Path, int] = {}
_slots_lock = threading.Lock()
_room: threading.Thread | None = None


def make_room_for_slots() -> None:
    """Grow this process's descriptor table to hold ``slang_path``'s slots, on a thread of its
    own, once per process. The table grows when a descriptor past its end is taken, and in a
    process with several threads (torch starts some) the kernel waits out a grace period of
    10-20 ms before it replaces the old table: a first build would wait for that."""
    global _room
    with _slots_lock:
        if _room is not None or not _PROC_FD.is_dir():
            return
        _room = threading.Thread(target=_grow_table, name="slangspec-descriptors", daemon=True)
        _room.start()


def _grow_table() -> None:
    # F_DUPFD takes the lowest free number from the probe on, so it never closes a descriptor
    # in use, as dup2 onto a fixed number could.
    with contextlib.suppress(OSError):
        directory = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.close(fcntl.fcntl(directory, fcntl.F_DUPFD_CLOEXEC, _ROOM_PROBE))
        finally:
            os.close(directory)


def slang_path(module_cache: Path) -> Path:
    """The path Slang is given for the module cache at ``module_cache`` (created if missing).

    Slang takes a compiled module only under the path it was compiled under, and the cache root
    differs between nodes. So the directory is held open at a descriptor number fixed by the
    order a process meets module caches in (``FIRST_SLOT`` for the first), and Slang is given
    ``/proc/self/fd/<number>``: the same text on every node, this node's directory. A directory
    replaced since (a ``cache clear``) is opened again at its number. Where the system has no
    such paths, or the number cannot be held, the directory itself.
    """
    module_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _PROC_FD.is_dir():
        return module_cache
    real = module_cache.resolve()
    with _slots_lock:
        slot = _slots.get(real)
        if slot is None:
            slot = FIRST_SLOT + len(_slots)
            if _in_use(slot):
                return module_cache
        elif _holds(slot, real):
            return _PROC_FD / str(slot)
        try:
            opened = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.dup2(opened, slot, inheritable=False)
            finally:
                os.close(opened)
        except OSError:
            return module_cache
        _slots[real] = slot
        return _PROC_FD / str(slot)


def _in_use(slot: int) -> bool:
    try:
        fcntl.fcntl(slot, fcntl.F_GETFD)
    except OSError:
        return False
    return True


def _holds(slot: int, directory: Path) -> bool:
    """Whether descriptor ``slot`` is (still) the directory now at ``directory``."""
    try:
        held, now = os.fstat(slot), os.stat(directory)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


class ModuleCacheGuard:
    """The module cache at ``seals.root``, with the remote tier ``remote`` (None: local only)
    listing it under the fact ``fact`` (unused without one)."""

    def __init__(self, seals: ModuleSeals, remote: RemoteTier | None, fact: str) -> None:
        self.seals = seals
        self.remote = remote
        self.fact = fact

    @property
    def root(self) -> Path:
        return self.seals.root

    def slang_path(self) -> Path:
        """The path Slang is given for this module cache (see ``slang_path``)."""
        return slang_path(self.root)

    def check(self) -> None:
        """Before Slang reads the module cache: remove what is damaged, then fetch what the
        remote tier has that it lacks."""
        self.check_while(lambda: None)

    def check_while(self, meanwhile: Callable[[], _T]) -> _T:
        """``check``, with ``meanwhile`` run on this thread while the files fetched are written
        on another; what ``meanwhile`` returns. Opening slangpy's device holds the GIL for
        200 ms, a write of slangpy's 13 MB library does not: the one hides the other."""
        self.seals.remove_damaged()
        if self.remote is None:
            return meanwhile()
        fetched = self.remote.compiled_modules(self.fact, lambda p: not (self.root / p).exists())
        if not fetched:
            return meanwhile()
        # The largest first, its file opened here: the thread's first call is that write, under
        # way before ``meanwhile`` takes the GIL (an open on the thread could wait out the
        # device instead).
        files = sorted(fetched.items(), key=lambda item: -len(item[1]))
        try:
            first = opened_beside(self.root / files[0][0])
        except OSError:
            first = None  # compiled here instead
        writer = threading.Thread(
            target=_write, args=(first, files[0][1], files[1:], self.root), name="slangspec-modules"
        )
        writer.start()
        try:
            return meanwhile()
        finally:
            writer.join()
            self.seals.seal()

    def seal(self) -> None:
        """After loads: seal what Slang wrote, and publish it."""
        sealed = self.seals.seal()
        if self.remote is None or not self.remote.writable or not sealed:
            return
        modules = {}
        for path in sealed:
            with contextlib.suppress(OSError):
                modules[path.relative_to(self.root).as_posix()] = path.read_bytes()
        self.remote.share_compiled_modules(self.fact, modules)


def _write(
    first: tuple[int, Path, Path] | None, data: bytes, rest: list[tuple[str, bytes]], root: Path
) -> None:
    """Write ``data`` through ``first`` and put it in place, then ``rest`` under ``root``, each
    whole or not at all."""
    if first is not None:
        try:
            put_in_place(first, data)
        except OSError:  # compiled here instead
            with contextlib.suppress(OSError):
                first[1].unlink()
    for name, module in rest:
        with contextlib.suppress(OSError):
            write_atomic(root / name, module)
