"""slangpy's module cache, sealed.

Slang keeps compiled IR there (slangpy's Slang library, and modules found on include paths) and
trusts what it reads back: a truncated file is compiled again, but some damage inside one makes
Slang abort the process. So each ``.slang-module`` file gets a seal beside it, once a load that
may have written it has succeeded: its size, modification time, inode and content hash. Before
Slang reads the cache, a file whose content no longer matches its seal is removed, with a
warning, and Slang compiles it again. A file without a seal (written before seals were kept, or
by a process killed before it sealed) is trusted as Slang trusts it, and sealed after the next
load. slangpy writes a compiled module to a file of its own and renames it into place, so a
sealed file with another inode was written again whole, and is sealed again; one whose inode
is the same but whose size or time changed was written over in place, which slangpy never does,
and is left for the check to remove.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import warnings
from pathlib import Path

import xxhash

from .location import COMPILED_MODULE, CacheWarning, present, write_atomic

SEAL = ".seal"

_checked: dict[Path, tuple[list[int], str]] = {}
"""Files this process found matching their seal, with their stamp and hash then: checked
again only when their stamp or seal changed (slangpy's library is 13 MB, in every session's
directory)."""


def _digest(path: Path) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


INODE = 2
"""Where a stamp holds the file's inode."""


class ModuleSeals:
    """The seals of the module cache at ``root`` (see the module's description)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _modules(self) -> list[Path]:
        """The compiled modules, wherever slangpy keeps them (``location.COMPILED_MODULE``)."""
        return sorted(present(self.root, COMPILED_MODULE.format(name="*")))

    @staticmethod
    def _seal_of(module: Path) -> Path:
        return module.with_name(module.name + SEAL)

    def _read_seal(self, module: Path) -> dict | None:
        """The seal of ``module``; None when it has none. A seal that does not decode seals
        nothing the file can match."""
        try:
            seal = json.loads(self._seal_of(module).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return seal if isinstance(seal, dict) else {}

    def damaged(self) -> list[Path]:
        """The sealed files whose content does not match their seal, and whatever is at a
        compiled module's place that is not a file, sealed or not."""
        found = []
        for module in self._modules():
            try:
                now = module.stat()
            except FileNotFoundError:  # removed meanwhile: nothing left to read
                continue
            if not stat.S_ISREG(now.st_mode):
                found.append(module)
                continue
            seal = self._read_seal(module)
            if seal is None:
                continue
            stamp = _stamp(now)
            if _checked.get(module) == (stamp, seal.get("xxh3_128")):
                continue
            try:
                digest = _digest(module)
            except FileNotFoundError:
                continue
            except OSError:  # unreadable: Slang could not read it either
                found.append(module)
                continue
            if seal.get("xxh3_128") == digest:
                _checked[module] = (stamp, digest)
            else:
                found.append(module)
        return found

    def remove_damaged(self) -> list[Path]:
        """Remove each damaged file and its seal, with a warning, so that Slang compiles it
        again instead of reading it; the files removed."""
        removed = self.damaged()
        self.discard(removed)
        for module in removed:
            warnings.warn(
                f"slangspec removed {module}: it no longer matches what Slang wrote there;"
                " Slang compiles it again",
                CacheWarning,
                stacklevel=2,
            )
        return removed

    def discard(self, modules: list[Path]) -> None:
        """Remove these files and their seals, as far as this process may."""
        for module in modules:
            for path in (module, self._seal_of(module)):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                with contextlib.suppress(OSError):
                    path.unlink()

    def seal(self) -> list[Path]:
        """Seal every file that has no seal, or that was replaced whole since it was sealed
        (slangpy wrote it again); the files sealed now."""
        sealed = []
        for module in self._modules():
            try:
                now = module.stat()
                if not stat.S_ISREG(now.st_mode):  # damage: the next check removes it
                    continue
                before = _stamp(now)
                seal = self._read_seal(module)
                if seal is not None and not _replaced(seal.get("stamp"), before):
                    continue
                digest = _digest(module)
                if _stamp(module.stat()) != before:  # being written: sealed once it settles
                    continue
            except OSError:  # removed meanwhile, or unreadable: left unsealed
                continue
            data = json.dumps({"stamp": before, "xxh3_128": digest}).encode()
            try:
                write_atomic(self._seal_of(module), data)
            except OSError:  # a read-only or full disk: left unsealed
                continue
            sealed.append(module)
        return sealed


def _replaced(sealed: object, now: list[int]) -> bool:
    """Whether a sealed file with stamp ``sealed`` is now another file (``now``): written again
    whole and renamed into place, not written over in place."""
    if not isinstance(sealed, list) or len(sealed) != len(now):
        return True  # a seal that does not decode: the check removes what it seals
    return sealed[INODE] != now[INODE]
