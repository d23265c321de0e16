"""The shared remote tier on a Redis server: what one machine builds, every machine sharing the
server finds.

Under a prefix, the server holds entries (``entry:<key>``: the entry's preimage, plan, kernel
names and binaries, as JSON, and an HMAC when a secret is set), content-addressed blobs
(``blob:<name>``: kernel sources and cubins), facts about inputs that spare a fresh machine
the Slang front-end (``fact:<name>``: which functions a module's content has, which versions a
slangpy install is) and compile leases (``lease:<name>``). A publisher
writes the blobs first and the entry last, so a reader never meets an entry whose blobs were not
written; one whose blobs Redis evicted since reads as a miss.

Nothing read from the server is trusted beyond what it can prove: an entry must be whole JSON of
the expected shape, every blob must hash to its name, and with ``SLANGSPEC_REMOTE_SECRET`` set
the entry must carry a valid HMAC over itself and the SHA-256 of each blob. What fails is
refused with a warning and built locally, and the local build is published over it.

Every call is bounded (connect and operation timeouts); a server that is unreachable, slow, full
or answering garbage is warned about once per cause and left alone for a while, and the process
goes on from its local tier.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .entry import blobs_of
from .keys import canonical, names
from .location import CacheWarning
from .signing import MIN_SECRET_BYTES, sign, signed

REMOTE_ENV = "SLANGSPEC_REMOTE"
SECRET_ENV = "SLANGSPEC_REMOTE_SECRET"
MODE_ENV = "SLANGSPEC_REMOTE_MODE"
MODES = ("readwrite", "read")
PREFIX = "slangspec:"
CONNECT_TIMEOUT_S = 1.0
OPERATION_TIMEOUT_S = 2.0
QUIET_AFTER_FAILURE_S = 30.0
"""How long a process leaves a server alone after a call to it failed."""
_FAILED = object()
_RACED = object()
PUBLISH_ATTEMPTS = 5
"""How often a publisher merges again when another one wrote the same entry meanwhile."""
lease_waits: list[float] = []
"""Seconds each wait on another machine's lease took in this process, for tests and benchmarks."""
PUBLISHED = ("preimage", "plan", "kernels", "binaries")
"""The parts of an entry that are shared; use counts and times stay with each machine."""


def redis_py() -> ModuleType:
    """redis-py, imported with the cyclic garbage collector paused.

    Its import builds hundreds of classes; beside torch's heap those allocations set off full
    collections that cost a new process more than the import itself (about 100 ms of 150 ms on
    the 2-core machine)."""
    was_collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module("redis")
    finally:
        if was_collecting:
            gc.enable()


