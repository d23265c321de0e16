"""Asking the user's compile server of a cache root (``server``) to describe a function or
build kernels, and starting it.

Every failure of the server costs a client at most ``REPLY_WAIT_S`` of silence and then an
in-process compile: a server that is gone, stopped, answering garbage or another user's, that
runs another install (its identity is not the client's) or that left after failing a request
past its deadline is never asked again by this process (one that is merely absent is started,
once). Each message must come whole within ``REPLY_WAIT_S`` of the last, however its bytes
trickle in. One that keeps working on a request (its heartbeats come, its reply does not) is
waited on as long as a compile lease holds, ``SLANGSPEC_CACHE_LEASE``, and then given up the
same way.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...errors import Error
from ...settings import setting
from ..toolchain_identity import toolchain
from .frames import REPLY_LIMIT, FrameError, peer_uid, receive, send
from .messages import HEARTBEAT, Reply, Request, identity
from .place import ServerPlace, UnsafePlace, server_place

CONNECT_WAIT_S = 0.5
REPLY_WAIT_S = 2.0
"""Silence past this, with neither a whole reply nor a whole heartbeat, and the server is taken
as gone."""

_log = logging.getLogger("slangspec.server")
_given_up: set[Path] = set()
_started: set[Path] = set()
fallback_waits: list[float] = []
"""Seconds each request spent on a server that was not there or failed it, before this
process compiled itself, for benchmarks."""


class NotTheUsersServer(Error):
    """The process listening at the server's socket runs as another user."""


def ask(cache_root: Path, request: Request, arch: str) -> dict[str, Any] | None:
    """What the server replied to ``request`` (its ``body``), or None when this process
    compiles itself: the setting is off, no server runs (under ``auto`` one is started for later
    processes), it failed, runs another install, or could not do what was asked.
    ``SlangCompileError`` with the server's diagnostics where Slang refused the sources."""
    mode = setting("SLANGSPEC_COMPILE_SERVER")
    root = Path(cache_root)
    if mode == "off" or root in _given_up or root in _started:
        return None  # a server this process started is still starting: it is for later ones
    try:
        place = server_place(root)
    except (UnsafePlace, OSError) as exc:
        return give_up(root, f"no safe place for it: {exc}")
    asked = time.monotonic()
    try:
        reply = exchange(place, request)
    except (FileNotFoundError, ConnectionRefusedError):
        fallback_waits.append(time.monotonic() - asked)
        if mode == "auto":
            start(root, arch, place)
        return None
    except (OSError, FrameError, NotTheUsersServer) as exc:
        fallback_waits.append(time.monotonic() - asked)
        return give_up(root, f"{type(exc).__name__}: {exc}")
    if reply.identity != request.identity:
        fallback_waits.append(time.monotonic() - asked)
        unlike = _unlike(reply.identity, request.identity)
        return give_up(root, f"it runs another install ({unlike})")
    if reply.leaving:
        fallback_waits.append(time.monotonic() - asked)
        return give_up(root, f"it failed {request.op} and left: {reply.error}")
    if not reply.ok:
        if reply.diagnostics:
            from ..slang.api import SlangCompileError

            raise SlangCompileError(reply.diagnostics)
        _log.info("compile server could not %s: %s", request.op, reply.error)
        return None
    return reply.body


