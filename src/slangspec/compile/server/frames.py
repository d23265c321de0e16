"""Messages between the compile server and its clients: JSON objects, each sent as a 4-byte
length and that many bytes, refused past a size bound or when not whole by a deadline; and who
is at the other end of a Unix socket."""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from ...errors import Error

_HEADER = struct.Struct("!I")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid

REQUEST_LIMIT = 16 << 20
"""The largest request a server reads: module and kernel sources."""
REPLY_LIMIT = 256 << 20
"""The largest reply a client reads: a specialization's cubin, as base64."""


class FrameError(Error):
    """A message that is cut short, too large, not a JSON object, or not one of the messages
    the other end may send (``messages``)."""


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def receive(sock: socket.socket, limit: int, deadline: float) -> dict[str, Any]:
    """The next message, whole by ``deadline`` (a ``time.monotonic()``) or TimeoutError, however
    its bytes trickle in; FrameError for one past ``limit`` bytes or not an object, and for a
    connection closed before a whole message."""
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size, deadline))
    if size > limit:
        raise FrameError(f"a message of {size} bytes, over the bound of {limit}")
    try:
        message = json.loads(_exactly(sock, size, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"expected a JSON object, got {type(message).__name__}")
    return message


def _exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    parts = []
    while size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("a message not whole by its deadline")
        sock.settimeout(left)
        part = sock.recv(min(size, 1 << 20))
        if not part:
            raise FrameError("the connection closed mid-message")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a connected Unix socket, as the kernel
    recorded it when the connection was made."""
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return _CREDENTIALS.unpack(data)[1]
