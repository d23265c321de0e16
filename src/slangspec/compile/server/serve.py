"""The compile server: one process per user and cache root that keeps Slang's session, the
modules it loaded and NVRTC (its CUDA prelude precompiled) warm between the user's processes,
and builds CUDA kernels for them.

Requests are typed data (``messages``): ``describe`` a module's function, ``build``
kernels into one cubin, ``status``, ``stop``. Only a process of the server's own user is
answered (its peer credentials are checked on every connection), and work only for a request
of the server's own identity. What it keeps it writes under its own cache root, never where a
request says. While it works on a request the server sends a heartbeat every ``HEARTBEAT_S``,
so a client tells a busy server from a stopped one. A request it has not finished within
``SLANGSPEC_SERVE_DEADLINE`` is answered as failed, and the server leaves: the work cannot be
taken back from Slang or NVRTC, and a fresh server serves the next client. It exits after
``SLANGSPEC_SERVE_IDLE`` without requests, or as soon as its socket is no longer its own.

    python -m slangspec.compile.server --cache-dir DIR [--arch sm_90]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import logging
import os
import resource
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...cache_store import ModuleCacheGuard
from ...define import frozen
from ...settings import setting
from ...signatures.module_text import ModuleText
from .frames import REQUEST_LIMIT, FrameError, peer_uid, receive, send
from .messages import HEARTBEAT, Identity, ModuleSource, Reply, Request, identity
from .place import ServerPlace, server_place

HEARTBEAT_S = 0.5
REQUEST_WAIT_S = 10.0
"""A request not whole this long after its connection is dropped unanswered."""
SEND_WAIT_S = 10.0
"""A reply or heartbeat a client takes no more of for this long is dropped."""
SPARE_AFTER_S = 0.3
"""Idle this long after a request for a module that imports slangpy's library, the server
loads the library into a session for the next new module."""
EXIT_PAST_DEADLINE = 3
"""The server's exit status when it leaves work it could not finish within its deadline."""
_log = logging.getLogger("slangspec.server")


@frozen
class Places:
    """What a server builds with, of its own cache root: its identity, the toolchain it
    names, slangpy's module cache (where it keeps slangpy's library as IR and Slang's CUDA
    prelude) and where generated kernel sources lie (what Slang is told of their paths)."""

    identity: Identity
    toolchain: dict[str, Any]
    guard: ModuleCacheGuard
    kernel_dir: Path


def places(cache_root: Path) -> Places:
    """The places of the cache at ``cache_root``, as a process building there has them."""
    from ...cache_store import CacheStore
    from ..toolchain_identity import toolchain

    cache = CacheStore(cache_root)
    chain = toolchain(cache)
    return Places(identity(chain), chain, cache.module_cache_guard(chain), cache.files.kernel_dir)


