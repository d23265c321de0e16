"""Policy: which entries a filter takes, what to evict when the cache outgrows its bound, and how
to verify and repair it. Functions handed what they need: a tier, a bound, a regenerator."""

from __future__ import annotations

import json
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields
from typing import Any, Protocol

from ..define import frozen
from . import travel
from .disk import DiskTier
from .entry import blobs_of, intact
from .keys import (
    are_compiled_modules,
    are_versions,
    blob_kind,
    entry_facts,
    is_shader_listing,
    key_of,
    source_name,
)
from .tier import Found, Unusable

Regenerate = Callable[[str, dict[str, Any], str], str]
"""``regenerate(plan_json, preimage, label)``: the kernel source a stored plan generates for a
label; ValueError when the plan is not a plan for the call the preimage keys."""
Replan = Callable[[list[dict[str, Any]], dict[str, Any]], str]
"""``replan(description, preimage)``: the plan (as JSON) type resolution makes for the call the
preimage keys, from the function's description (one per overload) as its module's functions
fact keeps it;
ValueError when the description does not decode or does not take that call."""


class Facts(Protocol):
    """Where a function's description is read, to check a plan against (a tier, a cache)."""

    def fact(self, name: str) -> dict[str, Any]: ...


class FactTier(Facts, Protocol):
    """What checking facts needs of a tier (the local disk and the remote tier are ones)."""

    def fact_names(self, prefix: str) -> list[str]: ...

    def delete_fact(self, name: str) -> None: ...


class CheckedTier(FactTier, Protocol):
    """What checking a far tier's entries needs of it (the remote tier and shipped kernels)."""

    def get(self, key: str) -> Found | Unusable | None: ...

    def delete(self, key: str) -> None: ...

    def entry_keys(self) -> list[str]: ...


@frozen
class EntryFilter:
    """Which entries an eviction or a listing takes: those matching every field given (ages in
    seconds, ``key`` by prefix). Damaged rows match every filter."""

    older_than: float | None = None
    unused_since: float | None = None
    module: str | None = None
    function: str | None = None
    key: str | None = None
    device: str | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def matches(self, key: str, row: dict[str, Any] | None, now: float) -> bool:
        if row is None:
            return True
        meta, pre = row["meta"], row["preimage"]
        return (
            (self.older_than is None or now - meta["created"] > self.older_than)
            and (self.unused_since is None or now - meta["last_used"] > self.unused_since)
            and (self.module is None or pre["module"] == self.module)
            and (self.function is None or pre["function"] == self.function)
            and (self.key is None or key.startswith(self.key))
            and (self.device is None or pre["device"]["kind"] == self.device)
        )


def rows(tier: DiskTier) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Every entry key with its row, or None where the row is not intact."""
    for key in tier.entry_keys():
        row = tier.row(key)
        yield key, (row if intact(row) else None)


def select(tier: DiskTier, where: EntryFilter) -> list[str]:
    """Keys of the entries ``where`` matches."""
    now = time.time()
    return [k for k, row in rows(tier) if where.matches(k, row, now)]


def _referenced(listed: Iterable[tuple[str, dict[str, Any] | None]]) -> Counter[str]:
    """How many of these entries refer to each blob."""
    refs: Counter[str] = Counter()
    for _, row in listed:
        if row:
            refs.update(blobs_of(row))
    return refs


def _orphans(tier: DiskTier) -> list[str]:
    """The blobs no entry refers to."""
    refs = _referenced(rows(tier))
    return sorted(name for name in tier.blob_names() if name not in refs)


def collect_garbage(tier: DiskTier) -> int:
    """Remove the blobs no entry refers to (with what was derived from them); bytes freed."""
    return tier.delete_many([], _orphans(tier))


def regenerated(entry: dict[str, Any], regenerate: Regenerate) -> tuple[dict[str, str], list[str]]:
    """The kernel sources an entry's plan generates, by label, and the labels whose stored
    kernel is not that source; ValueError when the plan is not one for the entry's call."""
    sources = {
        label: regenerate(entry["plan"], entry["preimage"], label) for label in entry["kernels"]
    }
    changed = [
        label for label, name in entry["kernels"].items() if source_name(sources[label]) != name
    ]
    return sources, changed


def plan_problem(
    tier: Facts,
    row: dict[str, Any],
    regenerate: Regenerate | None,
    replan: Replan | None,
) -> tuple[str | None, dict[str, str]]:
    """What is wrong with an entry's plan and kernel names, or None; and, given ``regenerate``,
    the kernel sources its plan generates by label. The names must be blob names, the plan one
    for the entry's call that generates the kernels it names, and (given ``replan``, where the
    tier describes the function) the very plan type resolution makes for that call."""
    try:
        travel.parts(row)
        travel.loaded(row["plan"])
        sources, changed = regenerated(row, regenerate) if regenerate else ({}, [])
    except (ValueError, TypeError) as exc:
        return f"plan does not fit its entry: {exc}", {}
    if changed:
        named = ", ".join(f"{row['kernels'][label]} ({label})" for label in changed)
        return f"kernel sources {named} are not what its plan generates", sources
    pre = row["preimage"]
    described = tier.fact(entry_facts(pre)[0]).get(pre["function"])
    if replan is None or not isinstance(described, list):
        return None, sources
    try:
        expected = replan(described, pre)
    except ValueError as exc:
        return f"its function's description does not resolve its call ({exc})", sources
    if json.loads(expected) != travel.loaded(row["plan"]):
        return "plan is not the one type resolution makes for its call", sources
    return None, sources


