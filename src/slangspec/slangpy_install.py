"""Which slangpy (and which Slang inside it) this process would compile with, known without
importing it.

Cache keys cover slangpy's version and its Slang build tag. Importing slangpy to read them takes
time a process whose kernels are all cached has no other reason to spend. A process that
imported slangpy notes both against a stamp of its install: the package's path and the size and
modification time of each native library in it. A later process finds the package on
``sys.path`` as ``import slangpy`` would, stamps it the same way, and reads the versions back.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Protocol

import xxhash

Versions = dict[str, str]


class VersionMemo(Protocol):
    """Where a stamp's versions are kept between processes (the cache's facts)."""

    def fact(self, name: str, wanted: str | None = None) -> dict[str, Any]: ...

    def note_fact(self, name: str, value: dict[str, Any]) -> None: ...


def _noted(memo: VersionMemo, stamp: str) -> Versions | None:
    known = memo.fact("slangpy:" + stamp, "slangpy")
    if set(known) != {"slangpy", "slang"} or not all(isinstance(v, str) for v in known.values()):
        return None
    return known


def _native(name: str) -> bool:
    return ".so" in name or name.endswith((".pyd", ".dll", ".dylib"))


def install_stamp(directory: Path) -> str:
    """A stamp of the slangpy package at ``directory``; any reinstall or rebuild changes it."""
    libraries = []
    with os.scandir(directory) as entries:
        for e in entries:
            if _native(e.name) and e.is_file():
                st = e.stat()
                libraries.append((e.name, st.st_size, st.st_mtime_ns))
    described = json.dumps([str(directory), sorted(libraries)])
    return xxhash.xxh3_128_hexdigest(described.encode())


def find_install() -> Path | None:
    """The slangpy package directory that ``import slangpy`` would load, found without
    importing it; None when it is not a plain package on ``sys.path``."""
    for entry in sys.path:
        candidate = Path(entry or os.curdir) / "slangpy"
        if (candidate / "__init__.py").is_file():
            return candidate.resolve()
    return None


def _imported() -> tuple[Versions, Path]:
    import slangpy as spy

    versions = {"slangpy": spy.SGL_VERSION, "slang": spy.SLANG_BUILD_TAG}
    return versions, Path(spy.__file__).parent.resolve()


def slangpy_versions(memo: VersionMemo | None) -> Versions:
    """slangpy's version and Slang build tag: from ``memo`` when it knows this install, else
    from slangpy itself (and then noted in ``memo``)."""
    if memo is not None and sys.modules.get("slangpy") is None:
        directory = find_install()
        if directory is not None:
            known = _noted(memo, install_stamp(directory))
            if known is not None:
                return known
    try:
        versions, directory = _imported()
    except ImportError as exc:
        raise ImportError(
            f"slangspec needs slangpy's version for its cache keys, and slangpy cannot be "
            f"imported ({exc}); a process that can import it notes the version in the cache"
        ) from exc
    if memo is not None:
        stamp = install_stamp(directory)
        if _noted(memo, stamp) != versions:
            memo.note_fact("slangpy:" + stamp, versions)
    return versions
