"""Compile servers for the server tests and the torture benchmark: a real one started in the
foreground, the ones a runtime directory holds, and a fake one at the socket that answers
every request with bytes given, or trickles them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from slangspec.compile.server import client as server_client


def serving(cache: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A server of ``cache`` in the foreground, run with ``env`` and logging to ``log``, once
    it answers (this process must name the same runtime directory as ``env``)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slangspec.compile.server", "--cache-dir", str(cache)],
            stdout=out,
            stderr=out,
            env=env,
        )
    deadline = time.monotonic() + 60
    while server_client.status(cache) is None:
        assert proc.poll() is None, "the server left before it answered"
        assert time.monotonic() < deadline, "the server never answered"
        time.sleep(0.1)
    return proc


def servers(run_dir: Path) -> list[int]:
    """The pids of the compile servers whose environment names ``run_dir``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"slangspec.compile.server" in command and str(run_dir).encode() in environ:
            found.append(int(proc.name))
    return found


def frame(message: object) -> bytes:
    """``message`` as the server sends it: a 4-byte length, then its JSON."""
    data = json.dumps(message).encode()
    return len(data).to_bytes(4, "big") + data


def framed(conn: socket.socket) -> dict:
    """One framed message, read whole."""
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return json.loads(data[4:] or b"{}")


TRICKLED = frame({"ok": True, "body": {"padding": "x" * 4096}})
"""What a trickling server sends, a byte at a time: over an hour at a byte a second."""


class FakeServer:
    """A listener at ``path`` that reads each request and answers ``reply``, bytes as given,
    until closed; with ``answer``, what it returns for the request, framed; with ``beating``
    it sends a heartbeat every half second instead, and never a reply; with ``trickle``, one
    byte of ``TRICKLED`` every ``trickle`` seconds. Each request it read is in ``requests``."""

    def __init__(
        self,
        path: Path,
        reply: bytes = b"",
        beating: bool = False,
        answer: Callable[[dict], object] | None = None,
        trickle: float = 0.0,
    ) -> None:
        self.reply = reply
        self.answer = answer
        self.beating = beating
        self.trickle = trickle
        self.requests: list[dict] = []
        self.closed = threading.Event()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.listener.settimeout(0.1)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = framed(conn)
                self.requests.append(request)
                if self.answer is not None:
                    conn.sendall(frame(self.answer(request)))
                elif self.trickle:
                    for byte in TRICKLED:
                        if self.closed.wait(self.trickle):
                            break
                        conn.sendall(bytes([byte]))
                elif not self.beating:
                    conn.sendall(self.reply)
                while self.beating and not self.closed.wait(0.5):
                    conn.sendall(frame({"working": True}))
            except OSError:
                pass

    def close(self) -> None:
        self.closed.set()
        self.thread.join()
        self.listener.close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