def proven(
    found: Found, facts: Facts, regenerate: Regenerate | None, replan: Replan | None
) -> Found | Unusable:
    """What can be proven here of an entry from a tier that does not prove what it holds (a
    server without a secret): its plan checked as ``plan_problem`` checks a local one (against
    what ``facts`` describe), its kernel sources the ones that plan generates here (given
    ``regenerate``: never the tier's text, whose names a forger can match), and none of its
    binaries, which nothing can regenerate to check."""
    row = {**found.row, "binaries": {}}
    why, sources = plan_problem(facts, row, regenerate, replan)
    if why is not None:
        return Unusable(why)
    if regenerate is not None:
        generated = {row["kernels"][label]: text.encode() for label, text in sources.items()}
        return Found(row, lambda: generated)
    named = set(row["kernels"].values())

    def fetched() -> dict[str, bytes] | None:
        blobs = found.blobs()
        return None if blobs is None else {n: blobs[n] for n in named}

    return Found(row, fetched)


def _fact_shape(name: str, value: dict[str, Any]) -> str | None:
    kind = name.split(":", 1)[0]
    if not value:
        return "it does not decode, or is not proven"
    if kind == "functions":
        ok = all(
            v is False or (isinstance(v, list) and v and all(isinstance(d, dict) for d in v))
            for v in value.values()
        )
    elif kind == "names":
        names_ = value.get("functions")
        ok = isinstance(names_, list) and all(isinstance(n, str) for n in names_)
    elif kind == "slangpy":
        ok = are_versions(value)
    elif kind == "modules":
        ok = are_compiled_modules(value)
    elif kind == "shaders":
        ok = is_shader_listing(value)
    else:
        return "it is not a fact slangspec keeps"
    return None if ok else "its value does not have its kind's shape"


def fact_problems(
    tier: FactTier, entries: Iterable[tuple[str, dict[str, Any] | None]], repair: bool
) -> list[dict[str, str]]:
    """The facts of ``tier`` that do not decode, do not have their kind's shape, or say a
    function is missing that an entry was built from; ``repair`` deletes them."""
    found = {}
    for name in tier.fact_names(""):
        why = _fact_shape(name, tier.fact(name))
        if why is not None:
            found[name] = why
    for key, row in entries:
        if row is None:
            continue
        pre = row["preimage"]
        name = entry_facts(pre)[0]
        if name not in found and tier.fact(name).get(pre["function"]) is False:
            found[name] = (
                f"it says module {pre['module']} has no function {pre['function']}, which "
                f"entry {key[:12]} was built from"
            )
    for name in found if repair else ():
        tier.delete_fact(name)
    return [{"key": "", "problem": f"fact {name[:40]}: {why}"} for name, why in found.items()]


def verify_entries(
    tier: CheckedTier,
    repair: bool = False,
    regenerate: Regenerate | None = None,
    replan: Replan | None = None,
) -> dict[str, Any]:
    """Check every entry of a far tier as a lookup would (the tier's own check of what it
    stores, then the key against the preimage and the blobs whole), its plan as a local one is
    checked (``plan_problem``), and every fact the tier notes (``fact_problems``); ``repair``
    removes what fails from the tier."""
    keys = tier.entry_keys()
    problems = []
    whole = []
    for key in keys:
        got = tier.get(key)
        if got is None or not got.usable:
            why = "its blobs are missing" if got is None else got.why
        elif key_of(got.row["preimage"]) != key:
            why = "its key is not the hash of its preimage"
        else:
            why = plan_problem(tier, got.row, regenerate, replan)[0]
            if why is None and got.blobs() is None:
                why = "a blob it names is missing or damaged"
        if why is None:
            whole.append((key, got.row))  # type: ignore[union-attr]
            continue
        problems.append({"key": key, "problem": why})
        if repair:
            tier.delete(key)
    facts = fact_problems(tier, whole, repair)
    return {
        "checked": len(keys),
        "problems": problems + facts,
        "repaired": (len(problems) + len(facts)) * repair,
    }


def evict(tier: DiskTier, keys: Iterable[str]) -> list[str]:
    """Delete these entries and whatever only they used. A process still running their
    kernels keeps them in memory and rebuilds any it needs later."""
    gone = list(keys)
    tier.delete_many(gone, [])
    collect_garbage(tier)
    return gone


LOW_WATER = 0.9
"""A cache over its bound is shrunk to this fraction of it, so the next builds fit without
evicting again."""
KERNEL_ROOM = 1 << 20
"""The room for kernels a workable bound keeps beside the rest of the cache: a kernel's
sources, cubins and target code take KiBs to a few hundred."""
MIB = 1 << 20