def _unlike(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """What differs between two identities, in a few words."""
    if theirs.get("protocol") != ours.get("protocol"):
        return f"messages of version {theirs.get('protocol')}, not {ours.get('protocol')}"
    mine, other = ours.get("toolchain", {}), theirs.get("toolchain", {})
    if not isinstance(other, dict):
        return "a toolchain that is not one"
    names = sorted(n for n in {*mine, *other} if mine.get(n) != other.get(n))
    return ", ".join(f"{n} {other.get(n)!r}, not {mine.get(n)!r}" for n in names)


def give_up(root: Path, why: str) -> None:
    """Ask the server of ``root`` nothing more in this process, saying why."""
    _given_up.add(root)
    _log.warning("compile server of %s not used by this process: %s", root, why)
    return None


def exchange(place: ServerPlace, request: Request) -> Reply:
    """Send ``request`` to the server at ``place``; its reply, past its heartbeats, each whole
    within ``REPLY_WAIT_S`` of the one before and all within ``SLANGSPEC_CACHE_LEASE``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_WAIT_S)
        sock.connect(str(place.socket))
        uid = peer_uid(sock)
        if uid != os.getuid():
            raise NotTheUsersServer(f"the socket's server runs as user {uid}")
        sock.settimeout(REPLY_WAIT_S)
        send(sock, request.to_json())
        busy_until = time.monotonic() + setting("SLANGSPEC_CACHE_LEASE")
        while True:
            now = time.monotonic()
            if now >= busy_until:
                raise TimeoutError("the server worked on one request past SLANGSPEC_CACHE_LEASE")
            message = receive(sock, REPLY_LIMIT, min(now + REPLY_WAIT_S, busy_until))
            if message != HEARTBEAT:
                return Reply.from_json(message)


PACKAGE_PARENT = Path(__file__).absolute().parents[3]
"""The directory this slangspec was imported from."""
_NEEDED = ("slangpy", "xxhash", "diskcache", "platformdirs", "numpy", "torch")
"""The packages a server imports beside slangspec."""
_START = (
    "import os, sys; sys.path[0:0] = sys.argv.pop(1).split(os.pathsep); "
    "from slangspec.compile.server.serve import main; sys.exit(main())"
)


def server_path() -> list[str]:
    """Where a server this process starts looks for its code before the interpreter's own
    places: this slangspec's directory, then each directory this process takes a package the
    server needs from (an install by ``--target`` or ``PYTHONPATH`` included), never the
    working directory."""
    found = [str(PACKAGE_PARENT)]
    here = {"", os.getcwd()}
    for name in _NEEDED:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin is None:
            spec = importlib.util.find_spec(name) if module is None else None
            origin = spec.origin if spec is not None else None
        if not origin:
            continue
        where = Path(origin).parent
        if where.name == name:  # a package: its directory's parent holds it
            where = where.parent
        if str(where) not in here and str(where) not in found:
            found.append(str(where))
    return found


def start(cache_root: Path, arch: str | None, place: ServerPlace) -> None:
    """Start the server of ``cache_root`` detached from this process (once per process: when
    another is starting one too, one of them serves and the other leaves at once).

    It outlives this process, so it takes nothing of where or how this one runs: Python
    isolated (``-I``: no working or script directory, no ``PYTHON*`` variables and no user
    site on its path), in ``/``, with ``server_path()`` first on its path."""
    if cache_root in _started:
        return
    _started.add(cache_root)
    command = [sys.executable, "-I", "-c", _START, os.pathsep.join(server_path())]
    command += ["--cache-dir", str(Path(cache_root).absolute())]
    if arch is not None:
        command += ["--arch", arch]
    try:
        _rotated(place.log)
        with open(place.log, "ab") as log:
            subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd="/",
                start_new_session=True,
            )
    except OSError as exc:
        give_up(cache_root, f"it could not be started: {exc}")
        return
    _log.info("started the compile server of %s", cache_root)


LOG_BYTES = 1 << 20
"""A server's log past this size is kept as ``HASH.log.1`` (replacing the one before it) when
the next server starts: a line a request, and servers that start again and again, would
otherwise grow it without end."""


def _rotated(log: Path) -> None:
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))


def status(cache_root: Path) -> dict[str, Any] | None:
    """What the server of ``cache_root`` reports of itself, with its ``identity`` (the status
    of a server of another install too); None when none answers."""
    try:
        reply = exchange(server_place(cache_root), Request("status", _identity()))
    except (OSError, FrameError, NotTheUsersServer, UnsafePlace):
        return None
    return {**reply.body, "identity": reply.identity} if reply.ok else None


def stop(cache_root: Path) -> bool:
    """Ask the server of ``cache_root`` to leave (one of another install too); whether one was
    there to ask."""
    try:
        return exchange(server_place(cache_root), Request("stop", _identity())).ok
    except (OSError, FrameError, NotTheUsersServer, UnsafePlace):
        return False


def _identity() -> dict[str, Any]:
    return identity(toolchain())
