"""The shared remote tier on a Redis server: what one machine builds, every machine sharing the
server finds.

Under a prefix, the server holds entries (``entry:<key>``: an entry in its travelling form,
see ``travel``), content-addressed blobs
(``blob:<name>``: kernel sources and cubins), facts about inputs that spare a fresh machine
the Slang front-end (``fact:<name>``: which functions a module's content has, which versions a
slangpy install is, a module cache's compiled modules, the newest snapshot of slangpy's shader
cache) and compile leases (``lease:<name>``). A publisher
writes the blobs first and the entry last, so a reader never meets an entry whose blobs were not
written; one whose blobs Redis evicted since reads as a miss.

Nothing read from the server is trusted beyond what it can prove: an entry must pass the
travelling form's check (with ``SLANGSPEC_REMOTE_SECRET`` as its secret), and a fact must be
whole JSON and, with a secret, carry a valid MAC. What fails is refused with a warning and built
locally, and the local build is published over it. Without a secret the server proves nothing
(see ``proven``): it is used only when every writer of it is trusted (``trust_all``).

Every call is bounded: a connect timeout, a deadline for the call with its whole reply, and a
bound on what a reply may carry (``MAX_VALUE_BYTES`` for an entry or a fact, the sizes asked
first for blobs; see ``redis_wire``). A server that is unreachable, slow, full or answering
garbage or past a bound is warned about once per cause and left alone for a while, and the
process goes on from its local tier.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from . import travel
from .entry import blobs_of
from .keys import (
    SNAPSHOT,
    BlobKind,
    are_compiled_modules,
    blob_name,
    canonical,
    is_shader_listing,
    names,
)
from .location import CacheWarning
from .redis_wire import Client, RedisError
from .remote_config import RemoteSettings
from .remote_leases import RemoteLeases
from .remote_leases import lease_waits as lease_waits
from .tier import Found, Unusable

_log = logging.getLogger(__name__)

PREFIX = "slangspec:"


def namespace(secret: bytes | None) -> str:
    """The key prefix of the nodes that share ``secret``: ``PREFIX`` without one, else a
    fingerprint of it (a hash, which does not reveal it) after it."""
    if secret is None:
        return PREFIX
    return PREFIX + "n" + hashlib.sha256(b"slangspec namespace\0" + secret).hexdigest()[:16] + ":"


CONNECT_TIMEOUT_S = 1.0
QUIET_AFTER_FAILURE_S = 30.0
"""How long a process leaves a server alone after a call to it failed."""
_FAILED = object()
_RACED = object()
PUBLISH_ATTEMPTS = 5
"""How often a publisher merges again when another one wrote the same entry meanwhile."""


class RemoteTier(RemoteLeases):
    """One Redis server as a shared tier (see the module's description)."""

    shared = True

    def __init__(self, settings: RemoteSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._quiet_until = 0.0
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self.prefix = namespace(settings.secret)
        """Where this tier's keys live: nodes with different secrets (or none) never see, nor
        write over, each other's entries."""
        self._refused: collections.OrderedDict[str, tuple[bytes, Unusable]] = (
            collections.OrderedDict()
        )
        """The last entries refused, by key, with the bytes stored: read again unchanged (a
        waiter polling, a publisher merging), one is refused without fetching its blobs. A
        usable one needs no such memory: its blobs are among those ``_had`` keeps."""
        self._had = _Blobs(HELD_BLOB_BYTES)
        """Blobs this process fetched (matching their names) or published lately."""

    def __repr__(self) -> str:
        return f"<slangspec remote tier {self.settings.shown}>"

    @property
    def writable(self) -> bool:
        return not self.settings.read_only

    @property
    def proven(self) -> bool:
        """Whether what the server holds must carry a MAC to be used."""
        return self.settings.secret is not None

    # -- every call goes through here: bounded, and quiet for a while after a failure ---------

    def _redis(self) -> Client:
        with self._lock:
            if self._client is None:
                self._client = Client(self.settings.url, CONNECT_TIMEOUT_S, self.settings.timeout)
            return self._client

    def _call(self, what: Callable[[Client], Any], fallback: Any = None) -> Any:
        """``what(client)``, or ``fallback`` when the server is being left alone or the call
        fails (warned about once per kind of failure)."""
        if time.monotonic() < self._quiet_until:
            return fallback
        try:
            return what(self._redis())
        except RedisError as exc:
            _log.info(
                "remote cache %s failed (%s: %s): computing locally, leaving it for %.0f s",
                self.settings.shown,
                type(exc).__name__,
                exc,
                QUIET_AFTER_FAILURE_S,
            )
            self._quiet_until = time.monotonic() + QUIET_AFTER_FAILURE_S
            self.warn(type(exc).__name__, f"cannot be used now ({type(exc).__name__}: {exc})")
            return fallback

    def warn(self, cause: str, message: str, then: str = "computing locally") -> None:
        """Warn once per ``cause`` in this process."""
        if cause in self._warned:
            return
        self._warned.add(cause)
        warnings.warn(
            f"slangspec remote cache {self.settings.shown} {message}; {then}",
            CacheWarning,
            stacklevel=4,
        )

    # -- entries and their blobs ------------------------------------------------------------

    def get(self, key: str) -> Found | Unusable | None:
        """The entry under ``key`` with its blobs, fetched and checked together; a miss when
        the server evicted one of its blobs since."""
        raw = self._call(lambda r: r.get(self.prefix + "entry:" + key, MAX_VALUE_BYTES))
        return None if raw is None else self._decoded(key, raw)

    def _decoded(self, key: str, raw: bytes) -> Found | Unusable | None:
        """The entry stored as ``raw`` under ``key``, with its blobs fetched and checked (once
        for the same bytes: blobs are named by their content)."""
        with self._lock:
            refused = self._refused.get(key)
        if refused is not None and refused[0] == raw:
            return refused[1]
        got = self._fetched(key, raw)
        if got is not None and not got.usable:
            with self._lock:
                self._refused[key] = (raw, got)
                self._refused.move_to_end(key)
                while len(self._refused) > REFUSED_ENTRIES:
                    self._refused.popitem(last=False)
        return got

    def _fetched(self, key: str, raw: bytes) -> Found | Unusable | None:
        try:
            stored = travel.loaded(raw)
            wanted = sorted(blobs_of(travel.parts(stored)))
        except ValueError as exc:
            self.warn("garbled entry", f"holds an entry {key[:12]} that does not decode ({exc})")
            return Unusable(f"it does not decode ({exc})")
        blobs = self._had.some(wanted)
        unknown = [n for n in wanted if n not in blobs]
        sizes = self._sizes(unknown)
        if sizes is None or 0 in sizes.values():
            return None  # a blob the server lacks: a miss
        too_big = [(n, size) for n, size in sizes.items() if size > MAX_BLOB_BYTES]
        if too_big:
            (name, size), *_ = too_big
            why = f"its blob {name} is {size} bytes, past the limit of {MAX_BLOB_BYTES}"
            self.warn("oversized blob", f"holds an entry {key[:12]} that is refused ({why})")
            return Unusable(why)
        fetched = self._blobs(sizes)
        if fetched is None or None in fetched.values():
            return None
        self._had.keep({n: data for n, data in fetched.items() if names(n, data)})  # type: ignore[arg-type]
        blobs.update(fetched)
        try:
            entry = travel.check(stored, blobs, self.settings.secret)
        except travel.Refused as exc:
            self.warn("refused entry", f"holds an entry {key[:12]} that is refused ({exc})")
            return Unusable(str(exc))
        return Found(entry, lambda: blobs)

    def _sizes(self, wanted: list[str]) -> dict[str, int] | None:
        """The size of each blob ``wanted``, by name (0 for one the server lacks), asked in one
        request before any travels."""
        keys = [self.prefix + "blob:" + n for n in wanted]
        sizes = self._call(lambda r: r.sizes(keys))
        return None if sizes is None else dict(zip(wanted, sizes, strict=True))

    def _blobs(self, sizes: Mapping[str, int]) -> dict[str, bytes | None] | None:
        """The blobs named in ``sizes``, by name (None for one the server lacks), in one
        request that may carry no more than ``sizes`` says they hold."""
        wanted = list(sizes)
        keys = [self.prefix + "blob:" + n for n in wanted]
        found = self._call(lambda r: r.mget(keys, sum(sizes.values())))
        return None if found is None else dict(zip(wanted, found, strict=True))

    def put(self, key: str, row: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        """Share an entry: its blobs first, then the entry. The kernels of an entry another
        machine published under the same key meanwhile are kept (when they pass the same checks
        a reader makes)."""
        if not self.writable:
            return
        ours = travel.shared(row)
        entry_key = self.prefix + "entry:" + key
        for _ in range(PUBLISH_ATTEMPTS):
            before = self._call(lambda r: r.get(entry_key, MAX_VALUE_BYTES), _FAILED)
            if before is _FAILED:
                return
            entry, every_blob = ours, dict(blobs)
            theirs = None if before is None else self._decoded(key, before)
            if theirs is not None and theirs.usable and theirs.row["preimage"] == ours["preimage"]:
                entry = {
                    **ours,
                    "kernels": {**theirs.row["kernels"], **ours["kernels"]},
                    "binaries": {**theirs.row["binaries"], **ours["binaries"]},
                }
                every_blob = {**theirs.blobs(), **blobs}  # type: ignore[dict-item]
            data = canonical(travel.sealed(entry, every_blob, self.settings.secret))
            if len(data) > MAX_VALUE_BYTES:
                self._too_big_to_share(f"entry {key[:12]}", len(data))
                return
            written = self._call(
                lambda r, before=before, data=data: _write(
                    r, self.prefix, entry_key, before, blobs, data
                ),
                _FAILED,
            )
            if written is not _RACED:
                self._had.keep(blobs)
                return

    def fact(self, name: str) -> dict[str, Any]:
        """A fact about inputs that a process noted for others (which functions a module has,
        which versions a slangpy install is), checked like an entry; empty when there is none
        or it is refused."""
        raw = self._call(lambda r: r.get(self.prefix + "fact:" + name, MAX_VALUE_BYTES))
        if raw is None:
            return {}
        try:
            stored = travel.loaded(raw)
            value = stored["value"]
            if not isinstance(value, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError, KeyError) as exc:
            self.warn("garbled fact", f"holds a fact {name[:24]} that does not decode ({exc})")
            return {}
        secret = self.settings.secret
        if secret is not None and not travel.holds(
            secret, _fact(name, value), (), stored.get(travel.MAC)
        ):
            self.warn("refused fact", f"holds fact {name[:24]} without a valid MAC")
            return {}
        return value

    def compiled_modules(self, name: str, wanted: Callable[[str], bool]) -> dict[str, bytes]:
        """The compiled Slang modules the fact ``name`` lists (a module cache's: see
        ``keys.module_cache_fact``) whose path ``wanted`` accepts, fetched and checked: each
        path one of the module cache's own, each blob a compiled module's, named by its
        content and within ``MAX_BLOB_BYTES`` (asked before it travels). What fails is left
        out, with a warning."""
        listed = self.fact(name)
        bad = [p for p, b in listed.items() if not are_compiled_modules({p: b})]
        if bad:
            self.warn("refused fact", f"holds fact {name[:24]} naming {bad[0]!r}, refused")
        listed = {p: b for p, b in listed.items() if p not in bad and wanted(p)}
        return self._listed_blobs(listed, "compiled module")

    def share_compiled_modules(self, name: str, modules: Mapping[str, bytes]) -> None:
        """Publish compiled Slang modules by their path in the module cache: the blobs, then
        the fact ``name`` that lists them (merged with what it listed)."""
        self._share_listed(name, modules, "module")

    def shader_snapshot(self, name: str) -> bytes | None:
        """The snapshot of slangpy's shader cache the fact ``name`` names (see
        ``keys.shader_cache_fact``), fetched and checked as ``compiled_modules`` checks a
        module; None when there is none, or it fails (with a warning)."""
        listed = self.fact(name)
        if listed and not is_shader_listing(listed):
            self.warn("refused fact", f"holds fact {name[:24]} that is not a snapshot's, refused")
            return None
        return self._listed_blobs(listed, "shader-cache snapshot").get(SNAPSHOT)

    def share_shader_snapshot(self, name: str, data: bytes) -> None:
        """Publish a snapshot of slangpy's shader cache as the newest under the fact ``name``
        (one that would not travel, past ``MAX_BLOB_BYTES``, is kept local)."""
        if len(data) <= MAX_BLOB_BYTES:
            self._share_listed(name, {SNAPSHOT: data}, "shaders")

    def _listed_blobs(self, listed: Mapping[str, list[str]], what: str) -> dict[str, bytes]:
        """The blobs a fact lists (by label: its blob name and SHA-256), fetched when within
        ``MAX_BLOB_BYTES`` and kept when they match both; what fails is left out, with a
        warning."""
        if not listed:
            return {}
        sizes = self._sizes(sorted({blob for blob, _ in listed.values()}))
        if sizes is None:
            return {}
        fits = {}
        for label, (blob, digest) in listed.items():
            if not sizes[blob]:
                continue  # evicted by the server since: built here instead
            if sizes[blob] > MAX_BLOB_BYTES:
                why = f"{blob} is {sizes[blob]} bytes, past the limit of {MAX_BLOB_BYTES}"
                self.warn("oversized blob", f"holds {what} {label}, refused ({why})")
                continue
            fits[label] = (blob, digest)
        fetched = self._blobs({blob: sizes[blob] for blob, _ in fits.values()}) or {}
        out = {}
        for label, (blob, digest) in fits.items():
            data = fetched.get(blob)
            if data is None:
                continue  # evicted by the server since
            if not names(blob, data) or hashlib.sha256(data).hexdigest() != digest:
                why = "does not match its name or SHA-256"
                self.warn("refused blob", f"holds blob {blob} that {why}")
                continue
            out[label] = data
        return out

    def _share_listed(self, name: str, blobs: Mapping[str, bytes], kind: BlobKind) -> None:
        """Publish ``blobs`` (by label) as blobs of ``kind``, then the fact ``name`` that lists
        them with their SHA-256 (merged with what it listed)."""
        if not self.writable or not blobs:
            return
        names_ = {label: blob_name(kind, data) for label, data in blobs.items()}
        written = self._call(
            lambda r: r.mset({self.prefix + "blob:" + names_[k]: d for k, d in blobs.items()})
        )
        if written:
            listed = {k: [names_[k], hashlib.sha256(d).hexdigest()] for k, d in blobs.items()}
            self.note_fact(name, listed)

    def fact_names(self, prefix: str) -> list[str]:
        """Names of the facts that start with ``prefix`` (a scan: for tools)."""
        start = len(self.prefix + "fact:")
        pattern = self.prefix + "fact:" + prefix + "*"
        found = self._call(lambda r: [k[start:] for k in r.scan_iter(pattern)])
        return sorted(found or [])

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        if not self.writable:
            return
        merged = {**self.fact(name), **value}
        stored: dict[str, Any] = {"value": merged}
        if self.settings.secret is not None:
            stored[travel.MAC] = travel.mac(self.settings.secret, _fact(name, merged))
        data = canonical(stored)
        if len(data) > MAX_VALUE_BYTES:
            self._too_big_to_share(f"fact {name[:24]}", len(data))
            return
        self._call(lambda r: r.set(self.prefix + "fact:" + name, data))

    def _too_big_to_share(self, what: str, size: int) -> None:
        """Warn that ``what`` is kept local: no reader would take it."""
        why = f"is {size} bytes, past the limit of {MAX_VALUE_BYTES} a reader takes"
        self.warn(f"oversized {what}", f"is not sent {what}, which {why}", then="kept locally")

    def entry_keys(self) -> list[str]:
        """Keys of the entries the server holds (a scan: for tools, not the hot path)."""
        start = len(self.prefix + "entry:")
        found = self._call(lambda r: [k[start:] for k in r.scan_iter(self.prefix + "entry:*")])
        return sorted(found or [])

    def listing(self) -> list[tuple[str, dict[str, Any] | None]]:
        """Every entry key with its shared parts as stored (not yet checked against its blobs
        or MAC), or None where they do not decode (a scan: for tools)."""
        out = []
        for key in self.entry_keys():
            raw = self._call(
                lambda r, key=key: r.get(self.prefix + "entry:" + key, MAX_VALUE_BYTES)
            )
            if raw is None:
                continue
            try:
                entry: dict[str, Any] | None = travel.parts(travel.loaded(raw))
            except ValueError:
                entry = None
            out.append((key, entry))
        return out

    def drop_unreferenced_blobs(self, referenced: set[str]) -> int:
        """Remove the blobs no entry names; how many went."""
        if not self.writable:
            return 0
        start = len(self.prefix + "blob:")
        names = self._call(lambda r: [k[start:] for k in r.scan_iter(self.prefix + "blob:*")])
        gone = [n for n in names or [] if n not in referenced]
        if gone:
            self._call(lambda r: r.delete(*(self.prefix + "blob:" + n for n in gone)))
        return len(gone)

    def delete(self, key: str) -> None:
        """Remove an entry (its blobs stay for other entries; Redis evicts what it must)."""
        if self.writable:
            self._call(lambda r: r.delete(self.prefix + "entry:" + key))

    def delete_fact(self, name: str) -> None:
        if self.writable:
            self._call(lambda r: r.delete(self.prefix + "fact:" + name))

    def stats(self) -> dict[str, Any]:
        """What the server holds for slangspec, and the memory it uses in all."""

        def count(r: Any) -> dict[str, Any]:
            kinds = {"entry": 0, "blob": 0, "fact": 0, "lease": 0}
            for k in r.scan_iter(self.prefix + "*", count=1000):
                kind = k[len(self.prefix) :].split(":", 1)[0]
                if kind in kinds:
                    kinds[kind] += 1
            memory = r.info("memory")
            return {
                "url": self.settings.shown,
                "entries": kinds["entry"],
                "blobs": kinds["blob"],
                "facts": kinds["fact"],
                "leases": kinds["lease"],
                "used_memory": memory.get("used_memory", 0),
                "maxmemory": memory.get("maxmemory", 0),
                "read_only": self.settings.read_only,
                "signed": self.settings.secret is not None,
            }

        return self._call(count) or {"url": self.settings.shown, "unavailable": True}


MAX_BLOB_BYTES = 64 << 20
"""The largest blob (a kernel source or cubin) fetched from the server; its size is asked
first, so a larger one is refused before it travels."""
MAX_VALUE_BYTES = 1 << 20
"""The largest entry or fact read from the server (one is a few kilobytes), refused as its
length is announced, before it travels; a larger one is never published."""
REFUSED_ENTRIES = 64
"""How many refused entries a process remembers."""
HELD_BLOB_BYTES = 64 << 20
"""How many bytes of blobs a process keeps of those it fetched or published lately."""


class _Blobs:
    """Blobs by name, the least recently kept dropped past ``bound`` bytes."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._held: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def some(self, wanted: list[str]) -> dict[str, bytes | None]:
        """Those of the blobs ``wanted`` held here, by name."""
        with self._lock:
            return {n: self._held[n] for n in wanted if n in self._held}

    def keep(self, blobs: Mapping[str, bytes]) -> None:
        with self._lock:
            for name, data in blobs.items():
                if name not in self._held:
                    self._held[name] = data
                    self._bytes += len(data)
                self._held.move_to_end(name)
            while self._bytes > self.bound:
                _, gone = self._held.popitem(last=False)
                self._bytes -= len(gone)


def _write(
    client: Client,
    prefix: str,
    entry_key: str,
    before: bytes | None,
    blobs: dict[str, bytes],
    data: bytes,
) -> object | None:
    """Write ``blobs`` (even present ones: a damaged copy is replaced) under ``prefix``, then
    the entry, unless it changed since it read ``before``; ``_RACED`` when it did."""
    client.pipeline([("SET", prefix + "blob:" + name, blob) for name, blob in blobs.items()])
    with client.connection() as conn:
        conn.call("WATCH", entry_key)
        if conn.call("GET", entry_key, most=MAX_VALUE_BYTES) != before:
            conn.call("UNWATCH")
            return _RACED
        *_, done = conn.pipeline([("MULTI",), ("SET", entry_key, data), ("EXEC",)])
    return _RACED if done is None else None


def _fact(name: str, value: dict[str, Any]) -> dict[str, Any]:
    """What a fact's MAC covers: its name with its value, so a value cannot move to another."""
    return {"fact": name, "value": value}