class CompileServer:
    def __init__(self, place: ServerPlace, own: Places, idle_s: float, deadline_s: float) -> None:
        self.place = place
        self.own = own
        self.idle_s = idle_s
        self.deadline_s = deadline_s
        self.started = time.time()
        self.last_request = time.monotonic()
        self.requests = 0
        self.refused = 0
        self.built: dict[str, int] = {}
        self.active = 0
        self.stopping = False
        self.socket_id = 0
        self._spare_for: Request | None = None
        self._work = threading.Lock()  # Slang's session and NVRTC take one request at a time
        self._count = threading.Lock()

    # -- the listening loop --------------------------------------------------------------------

    def serve(self, listener: socket.socket) -> None:
        self.socket_id = os.stat(self.place.socket).st_ino
        listener.settimeout(0.25)
        while not self.stopping:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                pass
            else:
                threading.Thread(target=self._connection, args=(conn,), daemon=True).start()
            if self._should_leave():
                break
            self._spare_when_idle()
        self._release_socket()

    def _release_socket(self) -> None:
        with contextlib.suppress(OSError):
            if os.stat(self.place.socket).st_ino == self.socket_id:
                self.place.socket.unlink()

    def _should_leave(self) -> bool:
        try:
            if os.stat(self.place.socket).st_ino != self.socket_id:
                _log.info("the socket was removed or replaced: leaving")
                return True
        except OSError:
            _log.info("the socket was removed: leaving")
            return True
        idle = time.monotonic() - self.last_request
        return self.active == 0 and idle > self.idle_s

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            uid = peer_uid(conn)
            if uid != os.getuid():
                self.refused += 1
                _log.warning("refused a connection from user %d", uid)
                return
            try:
                message = receive(conn, REQUEST_LIMIT, time.monotonic() + REQUEST_WAIT_S)
            except (FrameError, OSError) as exc:
                _log.warning("an unreadable request: %s", exc)
                return
            conn.settimeout(SEND_WAIT_S)
            with self._count:
                self.requests += 1
            try:
                request = Request.from_json(message)
            except FrameError as exc:
                _log.warning("refused a request: %s", exc)
                reply = Reply(False, self.own.identity, {}, f"refused: {exc}")
            else:
                reply = self._answer(conn, request)
            with contextlib.suppress(OSError):
                send(conn, reply.to_json())

    def _spare_when_idle(self) -> None:
        request = self._spare_for
        if request is None or self.active or time.monotonic() - self.last_request < SPARE_AFTER_S:
            return
        self._spare_for = None
        from ..cuda.source import make_spare

        def spare() -> None:
            assert request.module is not None  # only a request for work is kept for this
            _, paths, library = _module(request.module, self.own)
            if library is not None:
                make_spare(paths, request.module.defines, library)

        with self._work:
            done = _Bounded(spare, self.deadline_s)
        if done.running:
            self._leave("a session for the next module", None)
        if done.error is not None:  # the next module makes its session as it would have
            _log.info("no spare session: %s: %s", type(done.error).__name__, done.error)

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        with self._count:
            self.active += 1
        try:
            yield
        finally:
            with self._count:
                self.active -= 1
                self.last_request = time.monotonic()

    # -- requests ------------------------------------------------------------------------------

    def _answer(self, conn: socket.socket, request: Request) -> Reply:
        own = self.own.identity
        if request.op == "status":
            return Reply(True, own, self.status())
        if request.op == "stop":
            self.stopping = True
            return Reply(True, own, {})
        if request.identity != own:
            _log.warning("refused a request of another install: %s", request.identity)
            return Reply(False, own, {}, "refused: the request is of another install")
        problem = _unreadable(request)
        if problem is not None:
            _log.warning("refused a request: %s", problem)
            return Reply(False, own, {}, f"refused: {problem}")
        work = {"describe": _describe, "build": _build}[request.op]
        module = request.module
        assert module is not None  # Request.from_json gives every request for work one
        with self._counted():
            with _heartbeat(conn):
                self._work.acquire()  # held for good by work past its deadline: see _leave
                done = _Bounded(lambda: work(module, request, self.own), self.deadline_s)
            if done.running:
                self._leave(f"{request.op} of module {module.name}", conn)
            self._work.release()
        if done.error is not None:  # the client compiles in-process, where the error is its own
            exc = done.error
            _log.info("%s failed: %s: %s", request.op, type(exc).__name__, exc)
            from ..slang.api import SlangCompileError

            # Slang's diagnostics, which the client raises where they name its own sources.
            diagnostics = exc.diagnostics if isinstance(exc, SlangCompileError) else ""
            return Reply(False, own, {}, f"{type(exc).__name__}: {exc}", diagnostics=diagnostics)
        self.built[request.op] = self.built.get(request.op, 0) + 1
        _log.info("%s of module %s: %.3f s", request.op, module.name, done.seconds)
        if module.library:
            self._spare_for = request
        return Reply(True, own, {**done.result, "server_s": done.seconds})

    def _leave(self, what: str, conn: socket.socket | None) -> None:
        """Leave at once, the work on ``what`` still running past the deadline: no new client
        finds this server, the one waiting (on ``conn``) is answered that it failed, and the
        process exits with the work, which nothing else could stop."""
        why = f"{what} not done within SLANGSPEC_SERVE_DEADLINE ({self.deadline_s:g} s)"
        _log.error("%s: leaving", why)
        self._release_socket()
        if conn is not None:
            with contextlib.suppress(OSError):
                send(conn, Reply(False, self.own.identity, {}, why, leaving=True).to_json())
        os._exit(EXIT_PAST_DEADLINE)

    def status(self) -> dict[str, Any]:
        from ..cuda import nvrtc
        from ..cuda import source as cuda_source

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started, 1),
            "requests": self.requests,
            "refused": self.refused,
            "done": dict(self.built),
            "modules_held": len(cuda_source.held_modules()),
            "spare_sessions": cuda_source.spare_sessions(),
            "prelude_precompiled_for": sorted(nvrtc.precompiled_archs()),
            "memory_bytes": _resident_bytes(),
            "peak_memory_bytes": usage.ru_maxrss * 1024,
            "idle_exit_s": self.idle_s,
            "deadline_s": self.deadline_s,
        }


