"""A hostile Redis server for the remote tier's tests and the torture benchmark: it speaks just
enough RESP2 to be connected to and logged in to, then answers every command the way the
connection's user name asks (``url(behaviour)``): replies nested deeper than any command's,
lengths of 10^14 bytes, 4*10^9 bytes or 4*10^9 elements, a value of 100 MB or a line that never
ends (each streamed as it is read, never held), a reply trickled a byte every 0.3 s, and garbage.

Run as a script it serves until killed, on a free loopback port it prints, so that a test's
process measures only its own memory and time. Every stream stops after ``STREAM_S``, so a
client that reads everything it is sent still ends."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

STREAM_S = 10.0
"""How long the server keeps sending one reply, or waits on a client that reads nothing."""
TRICKLE_S = 0.3
"""The pause between the bytes of a trickled reply."""
_CHUNK = 1 << 16


def _repeat(head: bytes, piece: bytes, total: int, tail: bytes = b"") -> Iterator[bytes]:
    """``head``, then ``piece`` repeated ``total`` times in all, in chunks of about 64 KiB,
    then ``tail``."""
    yield head
    per_chunk = max(1, _CHUNK // len(piece))
    chunk = piece * per_chunk
    sent = 0
    while sent < total:
        n = min(per_chunk, total - sent)
        yield chunk if n == per_chunk else piece * n
        sent += n
    yield tail


def _trickle(reply: bytes) -> Iterator[bytes]:
    for i in range(len(reply)):
        time.sleep(TRICKLE_S)
        yield reply[i : i + 1]


BEHAVIOURS: dict[str, Callable[[], Iterator[bytes]]] = {
    "nested": lambda: _repeat(b"", b"*1\r\n", 100_000),
    "length-1e14": lambda: iter([b"$100000000000000\r\n"]),
    "length-4e9": lambda: iter([b"$4000000000\r\n"]),
    "value-100MB": lambda: _repeat(b"$104857600\r\n", b"x", 104_857_600, b"\r\n"),
    "elements-4e9": lambda: _repeat(b"*4000000000\r\n", b":1\r\n", 4_000_000_000),
    "endless-line": lambda: _repeat(b"+", b"x", 1 << 40),
    "trickle": lambda: _trickle(b'$20\r\n{"value": {"a": 1}} \r\n'),
    "negative-length": lambda: iter([b"$-5\r\n"]),
    "array-for-a-value": lambda: iter([b"*1\r\n$2\r\n{}\r\n"]),
    "unknown-kind": lambda: iter([b"?what\r\n"]),
    "keys-not-text": lambda: iter([b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\n\xff\r\n"]),
}
"""What the server answers every command with but ``AUTH``, by the user name logged in as."""


def url(port: int, behaviour: str) -> str:
    """The URL that logs in to the server on ``port`` as ``behaviour``."""
    return f"redis://{behaviour}:pw@127.0.0.1:{port}/0"


def _command(conn: socket.socket, pending: bytearray) -> list[bytes] | None:
    """The next command the client sends (an array of bulk strings); None once it closed."""

    def line() -> bytes | None:
        while b"\r\n" not in pending:
            got = conn.recv(_CHUNK)
            if not got:
                return None
            pending.extend(got)
        end = pending.index(b"\r\n")
        text = bytes(pending[:end])
        del pending[: end + 2]
        return text

    head = line()
    if head is None or not head.startswith(b"*"):
        return None
    args = []
    for _ in range(int(head[1:])):
        size = line()
        if size is None:
            return None
        n = int(size[1:])
        while len(pending) < n + 2:
            got = conn.recv(_CHUNK)
            if not got:
                return None
            pending.extend(got)
        args.append(bytes(pending[:n]))
        del pending[: n + 2]
    return args


def _serve(conn: socket.socket) -> None:
    with conn:
        conn.settimeout(STREAM_S)
        pending = bytearray()
        behaviour = None
        try:
            while (command := _command(conn, pending)) is not None:
                if command[0].upper() == b"AUTH":
                    behaviour = command[1].decode()
                    conn.sendall(b"+OK\r\n")
                    continue
                stop = time.monotonic() + STREAM_S
                for piece in BEHAVIOURS[behaviour]():  # type: ignore[index]
                    conn.sendall(piece)
                    if time.monotonic() > stop:
                        return
                # Then nothing: the client waits, or gives up and closes.
                conn.recv(_CHUNK)
                return
        except OSError:
            return  # the client hung up mid-reply, or never read


def serve(listener: socket.socket) -> None:
    """Answer every connection to ``listener``, each in a thread, until the process ends."""
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


class HostileRedis:
    """The server in a process of its own: ``url(behaviour)`` names it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__))], stdout=subprocess.PIPE, text=True
        )
        self.port = int(self.process.stdout.readline())  # type: ignore[union-attr]

    def url(self, behaviour: str) -> str:
        return url(self.port, behaviour)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()  # type: ignore[union-attr]


if __name__ == "__main__":
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print(server.getsockname()[1], flush=True)
    serve(server)
