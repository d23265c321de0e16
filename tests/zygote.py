"""Fresh processes for the tests without paying for ``import torch`` in each.

    python tests/zygote.py SOCKET

The server (this file run as a script) imports torch, then forks one child per request on the
Unix socket ``SOCKET``: the child takes the request's standard streams (passed as descriptors),
environment, working directory and ``argv``, runs ``argv[0]`` as ``__main__`` (for ``-c``, the
code after it) and exits as that script would. Nothing else is imported first, slangspec and
slangpy included, and the server opens no device and starts no thread, so a child is the process
the script would be, less torch's import (about 1.4 s of a cache-test worker's 2.8 s on the CPU
machine). One server serves a test run's pytest workers.

``Forked`` is a client's handle on a child, the part of ``subprocess.Popen`` the tests use;
``Zygote`` starts the server where none answers.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_REQUEST_BYTES = 1 << 20


class Forked:
    """A child of a zygote: ``pid``, ``returncode``, ``poll``, ``wait`` and ``communicate`` as
    ``subprocess.Popen`` has them (text streams)."""

    def __init__(self, path: Path, argv: list[str], env: dict[str, str]) -> None:
        self.args = argv
        self.returncode: int | None = None
        self._readers: list[threading.Thread] = []
        self._texts: dict[str, str] = {}
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(str(path))
        except OSError:
            self._conn.close()
            raise
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            request = {"argv": argv, "env": env, "cwd": os.getcwd()}
            socket.send_fds(self._conn, [json.dumps(request).encode()], [null, out_w, err_w])
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        self.stdout = os.fdopen(out_r, encoding="utf-8", errors="replace")
        self.stderr = os.fdopen(err_r, encoding="utf-8", errors="replace")
        self._replies = self._conn.makefile("r", encoding="utf-8")
        self.pid: int = json.loads(self._replies.readline())["pid"]

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read_exit()
        assert self.returncode is not None
        return self.returncode

    def _read_exit(self) -> None:
        line = self._replies.readline()
        self.returncode = json.loads(line)["code"] if line else -signal.SIGKILL
        self._conn.close()

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        if not self._readers:  # a call after one that timed out goes on reading
            for name, stream in (("out", self.stdout), ("err", self.stderr)):
                read = functools.partial(self._texts.__setitem__, name)
                reader = threading.Thread(target=lambda r=read, s=stream: r(s.read()), daemon=True)
                reader.start()
                self._readers.append(reader)
        start = time.monotonic()

        def left() -> float | None:
            return None if timeout is None else max(0.0, timeout - (time.monotonic() - start))

        for reader in self._readers:
            reader.join(left())
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(left())
        return self._texts["out"], self._texts["err"]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The zygote server at ``directory``, shared by the processes that name the same one
    (pytest's workers of one run): the first to need it starts it, and whoever finds it gone
    starts it again. It stops once the process that started it is gone and its children have
    all exited."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "zygote.sock"
        self._lock = directory / "start.lock"
        self._servers: list[subprocess.Popen] = []  # each stops when its Popen's stdin closes
        directory.mkdir(parents=True, exist_ok=True)

    def fork(self, argv: list[str], env: dict[str, str]) -> Forked:
        try:
            return Forked(self.path, argv, env)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        with open(self._lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return Forked(self.path, argv, env)
            except (FileNotFoundError, ConnectionRefusedError):
                self._start()
        return Forked(self.path, argv, env)

    def _start(self) -> None:
        self.path.unlink(missing_ok=True)
        server = subprocess.Popen(
            [sys.executable, __file__, str(self.path)],
            stdin=subprocess.PIPE,  # closed when this process is gone: the server then stops
            stdout=subprocess.DEVNULL,
        )
        self._servers.append(server)
        deadline = time.monotonic() + 120
        while not self.path.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the zygote at {self.path} did not start")
            time.sleep(0.02)


def _serve(path: str) -> dict:
    """Fork a child per request until the client's end of standard input closes; in a child,
    return its request."""
    import torch  # noqa: F401  the import every child would otherwise pay for

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".part")
    os.rename(path + ".part", path)
    listener.listen(64)
    waiting: dict[int, socket.socket] = {}

    def reap(*_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = waiting.pop(pid, None)
            if conn is not None:
                reply = {"code": os.waitstatus_to_exitcode(status)}
                conn.sendall(json.dumps(reply).encode() + b"\n")
                conn.close()

    signal.signal(signal.SIGCHLD, reap)
    watched: list[Any] = [listener, sys.stdin]
    while True:
        # Once its starter is gone it takes no new child, and goes when the last has exited.
        if not watched and not waiting:
            os._exit(0)
        ready = select.select(watched, [], [], 0.1 if not watched else None)[0]
        if sys.stdin in ready:
            watched = []
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            continue
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, _REQUEST_BYTES, 3)
        request = json.loads(message)
        # A child that exits at once is reaped only after it is known.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            listener.close()
            conn.close()
            for conn in waiting.values():
                conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return request
        for fd in fds:
            os.close(fd)
        waiting[pid] = conn
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])


def _become(request: dict) -> None:
    """Be the process ``request`` asks for: its environment, directory, ``argv`` and script
    (its standard streams are already descriptors 0-2, which ``sys`` writes to)."""
    import runpy

    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = list(request["argv"])
    if argv[0] == "-c":  # as ``python -c CODE ARGS`` runs CODE
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        return
    sys.argv = argv
    sys.path[0] = str(Path(sys.argv[0]).resolve().parent)
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    _become(_serve(sys.argv[1]))