def workable_bound(beside: int) -> int:
    """The least size bound, in whole MiB, that holds ``beside`` bytes (what a cache holds
    beside its kernels) and ``KERNEL_ROOM`` once shrunk to ``LOW_WATER`` of it."""
    return math.ceil((beside + KERNEL_ROOM) / LOW_WATER / MIB) * MIB


def unreachable(tier: DiskTier, size: int) -> str | None:
    """Why no eviction shrinks ``tier`` to ``size`` bytes (it holds more than that beside its
    kernels), or None when evicting kernels can."""
    beside = tier.beside_kernels()
    if size >= beside:
        return None
    return (
        f"cannot shrink the cache at {tier.root} to {size / MIB:.1f} MiB: it holds "
        f"{beside / MIB:.1f} MiB beside its kernels (slangpy's compiled Slang library, the "
        "shader cache, the index), so evicting kernels cannot get it there and none was "
        f"evicted; give at least {math.ceil(beside / MIB)}M, or "
        f"{workable_bound(beside) // MIB}M to keep room for kernels"
    )


def enforce_bound(
    tier: DiskTier, bound: int, low_water: float = 1.0, keep_newest: bool = False
) -> list[str]:
    """Evict least-recently-used entries until the root fits in ``bound`` bytes, down to
    ``low_water`` of it; with ``keep_newest``, never the most recently used one. Nothing but
    entries and what only they use is removed: where the rest outgrows ``bound``, it is not
    reached.

    Reads the running size, so a cache within its bound costs a few ``stat`` calls; one over it
    reads every row once to choose what goes, and deletes in batches.
    """
    if tier.size() <= bound:
        return []
    target = int(bound * low_water)
    listed = list(rows(tier))
    refs = _referenced(listed)
    pending = deque(
        sorted(listed, key=lambda kr: (kr[1]["meta"]["last_used"] if kr[1] else 0.0, kr[0]))
    )
    if keep_newest and pending:
        pending.pop()
    evicted: list[str] = []
    while pending and (excess := tier.size() - target) > 0:
        keys: list[str] = []
        blobs: list[str] = []
        expected = 0
        while pending and expected < excess:
            key, row = pending.popleft()
            keys.append(key)
            for name in blobs_of(row) if row else ():
                refs[name] -= 1
                if refs[name] <= 0:
                    blobs.append(name)
                    expected += tier.blob_bytes(name)
        tier.delete_many(keys, blobs)
        evicted += keys
    return evicted


def verify(
    tier: DiskTier,
    repair: bool = False,
    regenerate: Regenerate | None = None,
    replan: Replan | None = None,
) -> dict[str, Any]:
    """Check every row, preimage, plan, kernel source, binary and fact; with ``repair``, drop
    what is damaged (a dropped binary is rebuilt from its source when next compiled). Given
    ``regenerate``, every kernel source must be what its plan generates (else the entry is
    dropped) and missing ones are rebuilt from the plan; given ``replan``, every plan must be
    the one its call resolves to (see ``plan_problem``). Ends by walking the tree to set the
    running size."""
    problems: list[dict[str, str]] = []
    repaired = 0
    checked = 0

    def problem(key: str, text: str, drop: bool) -> None:
        nonlocal repaired
        problems.append({"key": key, "problem": text})
        if repair and drop:
            tier.delete(key)
            repaired += 1

    listed = list(rows(tier))
    for k, row in listed:
        checked += 1
        if row is None:
            problem(k, "row checksum mismatch", True)
            continue
        if key_of(row["preimage"]) != k:
            problem(k, "key does not match its stored preimage", True)
            continue
        why, sources = plan_problem(tier, row, regenerate, replan)
        if why is not None:
            problem(k, why, True)
            continue
        for label, name in row["kernels"].items():
            if tier.read_blob(name) is not None:
                continue
            problem(k, f"kernel source {name} ({label}) missing or damaged", False)
            if repair:
                if label in sources:
                    tier.write_blob(name, sources[label].encode())
                else:
                    tier.delete(k)
                repaired += 1
        for label, binary in row.get("binaries", {}).items():
            if tier.read_blob(binary["file"]) is not None:
                continue
            problem(k, f"binary {binary['file']} ({label}) missing or damaged", False)
            if repair:
                tier.update(k, lambda r, label=label: r.get("binaries", {}).pop(label, None))
                repaired += 1
    for path in tier.damaged_modules():
        problems.append({"key": "", "problem": f"module copy {path} is damaged"})
        if repair:
            tier.delete_module(path)
            repaired += 1
    facts = fact_problems(tier, listed, repair)
    problems += facts
    repaired += len(facts) * repair
    orphans = _orphans(tier)
    for name in orphans:
        what = "kernel source" if blob_kind(name) == "source" else "binary"
        problems.append({"key": "", "problem": f"{what} {name} is referenced by no entry"})
    if repair and orphans:
        tier.delete_many([], orphans)
        repaired += len(orphans)
    tier.resync()
    return {"checked": checked, "problems": problems, "repaired": repaired}
