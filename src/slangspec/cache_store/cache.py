"""``CacheStore``: the cache beside the pipeline. The runtime reads and fills it; people inspect,
bound, evict and verify it. It walks its tiers nearest first (the local disk, then a shared
server when one is configured); its files and leases are objects of their own, so the compiler
and the device are handed paths and never see the cache root."""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..define import frozen
from .disk import HITS, MISSES, DiskTier
from .entry import Change, Entry, blobs_of, intact
from .files import LocalFiles
from .keys import BlobKind, blob_name, module_cache_fact, shader_cache_fact
from .leases import Leases
from .location import (
    LEGACY_SCRATCH,
    PARTS,
    CacheWarning,
    cache_root,
    private_root,
    root_problem,
    size_bound,
)
from .module_cache import ModuleCacheGuard, slang_path
from .remote_config import RemoteSettings, remote_settings
from .shader_snapshots import ShaderSnapshots
from .tier import Found, Tier, Unusable

if TYPE_CHECKING:
    from .policy import EntryFilter, Regenerate, Replan
    from .remote import RemoteTier


class CacheStore:
    """A slangspec cache directory (``path``, else ``SLANGSPEC_CACHE_DIR``, else the user cache),
    with the kernels a package ships in ``shipped`` behind it, then the shared tier ``remote``,
    when given; with ``read_only``, a view of them all that writes nothing anywhere."""

    regenerate: Regenerate | None = None
    """How ``verify(repair=True)`` rebuilds a missing kernel source from its plan; without one,
    an entry with a missing source is dropped instead."""
    replan: Replan | None = None
    """How ``verify`` makes the plan for an entry's call from its function's description, to
    compare with the stored one; without one, plans are checked only against their kernels."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        remote: RemoteSettings | None = None,
        *,
        read_only: bool = False,
        shipped: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = cache_root(path)
        self.read_only = read_only
        if remote is not None and read_only:
            remote = dataclasses.replace(remote, read_only=True)
        self._remote = None if remote is None else _remote_tier(remote)
        """The shared tier, which also shares slangpy's module cache (``module_cache_guard``)."""
        self._far: tuple[Tier, ...] = (
            *(() if shipped is None else (_shipped_tier(Path(shipped), self.regenerate),)),
            *(() if self._remote is None else (self._remote,)),
        )
        self._open()

    def _open(self) -> None:
        self.disk = DiskTier(self.root, writable=not self.read_only)
        self.tiers: tuple[Tier, ...] = (self.disk, *self._far)
        """Nearest first; an entry is served from the first tier that has a servable one."""
        self.files = LocalFiles(self.disk)
        self.leases = Leases(self.tiers)

    @classmethod
    def for_running(
        cls,
        path: str | os.PathLike[str] | None = None,
        remote: str | None = None,
        *,
        read_only: bool = False,
        shipped: str | os.PathLike[str] | None = None,
        remote_trust_all: bool | None = None,
    ) -> CacheStore:
        """The cache a process runs kernels from: the one at ``path`` when it is safe to (a
        directory of this user that no one else can write), else, with a warning, a private
        cache of this process alone; behind it the remote tier at ``remote``, else at
        ``SLANGSPEC_REMOTE``, when either is set (without ``SLANGSPEC_REMOTE_SECRET``, only
        given ``remote_trust_all``, else ``SLANGSPEC_REMOTE_TRUST_ALL``); between them, the
        kernels shipped in ``shipped``, when given."""
        settings = remote_settings(remote, remote_trust_all)
        root = cache_root(path)
        problem = root_problem(root)
        if problem is None:
            return cls(root, settings, read_only=read_only, shipped=shipped)
        warnings.warn(
            f"slangspec cache {root} is not used: {problem}; this process keeps a private cache",
            CacheWarning,
            stacklevel=3,
        )
        return cls(private_root(), settings, read_only=read_only, shipped=shipped)

    def __repr__(self) -> str:
        return f"<slangspec.Cache {self.root}>"

    def module_cache_guard(self, toolchain: dict[str, Any]) -> ModuleCacheGuard:
        """slangpy's module cache under this root, sealed and shared (``module_cache``) for
        builds with ``toolchain``: through a remote tier that proves what it holds, since
        nothing can check a compiled module against what it was compiled from."""
        remote = self._remote if self._remote is not None and self._remote.proven else None
        if remote is None:  # the fact names Slang's path to it, which takes a descriptor slot
            return ModuleCacheGuard(self.files.module_seals, None, "")
        fact = module_cache_fact(str(slang_path(self.files.module_cache)), toolchain)
        return ModuleCacheGuard(self.files.module_seals, remote, fact)

    def shader_cache(self, toolchain: dict[str, Any]) -> ShaderSnapshots:
        """slangpy's shader cache under this root (``files.shader_cache``), its snapshots shared
        for ``toolchain`` through a remote tier that proves what it holds, since nothing can
        check target code or a pipeline against what it was built from."""
        snapshots = self.files.shader_cache()
        if self._remote is not None and self._remote.proven:
            snapshots.share_through(_RemoteSnapshots(self._remote, shader_cache_fact(toolchain)))
        return snapshots

    # -- entries, through the tiers ------------------------------------------------------------

    def lookup(self, key: str, preimage: dict[str, Any], label: str | None = None) -> Entry | None:
        """The entry for ``key`` built from exactly ``preimage``, from the nearest tier that has
        one (with ``label``, the nearest whose entry has that kernel, if any does); reading
        only: nothing is dropped, fetched into a nearer tier or evicted."""
        found = self._walk(key, preimage, label, repair=False)
        return None if found is None else Entry(key, found[1].row, far=found[0] > 0)

    def serve(self, key: str, preimage: dict[str, Any], label: str | None = None) -> Entry | None:
        """``lookup`` for a build: a local entry that may not be served is dropped, with a
        warning; a far tier's entry is checked, installed in the nearer tiers (merged with the
        kernels a local one has) and counted against the size bound."""
        found = self._walk(key, preimage, label, repair=True)
        if found is None:
            return None
        at, got = found
        if at == 0:
            return Entry(key, got.row)
        blobs = got.blobs()
        if blobs is None:
            return None
        from . import travel

        row = travel.installed(got.row, self.disk.row(key))
        for tier in self.tiers[:at]:
            tier.put(key, row, blobs)
        self.enforce_bound()  # what came from afar counts against this cache's bound
        return Entry(key, row)

    def _walk(
        self, key: str, preimage: dict[str, Any], label: str | None, repair: bool
    ) -> tuple[int, Found] | None:
        nearest: tuple[int, Found] | None = None
        for at, tier in enumerate(self.tiers):
            got = tier.get(key)
            if got is None:
                continue
            warned = tier.shared and not got.usable  # a shared tier warns itself
            if got.usable:
                got = self._servable(tier, got, preimage)
            if not got.usable:
                # What a shared tier holds is published over once this process built it; a
                # read-only one keeps what it holds.
                kept = tier.shared or not tier.writable
                if repair and not warned:
                    done = "not used" if kept else "dropped"
                    message = f"slangspec cache entry {key[:12]} {done}: {got.why}; rebuilding"
                    warnings.warn(message, CacheWarning, stacklevel=3)
                if repair and not kept:
                    tier.delete(key)
                continue
            if label is None or label in got.row["kernels"]:
                return at, got
            nearest = nearest or (at, got)
        return nearest

    def _servable(self, tier: Tier, got: Found, preimage: dict[str, Any]) -> Found | Unusable:
        """What of ``tier``'s entry ``got`` this process may serve for ``preimage``, and so
        install in nearer tiers: all of it from a tier that proves what it holds, else what
        this process can prove itself (``policy.proven``)."""
        if got.row["preimage"] != preimage:
            # Another format version, a collision or a damaged key: never serve it.
            return Unusable("its stored preimage differs from the requested one")
        if tier.proven:
            return got
        from .policy import proven

        return proven(got, self, self.regenerate, self.replan)

    def insert(
        self,
        key: str,
        preimage: dict[str, Any],
        plan_json: str,
        kernels: dict[str, str],
        meta: dict[str, Any] | None = None,
        binaries: dict[str, dict[str, Any]] | None = None,
    ) -> Entry:
        """Store a new local entry (its kernel sources and ``binaries``' files already
        written)."""
        now = time.time()
        meta = {"created": now, "last_used": now, "hits": 0, **(meta or {})}
        row = {"preimage": preimage, "plan": plan_json, "kernels": kernels, "meta": meta}
        if binaries:
            row["binaries"] = binaries
        self.disk.put(key, row, {})
        return Entry(key, row)

    def publish(self, key: str) -> None:
        """Share the whole local entry ``key`` and its blobs through the farther tiers."""
        farther = [tier for tier in self.tiers[1:] if tier.writable]
        found = self.disk.get(key) if farther else None
        if found is None or not found.usable:
            return
        blobs = found.blobs()
        if blobs is None:
            return
        for tier in farther:
            tier.put(key, found.row, blobs)

    def amend(self, key: str, change: Change) -> None:
        """Apply ``change`` (see ``entry``: a kernel or binary added, a binary dropped) to the
        local entry ``key``, atomically; nothing when it is no longer whole."""
        self.disk.update(key, change)

    def touch(self, key: str) -> None:
        """Count a hit and mark the entry used now (for LRU eviction)."""

        def change(row: dict[str, Any]) -> None:
            row["meta"]["hits"] += 1
            row["meta"]["last_used"] = time.time()

        self.disk.update(key, change)
        self.disk.count(HITS)

    def count_miss(self) -> None:
        self.disk.count(MISSES)

    # -- facts and records ---------------------------------------------------------------------

    def fact(self, name: str, wanted: str | None = None) -> dict[str, Any]:
        """The fact ``name`` (which functions a module's content has, which versions a slangpy
        install is). Farther tiers are asked when the nearer ones lack the item ``wanted`` (or,
        without one, always), and what they add is noted in the nearer ones: a warm process with
        a local answer never waits on a server."""
        known: dict[str, Any] = {}
        for at, tier in enumerate(self.tiers):
            if at and wanted is not None and wanted in known:
                break
            added = {k: v for k, v in tier.fact(name).items() if k not in known}
            if added and at and tier.proven:
                # What an unproven tier says is used, never kept: a server without a secret
                # cannot poison a local cache for good.
                for nearer in self.tiers[:at]:
                    nearer.note_fact(name, added)
            known.update(added)
        return known

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        """Add ``value``'s items to the fact ``name``, in every tier."""
        for tier in self.tiers:
            tier.note_fact(name, value)

    def record(self, record: dict[str, Any]) -> None:
        """Keep a record of a specialization the JIT built, for replay elsewhere."""
        self.disk.record(record)

    def records(self) -> list[dict[str, Any]]:
        return self.disk.records()

    # -- local blobs ---------------------------------------------------------------------------

    def write_blob(self, kind: BlobKind, data: str | bytes) -> str:
        """Store a kernel source (text) or a compiled binary; returns its name (for a source,
        the module name Slang imports it by)."""
        raw = data.encode() if isinstance(data, str) else data
        name = blob_name(kind, raw)
        self.disk.write_blob(name, raw)
        return name

    def read_blob(self, name: str) -> bytes | None:
        """A blob's bytes, or None when it is missing or damaged."""
        return self.disk.read_blob(name)

    def names(self, key: str, name: str) -> bool:
        """Whether the local entry at ``key`` still names the blob ``name``; False once another
        process evicted or replaced it."""
        row = self.disk.row(key)
        return intact(row) and name in blobs_of(row)

    # -- the size bound, inspection and management ---------------------------------------------

    def enforce_bound(self) -> threading.Thread | None:
        """Keep the cache within ``SLANGSPEC_CACHE_SIZE`` (see ``shrinking``: never by evicting
        slangpy's compiled library or the entry used last, with a warning once a process when
        the bound is too small for them); the thread that shrinks it, if it is over."""
        bound = size_bound()
        if self.read_only or self.disk.size() <= bound:
            return None
        from .shrinking import shrink

        return shrink(self.disk, bound)

    def rows(self) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Every local entry key with its stored row, or None where the row is damaged."""
        from .policy import rows

        return rows(self.disk)

    def entries(self, where: EntryFilter | None = None) -> list[dict[str, Any]]:
        """One dict per entry ``where`` matches (every entry by default), most recently used
        first: key, module, function, signature, device, kernels, size, hits and times."""
        from . import report

        return report.entries(self.disk, where)

    def show(self, prefix: str) -> dict[str, Any]:
        """Everything about the one entry whose key starts with ``prefix``: preimage, plan,
        metadata, and each kernel source and binary with its size and whether it is whole.
        LookupError when no entry matches or the one that does is damaged, ValueError when
        several do."""
        from . import report

        return report.show(self.disk, prefix)

    def stats(self) -> dict[str, Any]:
        """Entry count, bytes per part, hits and misses, and entries per device."""
        from . import report

        return report.stats(self.disk)

    def evict(self, where: EntryFilter | None = None, *, max_size: int | None = None) -> list[str]:
        """Evict the entries ``where`` matches, then shrink to ``max_size`` bytes by least
        recent use; returns the evicted keys. ValueError, evicting nothing, when ``max_size``
        is below what the cache holds beside its kernels, which no eviction of kernels
        reaches."""
        from .policy import enforce_bound, evict, select, unreachable

        why = None if max_size is None else unreachable(self.disk, max_size)
        if why is not None:
            raise ValueError(why)
        gone = evict(self.disk, select(self.disk, where)) if where else []
        if max_size is not None:
            gone += enforce_bound(self.disk, max_size)
        return gone

    def clear(self) -> None:
        """Remove every entry, source, compiled artifact and record."""
        self.disk.close()
        for name in (*PARTS, LEGACY_SCRATCH):
            shutil.rmtree(self.root / name, ignore_errors=True)
        self._open()

    def verify(self, repair: bool = False) -> dict[str, Any]:
        """Check rows, preimages, plans, sources, binaries, facts, slangpy's module cache and
        the shader-cache snapshot; ``repair`` drops or rebuilds what fails."""
        from .policy import verify

        found = verify(self.disk, repair, self.regenerate, self.replan)
        seals = self.files.module_seals
        damaged = seals.damaged()
        for module in damaged:
            problem = f"slangpy's module cache file {module} does not match its seal"
            found["problems"].append({"key": "", "problem": problem})
        if repair and damaged:
            seals.discard(damaged)
            self.disk.note_module_cache()
            found["repaired"] += len(damaged)
        snapshots = self.files.shader_cache()
        damaged = snapshots.damaged()
        if damaged is not None:
            problem = f"shader cache snapshot {damaged} is damaged"
            found["problems"].append({"key": "", "problem": problem})
            if repair:
                snapshots.discard()
                found["repaired"] += 1
        return found


@frozen
class _RemoteSnapshots:
    """Shader-cache snapshots travelling under the fact ``fact`` of ``remote``."""

    remote: RemoteTier
    fact: str

    def fetch(self) -> bytes | None:
        return self.remote.shader_snapshot(self.fact)

    def offer(self, data: bytes) -> None:
        self.remote.share_shader_snapshot(self.fact, data)


def _remote_tier(settings: RemoteSettings) -> RemoteTier:
    from .remote import RemoteTier

    return RemoteTier(settings)


def _shipped_tier(root: Path, regenerate: Regenerate | None) -> Tier:
    from .shipped import ShippedTier

    return ShippedTier(root, regenerate)