class _Bounded:
    """``work()`` run on a thread of its own for at most ``deadline_s``: what it returned or
    raised, how long it took, or that it is still ``running``."""

    def __init__(self, work: Callable[[], Any], deadline_s: float) -> None:
        self.result: Any = None
        self.error: Exception | None = None
        self.seconds = 0.0
        done = threading.Event()

        def run() -> None:
            start = time.perf_counter()
            try:
                self.result = work()
            except Exception as exc:
                self.error = exc
            self.seconds = time.perf_counter() - start
            done.set()

        threading.Thread(target=run, name="slangspec-request", daemon=True).start()
        self.running = not done.wait(deadline_s)


@contextlib.contextmanager
def _heartbeat(conn: socket.socket) -> Iterator[None]:
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            try:
                send(conn, HEARTBEAT)
            except OSError:
                return

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _unreadable(request: Request) -> str | None:
    """Why the server will not read what ``request`` names: an include path that is not a
    directory its user may read; None when it may."""
    paths = request.module.include_paths if request.module is not None else ()
    for path in paths:
        if not os.path.isdir(path) or not os.access(path, os.R_OK | os.X_OK):
            return f"include path {path!r} is not a directory this user may read"
    return None


def _module(m: ModuleSource, own: Places) -> tuple[ModuleText, list[Path], Path | None]:
    """The module ``m`` as Slang takes it, its include paths, and slangpy's library as IR
    for it from the server's own module cache (made there if missing) when it imports it."""
    from ..cuda.build import library_dir

    library = library_dir(own.guard, own.toolchain, m.defines) if m.library else None
    return ModuleText(m.name, Path(m.path), m.text), [Path(p) for p in m.include_paths], library


def _describe(m: ModuleSource, request: Request, own: Places) -> dict[str, Any]:
    from ...specializer.reflect import function_overloads, has_function
    from ..cuda.source import front_end

    module, paths, library = _module(m, own)
    fe = front_end(module, paths, m.defines, None, library, m.content)
    if not has_function(fe, request.function):
        return {"overloads": False}
    found = function_overloads(fe, module.name, request.function, module.text)
    return {"overloads": [info.to_json() for info in found]}


def _build(m: ModuleSource, request: Request, own: Places) -> dict[str, Any]:
    from ..cuda import nvrtc
    from ..cuda.build import build, prelude_path, stored_prelude
    from ..cuda.source import KernelSource

    module, paths, library = _module(m, own)
    prelude = prelude_path(own.guard, own.toolchain)
    nvrtc.warm_up(request.arch, stored_prelude(prelude))
    place = own.kernel_dir
    kernels = [KernelSource(k.name, k.source, place / f"{k.name}.slang") for k in request.kernels]
    built = build(module, kernels, paths, m.defines, request.arch, library, m.content, prelude)
    return {
        "kernels": {
            name: {
                "cubin": base64.b64encode(b.cubin).decode(),
                "entry": b.entry,
                "layout": b.layout,
                "group": b.group,
            }
            for name, b in built.items()
        }
    }


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run(cache_root: Path, arch: str | None = None) -> bool:
    """Serve ``cache_root`` until idle or stopped; False at once when another server holds
    the root already (two clients starting one at once get one)."""
    place = server_place(cache_root)
    with open(place.lock, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        with contextlib.suppress(FileNotFoundError):
            place.socket.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with listener:
            old = os.umask(0o077)
            try:
                listener.bind(str(place.socket))
            finally:
                os.umask(old)
            listener.listen(64)
            idle, deadline = setting("SLANGSPEC_SERVE_IDLE"), setting("SLANGSPEC_SERVE_DEADLINE")
            server = CompileServer(place, places(cache_root), idle, deadline)
            _log.info("serving %s at %s (pid %d)", cache_root, place.socket, os.getpid())
            _start(arch)
            server.serve(listener)
    _log.info("left after %d requests", server.requests)
    return True


def _start(arch: str | None) -> None:
    """Start what every request needs, before the first one comes: Slang's global session and,
    for ``arch``, NVRTC."""
    from ..cuda import nvrtc
    from ..slang.api import global_session

    global_session()
    if arch is not None:
        nvrtc.warm_up(arch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slangspec.compile.server")
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--arch")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(message)s", stream=sys.stderr
    )
    run(args.cache_dir, args.arch)
    return 0
