"""The files a cache hands the compiler and the device: where generated kernel sources lie,
slangpy's module and shader caches, and the files of modules given as
source strings. A cache that may not write hands out a private place for what would be written
(this process's alone, removed when it exits), and its own kernel sources to read."""

from __future__ import annotations

import threading
from pathlib import Path

from .disk import DiskTier
from .location import SHADERS, SLANG, part, private_root, shader_cache_bytes
from .module_seals import ModuleSeals
from .shader_snapshots import ShaderSnapshots

_snapshots: dict[Path, ShaderSnapshots] = {}
_snapshots_lock = threading.Lock()


class LocalFiles:
    """The files under one cache root (see the module's description)."""

    def __init__(self, disk: DiskTier) -> None:
        self._disk = disk
        self._written = disk if disk.writable else DiskTier(private_root())

    @property
    def kernel_dir(self) -> Path:
        """Where generated kernel sources lie, and where Slang is told they lie when it is given
        their text."""
        return self._disk.kernel_dir

    @property
    def module_cache(self) -> Path:
        """slangpy's module cache: compiled IR of slangpy's Slang library and of modules found
        on include paths."""
        return part(self._written.root, SLANG)

    @property
    def module_seals(self) -> ModuleSeals:
        """The seals that keep slangpy's module cache whole."""
        return ModuleSeals(self.module_cache)

    def shader_cache(self) -> ShaderSnapshots:
        """slangpy's shader cache, as this process uses it (one per root and process)."""
        path = part(self._written.root, SHADERS)
        with _snapshots_lock:
            snapshots = _snapshots.get(path)
            if snapshots is None:
                snapshots = _snapshots[path] = ShaderSnapshots(path, shader_cache_bytes())
            return snapshots

    def write_module(self, name: str, source: str) -> Path:
        """The file of a module given as a source string."""
        return self._written.write_module(name, source)

    def note_module_cache(self) -> None:
        """Count what a build left in slangpy's module cache into the cache's size."""
        self._written.note_module_cache()

    def layout_id(self) -> tuple[int, ...]:
        """Identifies what builds read from; it changes when a ``clear`` (in any process)
        replaces its directories, or an eviction or repair removes files, so that a build that
        failed meanwhile knows to try again."""
        ids = []
        for path in (self._disk.kernel_dir, self._written.root / SLANG):
            try:
                ids.append(path.stat().st_ino)
            except FileNotFoundError:
                ids.append(0)
        return (*ids, self._disk.removals())
