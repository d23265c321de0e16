"""Policy: what to evict when the cache outgrows its bound, and how to verify and repair it."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable
from typing import Any

from ..codegen import backward_source, forward_source
from ..specializer.plan import SpecializationPlan
from .location import INDEX, PARTS, SHADERS, SLANG, tree_size
from .preimage import key_of
from .store import Store, source_name


def sizes(store: Store) -> dict[str, int]:
    """Bytes per part of the layout."""
    return {name: tree_size(store.root / name) for name in PARTS}


def _referenced(store: Store) -> set[str]:
    """Names of every source and binary some entry uses."""
    names = set()
    for _, row in store.rows():
        if row:
            names.update(row["kernels"].values())
            names.update(b["file"] for b in row.get("binaries", {}).values())
    return names


def collect_garbage(store: Store) -> int:
    """Remove kernel sources and binaries no entry references, with the sources' compiled
    modules; bytes freed."""
    keep = _referenced(store)
    freed = 0
    for path in store.binary_dir.glob("b_*.cubin"):
        if path.stem not in keep:
            freed += path.stat().st_size
            path.unlink(missing_ok=True)
    for path in store.kernel_dir.glob("k_*.slang"):
        name = path.stem
        if name in keep:
            continue
        freed += path.stat().st_size
        path.unlink(missing_ok=True)
        for compiled in (store.root / SLANG).glob(f"*/*/{name}.slang-module"):
            freed += compiled.stat().st_size
            compiled.unlink(missing_ok=True)
    return freed


def evict(store: Store, keys: Iterable[str]) -> list[str]:
    """Delete these entries and whatever only they used. A process still running their
    kernels keeps them in memory and rebuilds any it needs later."""
    gone = []
    for key in keys:
        store.delete(key)
        gone.append(key)
    collect_garbage(store)
    return gone


def select(
    store: Store,
    *,
    older_than: float | None = None,
    unused_since: float | None = None,
    module: str | None = None,
    function: str | None = None,
    key: str | None = None,
    device: str | None = None,
) -> list[str]:
    """Keys of entries matching every given filter (ages in seconds, key by prefix)."""
    now = time.time()
    chosen = []
    for k, row in store.rows():
        if row is None:
            chosen.append(k)  # damaged rows always go
            continue
        meta, pre = row["meta"], row["preimage"]
        if (
            (older_than is None or now - meta["created"] > older_than)
            and (unused_since is None or now - meta["last_used"] > unused_since)
            and (module is None or pre["module"] == module)
            and (function is None or pre["function"] == function)
            and (key is None or k.startswith(key))
            and (device is None or pre["device"]["kind"] == device)
        ):
            chosen.append(k)
    return chosen


def enforce_bound(store: Store, bound: int) -> list[str]:
    """Evict least-recently-used entries until the cache fits in ``bound`` bytes."""
    total = sum(sizes(store).values())
    if total <= bound:
        return []
    by_age = sorted(
        ((row["meta"]["last_used"] if row else 0.0, k) for k, row in store.rows()),
    )
    evicted = []
    index = tree_size(store.root / INDEX)
    for _, k in by_age:
        store.delete(k)
        evicted.append(k)
        # Only the index (its log grows on delete) and what collection frees change, so the
        # total stays exact without walking every part again.
        grown = tree_size(store.root / INDEX) - index
        index += grown
        total += grown - collect_garbage(store)
        if total <= bound:
            return evicted
    # Every entry is gone and slangpy's own caches still do not fit: they are rebuilt on use.
    for name in (SLANG, SHADERS):
        shutil.rmtree(store.root / name, ignore_errors=True)
    return evicted


def verify(store: Store, repair: bool = False) -> dict[str, Any]:
    """Check every row, preimage, plan, kernel source and binary; with ``repair``, drop what is
    damaged (a dropped binary is rebuilt from its source when next compiled) and regenerate
    missing sources from their plans."""
    problems: list[dict[str, str]] = []
    repaired = 0
    checked = 0
    for k, row in list(store.rows()):
        checked += 1
        if row is None:
            problems.append({"key": k, "problem": "row checksum mismatch"})
            if repair:
                store.delete(k)
                repaired += 1
            continue
        if key_of(row["preimage"]) != k:
            problems.append({"key": k, "problem": "key does not match its stored preimage"})
            if repair:
                store.delete(k)
                repaired += 1
            continue
        try:
            plan = SpecializationPlan.from_json(row["plan"])
        except (ValueError, TypeError, KeyError, json.JSONDecodeError) as exc:
            problems.append({"key": k, "problem": f"plan does not parse: {exc}"})
            if repair:
                store.delete(k)
                repaired += 1
            continue
        for mask, name in row["kernels"].items():
            if store.source_ok(name):
                continue
            problems.append(
                {"key": k, "problem": f"kernel source {name} ({mask}) missing or damaged"}
            )
            if repair:
                source = forward_source(plan) if mask == "forward" else backward_source(plan, mask)
                if source_name(source) == name:
                    store.write_source(source)
                else:
                    store.delete(k)
                repaired += 1
        for label, binary in row.get("binaries", {}).items():
            if store.read_binary(binary["file"]) is not None:
                continue
            problems.append(
                {"key": k, "problem": f"binary {binary['file']} ({label}) missing or damaged"}
            )
            if repair:
                store.drop_binary(k, label)
                repaired += 1
    files = [*store.kernel_dir.glob("k_*.slang"), *store.binary_dir.glob("b_*.cubin")]
    orphans = {p.stem for p in files} - _referenced(store)
    for name in sorted(orphans):
        what = "kernel source" if name.startswith("k_") else "binary"
        problems.append({"key": "", "problem": f"{what} {name} is referenced by no entry"})
    if repair and orphans:
        collect_garbage(store)
        repaired += len(orphans)
    return {"checked": checked, "problems": problems, "repaired": repaired}