@dataclass(frozen=True)
class RemoteSettings:
    """Where the remote tier is and how this process may use it."""

    url: str
    secret: bytes | None = None
    read_only: bool = False

    @property
    def shown(self) -> str:
        """The URL without its password, for messages."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        user = parts.username or ""
        netloc = f"{user}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))


def remote_settings(url: str | None = None) -> RemoteSettings | None:
    """The remote tier named by ``url``, else by ``SLANGSPEC_REMOTE``; None when neither is set.
    ValueError naming the setting when a value is not one it accepts."""
    source = "remote" if url else REMOTE_ENV
    chosen = url or os.environ.get(REMOTE_ENV)
    if not chosen:
        return None
    scheme = urlsplit(chosen).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError(
            f"{source}={chosen!r}: expected a redis://, rediss:// or unix:// URL, like "
            "redis://host:6379/0"
        )
    mode = os.environ.get(MODE_ENV, "readwrite")
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: expected one of {MODES}")
    key = os.environ.get(SECRET_ENV)
    if key is not None and len(key.encode()) < MIN_SECRET_BYTES:
        raise ValueError(
            f"{SECRET_ENV} is {len(key.encode())} bytes long: expected at least "
            f"{MIN_SECRET_BYTES} (a random string, like the output of `openssl rand -hex 32`)"
        )
    return RemoteSettings(chosen, key.encode() if key else None, mode == "read")


class RemoteTier:
    """One Redis server as a shared tier (see the module's description)."""

    def __init__(self, settings: RemoteSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._quiet_until = 0.0
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<slangspec remote tier {self.settings.shown}>"

    @property
    def writable(self) -> bool:
        return not self.settings.read_only

    # -- every call goes through here: bounded, and quiet for a while after a failure ---------

    def _redis(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = redis_py().Redis.from_url(
                    self.settings.url,
                    socket_connect_timeout=CONNECT_TIMEOUT_S,
                    socket_timeout=OPERATION_TIMEOUT_S,
                    retry_on_timeout=False,
                )
            return self._client

    def _call(self, what: Callable[[Any], Any], fallback: Any = None) -> Any:
        """``what(client)``, or ``fallback`` when the server is being left alone or the call
        fails (warned about once per kind of failure)."""
        if time.monotonic() < self._quiet_until:
            return fallback
        try:
            return what(self._redis())
        except redis_py().RedisError as exc:
            self._quiet_until = time.monotonic() + QUIET_AFTER_FAILURE_S
            self.warn(type(exc).__name__, f"cannot be used now ({type(exc).__name__}: {exc})")
            return fallback

    def warn(self, cause: str, message: str) -> None:
        """Warn once per ``cause`` in this process."""
        if cause in self._warned:
            return
        self._warned.add(cause)
        warnings.warn(
            f"slangspec remote cache {self.settings.shown} {message}; computing locally",
            CacheWarning,
            stacklevel=4,
        )

    # -- entries and their blobs ------------------------------------------------------------

    def fetch(self, key: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
        """The shared part of the entry under ``key`` and the blobs it names, each checked
        (see the module's description); None when there is none, or it is refused."""
        raw = self._call(lambda r: r.get(PREFIX + "entry:" + key))
        return None if raw is None else self._checked(key, raw)

    def _checked(self, key: str, raw: bytes) -> tuple[dict[str, Any], dict[str, bytes]] | None:
        try:
            stored = json.loads(raw)
            entry = {part: stored["entry"][part] for part in PUBLISHED}
            wanted = sorted(_blob_names(entry))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self.warn("garbled", f"holds an entry {key[:12]} that does not decode ({exc})")
            return None
        keys = [PREFIX + "blob:" + n for n in wanted]
        found = self._call(lambda r: r.mget(keys) if keys else [])
        if found is None:
            return None
        blobs = dict(zip(wanted, found, strict=True))
        if any(data is None for data in blobs.values()):
            return None  # evicted by the server since: a miss
        damaged = [n for n, data in blobs.items() if not names(n, data)]
        if damaged:
            self.warn("damaged", f"holds blob {damaged[0]} whose bytes do not match its name")
            return None
        secret = self.settings.secret
        if secret is not None and not signed(
            secret, entry, (blobs[n] for n in wanted), stored.get("signature")
        ):
            self.warn("unsigned", f"holds entry {key[:12]} without a valid signature")
            return None
        return entry, blobs

    def publish(self, key: str, entry: dict[str, Any], blobs: dict[str, bytes]) -> None:
        """Share an entry: its blobs first, then the entry, signed when a secret is set. The
        kernels of an entry another machine published under the same key meanwhile are kept
        (when they pass the same checks a reader makes)."""
        if not self.writable:
            return
        ours = {part: entry[part] for part in PUBLISHED if part in entry}
        ours.setdefault("binaries", {})
        entry_key = PREFIX + "entry:" + key
        for _ in range(PUBLISH_ATTEMPTS):
            before = self._call(lambda r: r.get(entry_key), _FAILED)
            if before is _FAILED:
                return
            shared, every_blob = ours, blobs
            theirs = None if before is None else self._checked(key, before)
            if theirs is not None and theirs[0]["preimage"] == ours["preimage"]:
                shared = {
                    **ours,
                    "kernels": {**theirs[0]["kernels"], **ours["kernels"]},
                    "binaries": {**theirs[0]["binaries"], **ours["binaries"]},
                }
                every_blob = {**theirs[1], **blobs}
            stored: dict[str, Any] = {"entry": shared}
            if self.settings.secret is not None:
                wanted = sorted(_blob_names(shared))
                signature = sign(self.settings.secret, shared, (every_blob[n] for n in wanted))
                stored["signature"] = signature
            data = canonical(stored)
            written = self._call(
                lambda r, before=before, data=data: _write(r, entry_key, before, blobs, data),
                _FAILED,
            )
            if written is not _RACED:
                return

    def fact(self, name: str) -> dict[str, Any] | None:
        """A fact about inputs that a process noted for others (which functions a module has,
        which versions a slangpy install is), checked like an entry; None when there is none
        or it is refused."""
        raw = self._call(lambda r: r.get(PREFIX + "fact:" + name))
        if raw is None:
            return None
        try:
            stored = json.loads(raw)
            value = stored["value"]
            if not isinstance(value, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError, KeyError) as exc:
            self.warn("garbled", f"holds a fact {name[:24]} that does not decode ({exc})")
            return None
        secret = self.settings.secret
        if secret is not None and not signed(
            secret, {"fact": name, "value": value}, (), stored.get("signature")
        ):
            self.warn("unsigned", f"holds fact {name[:24]} without a valid signature")
            return None
        return value

    def fact_names(self, prefix: str) -> list[str]:
        """Names of the facts that start with ``prefix`` (a scan: for tools)."""
        start = len(PREFIX + "fact:")
        pattern = PREFIX + "fact:" + prefix + "*"
        found = self._call(lambda r: [k.decode()[start:] for k in r.scan_iter(pattern)])
        return sorted(found or [])

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        if not self.writable:
            return
        stored: dict[str, Any] = {"value": value}
        if self.settings.secret is not None:
            stored["signature"] = sign(self.settings.secret, {"fact": name, "value": value}, ())
        self._call(lambda r: r.set(PREFIX + "fact:" + name, canonical(stored)))

    def entry_keys(self) -> list[str]:
        """Keys of the entries the server holds (a scan: for tools, not the hot path)."""
        start = len(PREFIX + "entry:")
        found = self._call(lambda r: [k.decode()[start:] for k in r.scan_iter(PREFIX + "entry:*")])
        return sorted(found or [])

    def listing(self) -> list[tuple[str, dict[str, Any] | None]]:
        """Every entry key with its shared part as stored (not yet checked against its blobs
        or signature), or None where it does not decode (a scan: for tools)."""
        out = []
        for key in self.entry_keys():
            raw = self._call(lambda r, key=key: r.get(PREFIX + "entry:" + key))
            if raw is None:
                continue
            try:
                entry = json.loads(raw)["entry"]
                shared = {part: entry[part] for part in PUBLISHED}
                _blob_names(shared)
                pre = shared["preimage"]
                if not all(isinstance(v, str) for v in (pre["module"], pre["device"]["kind"])):
                    raise TypeError("a preimage names its module and device kind")
            except (ValueError, TypeError, KeyError, AttributeError):
                shared = None
            out.append((key, shared))
        return out

    def drop_unreferenced_blobs(self, referenced: set[str]) -> int:
        """Remove the blobs no entry names; how many went."""
        if not self.writable:
            return 0
        start = len(PREFIX + "blob:")
        names = self._call(lambda r: [k.decode()[start:] for k in r.scan_iter(PREFIX + "blob:*")])
        gone = [n for n in names or [] if n not in referenced]
        if gone:
            self._call(lambda r: r.delete(*(PREFIX + "blob:" + n for n in gone)))
        return len(gone)

    def delete(self, key: str) -> None:
        """Remove an entry (its blobs stay for other entries; Redis evicts what it must)."""
        if self.writable:
            self._call(lambda r: r.delete(PREFIX + "entry:" + key))

    def stats(self) -> dict[str, Any]:
        """What the server holds for slangspec, and the memory it uses in all."""

        def count(r: Any) -> dict[str, Any]:
            kinds = {"entry": 0, "blob": 0, "fact": 0, "lease": 0}
            for k in r.scan_iter(PREFIX + "*", count=1000):
                kind = k.decode()[len(PREFIX) :].split(":", 1)[0]
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

    # -- compile leases shared by every machine --------------------------------------------

    def leased(self, name: str) -> bool:
        """Whether some process, on any machine, holds the compile lease ``name`` now."""
        return bool(self._call(lambda r: r.exists(PREFIX + "lease:" + name), 0))

    @contextlib.contextmanager
    def lease(
        self,
        name: str,
        done: Callable[[], bool],
        seconds: float,
        local: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> Iterator[None]:
        """Hold the compile lease ``name`` on the server until the block ends, renewed while
        it runs, or stop waiting once ``done()``. Waiters are woken when the holder lets go. A
        holder that dies frees it after ``seconds``. Without a usable server, ``local()``."""
        key = PREFIX + "lease:" + name
        channel = PREFIX + "landed:" + name
        token = uuid.uuid4().hex
        waiter = self._call(lambda r: _subscribed(r, channel), _FAILED)
        if waiter is _FAILED:
            with local():
                yield
            return
        ms = int(seconds * 1000)
        start = time.monotonic()
        try:
            while True:
                # The result first: waiters woken together must not take the lease in turns.
                if done():
                    yield
                    return
                taken = self._call(lambda r: r.set(key, token, nx=True, px=ms), _FAILED)
                if taken is _FAILED:
                    with local():
                        yield
                    return
                if taken:
                    break
                with contextlib.suppress(Exception):
                    waiter.get_message(timeout=min(1.0, seconds))
        finally:
            lease_waits.append(time.monotonic() - start)
            with contextlib.suppress(Exception):
                waiter.close()
        with self._holding(key, token, seconds, channel):
            yield

    @contextlib.contextmanager
    def claim(self, name: str, seconds: float) -> Iterator[bool]:
        """Try once to take the lease ``name``: within the block, True while this process holds
        it (renewed, and let go at the end) or works without a usable server; False when
        another holds it."""
        key = PREFIX + "lease:" + name
        token = uuid.uuid4().hex
        ms = int(seconds * 1000)
        taken = self._call(lambda r: r.set(key, token, nx=True, px=ms), _FAILED)
        if not taken or taken is _FAILED:
            yield taken is _FAILED
            return
        with self._holding(key, token, seconds, PREFIX + "landed:" + name):
            yield True

    @contextlib.contextmanager
    def _holding(self, key: str, token: str, seconds: float, channel: str) -> Iterator[None]:
        """Keep the lease ``key`` this process took with ``token`` for the block, then let go
        and wake its waiters."""
        stop = threading.Event()
        renewer = threading.Thread(
            target=self._renew, args=(key, token, seconds, stop), daemon=True
        )
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            self._call(lambda r: r.eval(_RELEASE, 1, key, token))
            self._call(lambda r: r.publish(channel, token))

    def _renew(self, key: str, token: str, seconds: float, stop: threading.Event) -> None:
        while not stop.wait(seconds / 3):
            self._call(lambda r: r.eval(_RENEW, 1, key, token, int(seconds * 1000)))


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


def _write(
    client: Any, entry_key: str, before: bytes | None, blobs: dict[str, bytes], data: bytes
) -> object | None:
    """Write ``blobs`` (even present ones: a damaged copy is replaced), then the entry, unless
    it changed since it read ``before``; ``_RACED`` when it did."""
    pipe = client.pipeline(transaction=False)
    for name, blob in blobs.items():
        pipe.set(PREFIX + "blob:" + name, blob)
    pipe.execute()
    with client.pipeline() as pipe:
        try:
            pipe.watch(entry_key)
            if pipe.get(entry_key) != before:
                return _RACED
            pipe.multi()
            pipe.set(entry_key, data)
            pipe.execute()
        except redis_py().WatchError:
            return _RACED
    return None


def _subscribed(client: Any, channel: str) -> Any:
    waiter = client.pubsub(ignore_subscribe_messages=True)
    waiter.subscribe(channel)
    return waiter


def _blob_names(entry: dict[str, Any]) -> set[str]:
    """``blobs_of`` for an entry read from the server, whose names may not even be strings."""
    found = blobs_of(entry)
    if not all(isinstance(n, str) for n in found):
        raise TypeError("blob names are not strings")
    return found
