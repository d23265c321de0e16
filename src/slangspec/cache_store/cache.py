"""``Cache``: the cache beside the pipeline. The runtime reads and fills it; people inspect,
bound, evict and verify it. It owns its tiers and hands the compiler and the device the paths
they write to, so neither ever sees the cache root."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from . import report
from .disk import HITS, MISSES, DiskTier
from .entry import Entry, blobs_of, intact, refusal, seal
from .keys import blob_name, key_of
from .location import (
    LEGACY_SCRATCH,
    PARTS,
    SHADERS,
    SLANG,
    CacheWarning,
    cache_root,
    lease_seconds,
    part,
    private_root,
    root_problem,
    shader_cache_bytes,
    size_bound,
)
from .policy import (
    LOW_WATER,
    EntryFilter,
    Regenerate,
    enforce_bound,
    evict,
    rows,
    select,
    verify,
)
from .remote import RemoteSettings, RemoteTier, remote_settings
from .shader_snapshots import ShaderSnapshots
from .tier import Tier

_shrinking: dict[Path, threading.Thread] = {}
_snapshots: dict[Path, ShaderSnapshots] = {}
_snapshots_lock = threading.Lock()
_shrinking_lock = threading.Lock()


class Cache:
    """A slangspec cache directory (``path``, else ``SLANGSPEC_CACHE_DIR``, else the user cache)."""

    regenerate: Regenerate | None = None
    """How ``verify(repair=True)`` rebuilds a missing kernel source from its plan; without one,
    an entry with a missing source is dropped instead."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, remote: RemoteSettings | None = None
    ) -> None:
        self.root = cache_root(path)
        self.disk = DiskTier(self.root)
        self.tiers: tuple[Tier, ...] = (self.disk,)
        """Nearest first; an entry is served from the first tier that has a servable one."""
        self.remote = RemoteTier(remote) if remote is not None else None
        """The shared tier behind the local one: a local miss is looked up there, and what this
        process builds is published there."""

    @classmethod
    def for_running(
        cls, path: str | os.PathLike[str] | None = None, remote: str | None = None
    ) -> Cache:
        """The cache a process runs kernels from: the one at ``path`` when it is safe to (a
        directory of this user that no one else can write), else, with a warning, a private
        cache of this process alone; behind it the remote tier at ``remote``, else at
        ``SLANGSPEC_REMOTE``, when either is set."""
        settings = remote_settings(remote)
        root = cache_root(path)
        problem = root_problem(root)
        if problem is None:
            return cls(root, settings)
        warnings.warn(
            f"slangspec cache {root} is not used: {problem}; this process keeps a private cache",
            CacheWarning,
            stacklevel=3,
        )
        return cls(private_root(), settings)

    def __repr__(self) -> str:
        return f"<slangspec.Cache {self.root}>"

    # -- paths handed to the compiler and the device -------------------------------------------

    @property
    def kernel_dir(self) -> Path:
        """Where generated kernel sources lie, for Slang to import them by name."""
        return self.disk.kernel_dir

    @property
    def module_cache(self) -> Path:
        """slangpy's module cache: compiled IR of user and generated modules."""
        return part(self.root, SLANG)

    def shader_cache(self) -> ShaderSnapshots:
        """slangpy's shader cache, as this process uses it (one per root and process)."""
        path = part(self.root, SHADERS)
        with _snapshots_lock:
            snapshots = _snapshots.get(path)
            if snapshots is None:
                snapshots = _snapshots[path] = ShaderSnapshots(path, shader_cache_bytes())
            return snapshots

    def layout_id(self) -> tuple[int, ...]:
        """Identifies what builds read from; it changes when a ``clear`` (in any process)
        replaces its directories, or an eviction or repair removes files, so that a build that
        failed meanwhile knows to try again."""
        ids = []
        for path in (self.disk.kernel_dir, self.root / SLANG):
            try:
                ids.append(path.stat().st_ino)
            except FileNotFoundError:
                ids.append(0)
        return (*ids, self.disk.removals())

    def write_module(self, name: str, source: str) -> Path:
        """The file of a module given as a source string."""
        return self.disk.write_module(name, source)

    # -- what the runtime reads and writes -----------------------------------------------------

    def lookup(self, key: str, preimage: dict[str, Any], label: str | None = None) -> Entry | None:
        """The entry for ``key`` if one is whole and was built from exactly ``preimage``; one that
        is not is dropped, with a warning. With ``label``, a local entry that lacks that kernel
        is completed from the remote tier when the remote has it."""
        for tier in self.tiers:
            row = tier.get(key)
            if row is None:
                continue
            why = refusal(row, preimage)
            if why is None:
                entry = Entry(key, row)
                if label is None or label in entry.kernels or self.remote is None:
                    return entry
                return self._pull(key, preimage, entry) or entry
            warnings.warn(
                f"slangspec cache entry {key[:12]} dropped: {why}; rebuilding",
                CacheWarning,
                stacklevel=2,
            )
            tier.delete(key)
        return None if self.remote is None else self._pull(key, preimage)

    def _pull(self, key: str, preimage: dict[str, Any], local: Entry | None = None) -> Entry | None:
        """The remote tier's entry for ``key``, checked and installed locally (merged with the
        ``local`` one's kernels and binaries); None when it has none that may be served."""
        assert self.remote is not None
        found = self.remote.fetch(key)
        if found is None:
            return None
        shared, blobs = found
        if shared["preimage"] != preimage:
            self.remote.warn(
                f"preimage {key}", f"holds entry {key[:12]} built from another preimage"
            )
            return None
        entry = self._install(key, shared, blobs, local)
        self.enforce_bound()  # what came from the server counts against this cache's bound
        return entry

    def _install(
        self,
        key: str,
        shared: dict[str, Any],
        blobs: dict[str, bytes],
        local: Entry | None = None,
    ) -> Entry:
        """Write a checked remote entry and its blobs into the local tier."""
        for name, data in blobs.items():
            self.disk.write_blob(name, data)
        now = time.time()
        meta = {"created": now, "last_used": now, "hits": 0, "pulled": True}
        if local is not None:
            meta = local.row["meta"]
            shared["kernels"] = {**shared["kernels"], **local.kernels}
            shared["binaries"] = {**shared["binaries"], **local.binaries}
        row = seal({**shared, "meta": meta})
        self.disk.put(key, row)
        return Entry(key, row)

    def push(self) -> dict[str, int]:
        """Publish every whole local entry, and what is known of each module's functions, to
        the remote tier; counts of what was pushed and of what was not whole."""
        if self.remote is None or not self.remote.writable:
            raise ValueError("no remote tier this process may write to (see SLANGSPEC_REMOTE)")
        pushed = skipped = 0
        for key, row in rows(self.disk):
            if self._publish_row(key, row):
                pushed += 1
            else:
                skipped += 1
        for key in self.disk.function_keys():
            self.remote.note_fact("functions:" + key, self.disk.functions(key))
        return {"entries": pushed, "skipped": skipped}

    def pull(self, where: EntryFilter | None = None) -> dict[str, int]:
        """Fetch the remote tier's entries that ``where`` matches (module, function and device
        kind) into the local tier, each checked as a lookup would, and what it knows of modules'
        functions and slangpy installs; counts of entries pulled, already here, and refused."""
        if self.remote is None:
            raise ValueError("no remote tier (see SLANGSPEC_REMOTE)")
        counts = {"pulled": 0, "present": 0, "refused": 0}
        now = time.time()
        for key in self.remote.entry_keys():
            if intact(self.disk.get(key)):
                counts["present"] += 1
                continue
            found = self.remote.fetch(key)
            if found is None or key_of(found[0]["preimage"]) != key:
                counts["refused"] += 1
                continue
            shared, blobs = found
            if not _remote_matches(where, key, shared, now):
                continue
            self._install(key, shared, blobs)
            counts["pulled"] += 1
        for name in self.remote.fact_names("functions:"):
            self.functions(name[len("functions:") :])
        for name in self.remote.fact_names("slangpy:"):
            self.slangpy_versions(name[len("slangpy:") :])
        return counts

    def remote_entries(self, where: EntryFilter | None = None) -> list[dict[str, Any]]:
        """One dict per remote entry ``where`` matches (module, function, key, device kind), as
        stored there; one that does not decode is listed as damaged."""
        if self.remote is None:
            raise ValueError("no remote tier (see SLANGSPEC_REMOTE)")
        now = time.time()
        out: list[dict[str, Any]] = []
        for key, shared in self.remote.listing():
            if not _remote_matches(where, key, shared, now):
                continue
            if shared is None:
                out.append({"key": key, "damaged": True})
                continue
            out.append(
                {
                    **report.described(key, shared["preimage"]),
                    "kernels": sorted(shared["kernels"]),
                    "binaries": sorted(shared["binaries"]),
                }
            )
        return out

    def evict_remote(self, where: EntryFilter) -> list[str]:
        """Remove the remote entries ``where`` matches, then the blobs no entry names."""
        if self.remote is None or not self.remote.writable:
            raise ValueError("no remote tier this process may write to (see SLANGSPEC_REMOTE)")
        gone = [e["key"] for e in self.remote_entries(where)]
        for key in gone:
            self.remote.delete(key)
        referenced: set[str] = set()
        for _, shared in self.remote.listing():
            if shared is not None:
                referenced |= blobs_of(shared)
        self.remote.drop_unreferenced_blobs(referenced)
        return gone

    def verify_remote(self, repair: bool = False) -> dict[str, Any]:
        """Check every remote entry as a lookup would (shape, blobs against their names, the
        key against its preimage, the signature where a secret is set); ``repair`` removes
        what fails."""
        if self.remote is None:
            raise ValueError("no remote tier (see SLANGSPEC_REMOTE)")
        keys = self.remote.entry_keys()
        problems = []
        for key in keys:
            found = self.remote.fetch(key)
            if found is None:
                why = "missing blobs, damaged, or without a valid signature"
            elif key_of(found[0]["preimage"]) != key:
                why = "its key is not the hash of its preimage"
            else:
                continue
            problems.append({"key": key, "problem": why})
            if repair:
                self.remote.delete(key)
        return {"checked": len(keys), "problems": problems, "repaired": len(problems) * repair}

    def publish(self, key: str) -> None:
        """Share the local entry ``key`` and its blobs through the remote tier, if any."""
        if self.remote is None or not self.remote.writable:
            return
        row = self.disk.get(key)
        if intact(row):
            self._publish_row(key, row)

    def _publish_row(self, key: str, row: dict[str, Any] | None) -> bool:
        """Publish a local row with its blobs; False, publishing nothing, when it is not whole."""
        assert self.remote is not None
        blobs = {} if row is None else {n: self.disk.read_blob(n) for n in blobs_of(row)}
        if row is None or None in blobs.values():
            return False
        self.remote.publish(key, row, blobs)
        return True

    def insert(
        self,
        key: str,
        preimage: dict[str, Any],
        plan_json: str,
        kernels: dict[str, str],
        meta: dict[str, Any] | None = None,
    ) -> Entry:
        """Store a new entry (its kernel sources already written)."""
        now = time.time()
        meta = {"created": now, "last_used": now, "hits": 0, **(meta or {})}
        row = seal({"preimage": preimage, "plan": plan_json, "kernels": kernels, "meta": meta})
        self.disk.put(key, row)
        return Entry(key, row)

    def _update(self, key: str, change: Callable[[dict[str, Any]], None]) -> None:
        self.disk.update(key, change)

    def add_kernel(self, key: str, label: str, name: str, seconds: float) -> None:
        """Add a kernel's source name to its entry, with the time it took to build."""

        def change(row: dict[str, Any]) -> None:
            row["kernels"][label] = name
            row["meta"]["compile_s"] = row["meta"].get("compile_s", 0.0) + seconds

        self._update(key, change)

    def add_binary(self, key: str, label: str, binary: dict[str, Any]) -> None:
        """Add a kernel's CUDA binary (file name, parameter layout, group size) to its entry."""
        self._update(key, lambda row: row.setdefault("binaries", {}).__setitem__(label, binary))

    def drop_binary(self, key: str, label: str) -> None:
        self._update(key, lambda row: row.get("binaries", {}).pop(label, None))

    def touch(self, key: str) -> None:
        """Count a hit and mark the entry used now (for LRU eviction)."""

        def change(row: dict[str, Any]) -> None:
            row["meta"]["hits"] += 1
            row["meta"]["last_used"] = time.time()

        self._update(key, change)
        self.disk.count(HITS)

    def count_miss(self) -> None:
        self.disk.count(MISSES)

    def functions(self, key: str, name: str | None = None) -> dict[str, bool | dict[str, Any]]:
        """Function names of the module whose contents ``key`` hashes, as reflection found
        them: False for those it lacks, the plain-data description of those it has (True when
        it has one undescribed); a name not there is unknown. When this cache does not know
        ``name`` (or, without one, always), the remote tier is asked too: a warm process with a
        local answer never waits on the server."""
        known = self.disk.functions(key)
        if self.remote is not None and (name is None or name not in known):
            shared = self.remote.fact("functions:" + key) or {}
            for found, value in shared.items():
                if found not in known and isinstance(value, bool | dict):
                    known[found] = value
                    self.disk.note_function(key, found, value)
        return known

    def note_function(self, key: str, name: str, known: bool | dict[str, Any]) -> None:
        self.disk.note_function(key, name, known)
        if self.remote is not None:
            self.remote.note_fact("functions:" + key, self.disk.functions(key))

    def slangpy_versions(self, stamp: str) -> dict[str, str] | None:
        """The slangpy versions a process noted for the install it stamped ``stamp`` (here, or
        on the remote tier)."""
        versions = self.disk.slangpy_versions(stamp)
        if versions is None and self.remote is not None:
            shared = self.remote.fact("slangpy:" + stamp)
            if shared is not None and all(isinstance(v, str) for v in shared.values()):
                versions = shared
                self.disk.note_slangpy_versions(stamp, versions)
        return versions

    def note_slangpy_versions(self, stamp: str, versions: dict[str, str]) -> None:
        self.disk.note_slangpy_versions(stamp, versions)
        if self.remote is not None:
            self.remote.note_fact("slangpy:" + stamp, versions)

    def record(self, record: dict[str, Any]) -> None:
        """Keep a record of a specialization the JIT built, for replay elsewhere."""
        self.disk.record(record)

    def records(self) -> list[dict[str, Any]]:
        return self.disk.records()

    def write_source(self, source: str) -> str:
        """Store a generated kernel source; returns its module name."""
        name = blob_name("source", source)
        self.disk.write_blob(name, source.encode())
        return name

    def read_source(self, name: str) -> str | None:
        """A kernel source's text, or None when it is missing or damaged."""
        data = self.disk.read_blob(name)
        return None if data is None else data.decode()

    def source_ok(self, name: str) -> bool:
        return self.disk.read_blob(name) is not None

    def names(self, key: str, name: str) -> bool:
        """Whether the entry at ``key`` still names the source or binary ``name``; False once
        another process evicted or replaced it."""
        row = self.disk.get(key)
        return intact(row) and name in blobs_of(row)

    def write_binary(self, data: bytes) -> str:
        """Store a compiled binary; returns its name."""
        name = blob_name("binary", data)
        self.disk.write_blob(name, data)
        return name

    def read_binary(self, name: str) -> bytes | None:
        return self.disk.read_blob(name)

    def lease(self, name: str, done: Callable[[], bool]) -> contextlib.AbstractContextManager[None]:
        """The compile lease ``name`` (see ``Tier.lease``), held where every process sharing
        this cache sees it (on the remote tier when this process publishes there, so machines
        build a key once); one whose holder died is taken over at once on the holder's host,
        and lapses after ``SLANGSPEC_CACHE_LEASE`` seconds elsewhere."""
        seconds = lease_seconds()
        if self.remote is not None and self.remote.writable:
            return self.remote.lease(
                name, done, seconds, lambda: self.disk.lease(name, done, seconds)
            )
        return self.tiers[-1].lease(name, done, seconds)

    def remote_lease(
        self, name: str, done: Callable[[], bool]
    ) -> contextlib.AbstractContextManager[None]:
        """The lease ``name`` on the remote tier when this process publishes there, for work
        that machines sharing it need done once; else no lease (processes of one machine do
        such work each on their own)."""
        if self.remote is not None and self.remote.writable:
            nothing = contextlib.nullcontext
            return self.remote.lease(name, done, lease_seconds(), nothing)
        return contextlib.nullcontext()

    def claim(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """Try once, without waiting, to take the lease ``name`` on the remote tier when this
        process publishes there: the block sees whether it holds it (always True without
        such a tier), so machines can share out work instead of waiting on each other."""
        if self.remote is not None and self.remote.writable:
            return self.remote.claim(name, lease_seconds())
        return contextlib.nullcontext(True)

    def leased_remotely(self, name: str) -> bool:
        """Whether the compile lease ``name`` is held on the remote tier (by any process of any
        machine), so that work elsewhere can come first."""
        return self.remote is not None and self.remote.writable and self.remote.leased(name)

    def note_compiled(self, modules: Iterable[str]) -> None:
        """Count what slangpy compiled for these modules into the cache's size."""
        self.disk.note_compiled(modules)

    def enforce_bound(self) -> threading.Thread | None:
        """Keep the cache within ``SLANGSPEC_CACHE_SIZE``. Within it, this costs a few ``stat``
        calls; over it, least recently used entries are evicted (down to ``LOW_WATER`` of the
        bound) on a thread of their own, which the process finishes before it exits; returns
        that thread."""
        bound = size_bound()
        if self.disk.size() <= bound:
            return None
        with _shrinking_lock:
            running = _shrinking.get(self.root)
            if running is not None and running.is_alive():
                return running
            thread = threading.Thread(
                target=self._shrink, args=(bound,), name="slangspec-evict", daemon=False
            )
            _shrinking[self.root] = thread
            thread.start()
            return thread

    def _shrink(self, bound: int) -> None:
        try:
            enforce_bound(self.disk, bound, LOW_WATER)
        except Exception as exc:  # the cache stays over its bound until the next build
            warnings.warn(f"slangspec could not shrink {self.root}: {exc}", CacheWarning, 2)

    # -- inspection and management -------------------------------------------------------------

    def rows(self) -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Every entry key with its stored row, or None where the row is damaged."""
        return rows(self.disk)

    def entries(self, where: EntryFilter | None = None) -> list[dict[str, Any]]:
        """One dict per entry ``where`` matches (every entry by default), most recently used
        first: key, module, function, signature, device, kernels, size, hits and times."""
        return report.entries(self.disk, where)

    def show(self, prefix: str) -> dict[str, Any]:
        """Everything about the one entry whose key starts with ``prefix``: preimage, plan,
        metadata, and each kernel source and binary with its size and whether it is whole.
        LookupError when no entry or several match, or the one that does is damaged."""
        return report.show(self.disk, prefix)

    def stats(self) -> dict[str, Any]:
        """Entry count, bytes per part, hits and misses, and entries per device."""
        return report.stats(self.disk)

    def evict(self, where: EntryFilter | None = None, *, max_size: int | None = None) -> list[str]:
        """Evict the entries ``where`` matches, then shrink to ``max_size`` bytes by least
        recent use; returns the evicted keys."""
        gone = evict(self.disk, select(self.disk, where)) if where else []
        if max_size is not None:
            gone += enforce_bound(self.disk, max_size)
        return gone

    def clear(self) -> None:
        """Remove every entry, source, compiled artifact and record."""
        self.disk.close()
        for name in (*PARTS, LEGACY_SCRATCH):
            shutil.rmtree(self.root / name, ignore_errors=True)
        self.disk = DiskTier(self.root)
        self.tiers = (self.disk,)

    def verify(self, repair: bool = False) -> dict[str, Any]:
        """Check rows, preimages, plans, sources, binaries and the shader-cache snapshot;
        ``repair`` drops or rebuilds what fails."""
        report = verify(self.disk, repair, self.regenerate)
        damaged = self.shader_cache().damaged()
        if damaged is not None:
            problem = f"shader cache snapshot {damaged} is damaged"
            report["problems"].append({"key": "", "problem": problem})
            if repair:
                self.shader_cache().discard()
                report["repaired"] += 1
        return report


def _remote_matches(
    where: EntryFilter | None, key: str, shared: dict[str, Any] | None, now: float
) -> bool:
    """Whether a remote entry (None: one that does not decode) passes ``where``: the server
    keeps no times, so only module, function, key and device filters can tell."""
    if where is None:
        return True
    if shared is None:
        return where.matches(key, None, now)
    row = {"preimage": shared["preimage"], "meta": {"created": now, "last_used": now}}
    return where.matches(key, row, now)
