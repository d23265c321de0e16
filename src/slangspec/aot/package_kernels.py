"""Kernels for a package to ship: the entries of a cache written as a directory of package data,
which ``slangspec.load(..., shipped=DIR)`` serves read-only (see ``cache_store.shipped``).

Each export adds to what the directory already holds, so one package can carry kernels built for
several GPUs or toolchains, exported on each. With every entry go the facts a fresh process
would otherwise start Slang or import slangpy for: which functions its module has and how they
are described, and which versions this slangpy wheel is (under the stamp that is the same
wherever the wheel is installed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..cache_store import (
    CacheStore,
    EntryFilter,
    blobs_of,
    entry_facts,
    select,
    shipped,
    travel,
    write_atomic,
)
from ..compile import find_install, slangpy_versions, wheel_stamp

PACKAGE_DATA = 0o644
"""The mode of the files written: every user who installs the package reads them."""


def _existing(directory: Path) -> dict[str, Any]:
    """What ``directory`` already ships; ValueError when it holds something else."""
    if not directory.exists():
        return {"entries": {}, "facts": {}}
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    if not (directory / shipped.INDEX).exists():
        if any(directory.iterdir()):
            raise ValueError(
                f"{directory} is not empty and holds no shipped kernels; export into a new "
                "directory"
            )
        return {"entries": {}, "facts": {}}
    try:
        return shipped.read_index(directory)
    except ValueError as exc:
        raise ValueError(f"{directory}: {exc}") from None


def export_for_package(
    cache: CacheStore, directory: str | os.PathLike[str], where: EntryFilter | None = None
) -> dict[str, int]:
    """Add the whole entries of ``cache`` that ``where`` matches (all by default) to the
    shipped directory ``directory``, with their binaries and facts; returns counts."""
    directory = Path(directory)
    index = _existing(directory)
    entries: dict[str, Any] = index["entries"]
    facts: dict[str, Any] = index["facts"]
    wanted = set(select(cache.disk, where)) if where else None
    added = 0
    blobs: dict[str, bytes] = {}
    for key, row in cache.rows():
        if row is None or (wanted is not None and key not in wanted):
            continue
        entry = travel.shared(row)
        for label, b in list(entry["binaries"].items()):
            data = cache.read_blob(b["file"])
            if data is None:
                del entry["binaries"][label]
                continue
            blobs[b["file"]] = data
        entries[key] = entry
        added += 1
        for name in entry_facts(entry["preimage"]):
            known = cache.disk.fact(name)
            if known:
                facts[name] = {**facts.get(name, {}), **known}
    if not added:
        return {"entries": 0, "binaries": 0, "shipped": len(entries)}
    install = find_install()
    stamp = None if install is None else wheel_stamp(install)
    if stamp is not None:
        facts["slangpy:" + stamp] = slangpy_versions(cache)
    (directory / shipped.BLOBS).mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    os.chmod(directory / shipped.BLOBS, 0o755)
    for name, data in blobs.items():
        write_atomic(directory / shipped.BLOBS / name, data, PACKAGE_DATA)
    named = set().union(*(blobs_of(e) for e in entries.values())) if entries else set()
    for stale in (directory / shipped.BLOBS).iterdir():
        if stale.name not in named:
            stale.unlink()
    index = {
        "format": shipped.SHIPPED_FORMAT,
        "version": shipped.SHIPPED_VERSION,
        "entries": entries,
        "facts": facts,
    }
    text = json.dumps(index, indent=1, sort_keys=True)
    write_atomic(directory / shipped.INDEX, text.encode(), PACKAGE_DATA)
    # Blobs, as a bundle counts them: kernels built together share one.
    return {"entries": added, "binaries": len(blobs), "shipped": len(entries)}
