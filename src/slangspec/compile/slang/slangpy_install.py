"""Which slangpy (and which Slang inside it) this process would compile with, known without
importing it.

Cache keys cover slangpy's version and its Slang build tag. Importing slangpy to read them takes
time a process whose kernels are all cached has no other reason to spend, and a CUDA process
never imports it: one that must read them takes slangpy's from its metadata and Slang's from the
library. Either notes both against a stamp of its install: the package's path and the size and
modification time of each native library in it. A later process finds the package on
``sys.path`` as ``import slangpy`` would, stamps it the same way, and reads the versions back.

A wheel install also has a stamp that is the same wherever that wheel is installed: the SHA-256
its RECORD lists for each of its native libraries (Python extension modules aside, so that one
slangpy release's wheels for several Pythons may share it). Kernels shipped in a package note
the versions under it, so a fresh environment running them needs slangpy no more than a warm
one. The local stamp is asked first: a library rebuilt in place changes it at once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Protocol

import xxhash

from ...cache_store import are_versions

Versions = dict[str, str]


class VersionMemo(Protocol):
    """Where a stamp's versions are kept between processes (the cache's facts)."""

    def fact(self, name: str, wanted: str | None = None) -> dict[str, Any]: ...

    def note_fact(self, name: str, value: dict[str, Any]) -> None: ...


def _noted(memo: VersionMemo, stamp: str | None) -> Versions | None:
    if stamp is None:
        return None
    known = memo.fact("slangpy:" + stamp, "slangpy")
    return known if are_versions(known) else None


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


def _extension(name: str) -> bool:
    return ".cpython-" in name or ".abi3." in name or name.endswith(".pyd")


def wheel_stamp(directory: Path) -> str | None:
    """The stamp of the slangpy wheel installed at ``directory``, from its RECORD's hashes of
    the native libraries there; None when any of them is not listed with a hash and its size
    (an editable or hand-built install)."""
    with os.scandir(directory) as entries:
        present = {
            f"{directory.name}/{e.name}"
            for e in entries
            if _native(e.name) and not _extension(e.name) and e.is_file()
        }
    for info in sorted(directory.parent.glob(f"{directory.name}-*.dist-info")):
        listed = {}
        try:
            lines = (info / "RECORD").read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            path, _, rest = line.partition(",")
            digest, _, size = rest.partition(",")
            if path in present and digest.startswith("sha256=") and size.isdigit():
                listed[path] = digest
        if present and listed.keys() == present:
            described = json.dumps(["wheel", info.name, sorted(listed.items())])
            return "wheel:" + xxhash.xxh3_128_hexdigest(described.encode())
    return None


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


def _read(directory: Path) -> Versions | None:
    """The versions of the install at ``directory`` without importing it: slangpy's from its
    metadata, Slang's build tag from the Slang library it bundles (what ``import slangpy``
    reports, the same strings); None when either cannot be read."""
    from .api import SlangLibraryError, build_tag

    for info in sorted(directory.parent.glob(f"{directory.name}-*.dist-info")):
        try:
            metadata = (info / "METADATA").read_text(errors="replace")
        except OSError:
            continue
        version = next(
            (line[9:].strip() for line in metadata.splitlines() if line.startswith("Version: ")),
            None,
        )
        if version is None:
            continue
        try:
            return {"slangpy": version, "slang": build_tag()}
        except (OSError, SlangLibraryError):
            return None
    return None


def slangpy_versions(memo: VersionMemo | None) -> Versions:
    """slangpy's version and Slang build tag: from ``memo`` when it knows this install, else
    read from the install (``_read``), else from slangpy itself; then noted in ``memo``."""
    directory = find_install() if sys.modules.get("slangpy") is None else None
    if memo is not None and directory is not None:
        known = _noted(memo, install_stamp(directory)) or _noted(memo, wheel_stamp(directory))
        if known is not None:
            return known
    versions = None if directory is None else _read(directory)
    if versions is None or directory is None:
        try:
            versions, directory = _imported()
        except ImportError as exc:
            raise ImportError(
                f"slangspec needs slangpy's version for its cache keys, and slangpy cannot be "
                f"imported ({exc}); a process that can import it notes the version in the cache"
            ) from exc
    if memo is not None:
        for stamp in (install_stamp(directory), wheel_stamp(directory)):
            if stamp is not None and _noted(memo, stamp) != versions:
                memo.note_fact("slangpy:" + stamp, versions)
    return versions
