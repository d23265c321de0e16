"""The few Redis commands the remote tier sends, spoken over RESP2 on a socket: TCP, TLS
(``rediss://``) or a unix socket, with the URL's user, password and database. Commands go one at
a time or pipelined on a pooled connection; a subscription waits for a message. Connecting is
bounded by a timeout and every call by a deadline, its whole reply included, and a connection
that failed is dropped.

Nothing a server sends is taken on trust: every reply is bounded (arrays ``MAX_DEPTH`` deep and
``MAX_ITEMS`` elements in all, strings ``most`` bytes in all, each length checked as it is
announced, before anything is allocated or read), and whatever breaks RESP2, a bound or the
shape its command answers with is a ``ProtocolError``.

A process that only reads the tier imports nothing else for it: a full Redis client's import
costs a fresh process more than a remote hit's whole fetch."""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from urllib.parse import parse_qsl, unquote, urlsplit

from ..define import frozen
from ..errors import Error

Arg = bytes | str | int
Reply = bytes | int | list | None

_READ_BYTES = 1 << 16
MAX_DEPTH = 4
"""How deep a reply's arrays may nest (the tier's deepest, SCAN's, nests two)."""
MAX_ITEMS = 1 << 16
"""How many elements a reply's arrays may hold in all."""
REPLY_BYTES = 1 << 20
"""How many bytes of strings a reply may carry unless its command allows more (``most``)."""
_LINE_BYTES = 1 << 16
"""The longest line a reply may send before its line end."""
_NUMBER = re.compile(rb"-?[0-9]{1,19}")
"""A length or an integer: a 64-bit signed one, as Redis sends."""
_SHOWN_ERROR_CHARS = 200
"""How much of an error reply's text a message repeats."""


class RedisError(Error):
    """A command did not complete: the server is unreachable, slow, or refused it."""


class Unreachable(RedisError):
    """The connection could not be made, or broke."""


class Slow(RedisError):
    """The server did not answer within the timeout."""


class Refused(RedisError):
    """The server answered with an error (``-ERR``, ``-OOM``, ``-NOAUTH`` and so on)."""


class ProtocolError(RedisError):
    """The server's reply is not RESP2, is past a bound, or is not of the shape its command
    answers with."""


@frozen
class Address:
    """Where a server is and how to log in, from a ``redis://``, ``rediss://`` or ``unix://``
    URL (``settings`` has checked its form)."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    db: int = 0

    @classmethod
    def of(cls, url: str) -> Address:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        if parts.scheme == "unix":
            return cls(
                path=unquote(parts.path),
                username=username,
                password=password,
                db=int(query.get("db", 0)),
            )
        db = parts.path.strip("/") or query.get("db", "0")
        return cls(
            host=parts.hostname or "localhost",
            port=parts.port or 6379,
            tls=parts.scheme == "rediss",
            username=username,
            password=password,
            db=int(db),
        )


def encode(args: Sequence[Arg]) -> bytes:
    """One command as RESP2: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n" % len(data))
        out.append(data)
        out.append(b"\r\n")
    return b"".join(out)


def connected(address: Address, connect_timeout: float) -> socket.socket:
    """A socket to the server at ``address``, TLS set up where it asks for it (Python bounds
    a TLS handshake as a whole by the socket's timeout)."""
    sock = None
    try:
        if address.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(connect_timeout)
            sock.connect(address.path)
            return sock
        sock = socket.create_connection((address.host, address.port), connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if address.tls:
            return ssl.create_default_context().wrap_socket(sock, server_hostname=address.host)
        return sock
    except OSError as exc:
        if sock is not None:
            sock.close()
        if isinstance(exc, TimeoutError):
            raise Slow(f"connecting to the server took over {connect_timeout:g} s") from exc
        raise Unreachable(f"cannot connect: {exc}") from exc


class Connection:
    """One socket to the server (see ``open``)."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        sock.settimeout(timeout)
        self.sock = sock
        self.timeout = timeout
        self._buffer = bytearray()
        self._deadline = 0.0
        self._most = self._bytes_left = self._items_left = 0

    @classmethod
    def open(cls, address: Address, connect_timeout: float, timeout: float) -> Connection:
        """A connection to the server at ``address``, logged in and on its database."""
        conn = cls(connected(address, connect_timeout), timeout)
        user = [address.username] if address.username else []
        login: list[tuple[Arg, ...]] = (
            [("AUTH", *user, address.password)] if address.password else []
        )
        if address.db:
            login.append(("SELECT", address.db))
        try:
            if login:
                conn.pipeline(login)  # within one deadline
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        # Not contextlib.suppress: a pooled connection may be closed at a process's exit, by
        # ``__del__``, after the modules' globals were cleared.
        try:  # noqa: SIM105
            self.sock.close()
        except OSError:
            pass

    def __del__(self) -> None:
        # A pooled connection goes when its client does, quietly, as at a process's exit.
        self.close()

    def call(self, *args: Arg, most: int = REPLY_BYTES) -> Reply:
        """Send one command; its reply (an error reply raised as ``Refused``), of at most
        ``most`` bytes of strings."""
        return self.pipeline([args], most)[0]

    def pipeline(self, commands: Sequence[Sequence[Arg]], most: int = REPLY_BYTES) -> list[Reply]:
        """Send every command at once; their replies in order, each of at most ``most`` bytes
        of strings, all of them within the timeout. The first error reply is raised as
        ``Refused`` once every reply has been read, so the connection stays in step."""
        self._deadline = time.monotonic() + self.timeout
        self._send(b"".join(encode(c) for c in commands))
        replies = [self._next(most) for _ in commands]
        for reply in replies:
            if isinstance(reply, Refused):
                raise reply
        return replies

    def readable(self, timeout: float) -> bool:
        """Whether a reply has begun to arrive within ``timeout`` seconds."""
        if self._buffer or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return True
        try:
            ready, _, _ = select.select([self.sock], [], [], timeout)
        except (OSError, ValueError) as exc:
            raise Unreachable(f"the connection broke: {exc}") from exc
        return bool(ready)

    def reply(self) -> Reply:
        """The next reply the server sends, whole within the timeout (an error reply raised as
        ``Refused``)."""
        self._deadline = time.monotonic() + self.timeout
        reply = self._next(REPLY_BYTES)
        if isinstance(reply, Refused):
            raise reply
        return reply

    def _left(self) -> float:
        """The seconds left to the call's deadline, set as the socket's timeout."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise Slow(f"no whole reply within {self.timeout:g} s")
        self.sock.settimeout(left)
        return left

    def _send(self, data: bytes) -> None:
        self._left()
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise Slow(f"sending took over {self.timeout:g} s") from exc
        except OSError as exc:
            raise Unreachable(f"the connection broke: {exc}") from exc

    def _received(self, into: memoryview) -> int:
        """How many bytes came into ``into``: at least one, else an error."""
        self._left()
        try:
            got = self.sock.recv_into(into)
        except TimeoutError as exc:
            raise Slow(f"no whole reply within {self.timeout:g} s") from exc
        except OSError as exc:
            raise Unreachable(f"the connection broke: {exc}") from exc
        if not got:
            raise Unreachable("the server closed the connection")
        return got

    def _more(self) -> None:
        chunk = memoryview(bytearray(_READ_BYTES))
        self._buffer += chunk[: self._received(chunk)]

    def _line(self) -> bytes:
        searched = 0
        while True:
            end = self._buffer.find(b"\r\n", searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 2]
                return line
            if len(self._buffer) > _LINE_BYTES:
                raise ProtocolError(f"a line longer than {_LINE_BYTES} bytes")
            searched = max(0, len(self._buffer) - 1)
            self._more()

    def _exactly(self, n: int) -> bytes:
        """``n`` bytes and the line end after them, read into one buffer (``n`` within the
        reply's bound: see ``_spend``)."""
        out = bytearray(n + 2)
        have = min(len(self._buffer), n + 2)
        out[:have] = self._buffer[:have]
        del self._buffer[:have]
        view = memoryview(out)
        while have < n + 2:
            have += self._received(view[have:])
        if out[n:] != b"\r\n":
            raise ProtocolError("a bulk string does not end its line")
        with view[:n] as data:
            return data.tobytes()

    def _next(self, most: int) -> Reply | Refused:
        """The next reply, of at most ``most`` bytes of strings."""
        self._most = self._bytes_left = most
        self._items_left = MAX_ITEMS
        return self._reply(0)

    def _spend(self, n: int) -> None:
        """Count ``n`` bytes of strings against the reply's bound, before they are read."""
        if n > self._bytes_left:
            raise ProtocolError(
                f"a string of {n} bytes, past the reply's bound of {self._most} bytes"
            )
        self._bytes_left -= n

    def _reply(self, depth: int) -> Reply | Refused:
        """The next reply, inside ``depth`` arrays."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            self._spend(len(rest))
            if kind == b"+":
                return rest
            return Refused(rest[:_SHOWN_ERROR_CHARS].decode(errors="replace"))
        if kind not in (b":", b"$", b"*"):
            raise ProtocolError(f"a reply of unknown kind: {line[:40]!r}")
        if not _NUMBER.fullmatch(rest):
            raise ProtocolError(f"a length or integer that is not one: {line[:40]!r}")
        n = int(rest)
        if kind == b":":
            return n
        if n < -1:
            raise ProtocolError(f"a negative length: {line[:40]!r}")
        if n == -1:
            return None
        if kind == b"$":
            self._spend(n)
            return self._exactly(n)
        if depth == MAX_DEPTH:
            raise ProtocolError(f"arrays nested past {MAX_DEPTH} deep")
        if n > self._items_left:
            raise ProtocolError(f"an array of {n} elements, past the reply's bound of {MAX_ITEMS}")
        self._items_left -= n
        return [self._reply(depth + 1) for _ in range(n)]


def _expected(reply: Reply, command: str, kind: type | tuple[type, ...], what: str) -> Reply:
    """``reply`` when it is of ``kind``; else a ``ProtocolError`` naming ``command``."""
    if isinstance(reply, kind) and not isinstance(reply, bool):
        return reply
    raise ProtocolError(f"{command} answered {type(reply).__name__}, not {what}")


def _value(reply: Reply, command: str) -> bytes | None:
    return _expected(reply, command, (bytes, type(None)), "a string or nil")  # type: ignore[return-value]


def _integer(reply: Reply, command: str) -> int:
    return _expected(reply, command, int, "an integer")  # type: ignore[return-value]


class Client:
    """Commands to one server over a pool of connections, safe to share between threads."""

    def __init__(self, url: str, connect_timeout: float, timeout: float) -> None:
        self.address = Address.of(url)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection of its own for the block: back to the pool after it, dropped when the
        block raised (its replies may be out of step). A forked child never uses its parent's:
        the two would read each other's replies."""
        if self._pid != os.getpid():
            self._idle, self._lock, self._pid = [], threading.Lock(), os.getpid()
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._idle.append(conn)

    def _connect(self) -> Connection:
        return Connection.open(self.address, self.connect_timeout, self.timeout)

    def call(self, *args: Arg, most: int = REPLY_BYTES) -> Reply:
        with self.connection() as conn:
            return conn.call(*args, most=most)

    def pipeline(self, commands: Sequence[Sequence[Arg]], most: int = REPLY_BYTES) -> list[Reply]:
        if not commands:
            return []
        with self.connection() as conn:
            return conn.pipeline(commands, most)

    def get(self, key: str, most: int = REPLY_BYTES) -> bytes | None:
        """The value of ``key``; a ``ProtocolError`` when it is past ``most`` bytes (before
        any of it is read)."""
        return _value(self.call("GET", key, most=most), "GET")

    def mget(self, keys: Sequence[str], most: int = REPLY_BYTES) -> list[bytes | None]:
        """The values of ``keys``, ``most`` bytes in all at most."""
        if not keys:
            return []
        values = self.call("MGET", *keys, most=most)
        if not isinstance(values, list) or len(values) != len(keys):
            raise ProtocolError(f"MGET of {len(keys)} keys answered other than {len(keys)} values")
        return [_value(v, "MGET") for v in values]

    def sizes(self, keys: Sequence[str]) -> list[int]:
        """The length of each key's value (0 for a key the server lacks), in one request."""
        return [_integer(n, "STRLEN") for n in self.pipeline([("STRLEN", k) for k in keys])]

    def mset(self, values: Mapping[str, bytes]) -> bool:
        args: list[Arg] = ["MSET"]
        for key, value in values.items():
            args += [key, value]
        return self.call(*args) == b"OK"

    def set(self, key: str, value: Arg, nx: bool = False, px: int | None = None) -> bool:
        """Whether the value was set (False when ``nx`` found the key there)."""
        args: list[Arg] = ["SET", key, value]
        if nx:
            args.append("NX")
        if px is not None:
            args += ["PX", px]
        return self.call(*args) == b"OK"

    def exists(self, key: str) -> int:
        return _integer(self.call("EXISTS", key), "EXISTS")

    def delete(self, *keys: str) -> int:
        return _integer(self.call("DEL", *keys), "DEL") if keys else 0

    def publish(self, channel: str, message: Arg) -> int:
        return _integer(self.call("PUBLISH", channel, message), "PUBLISH")

    def eval(self, script: str, keys: Sequence[str], *args: Arg) -> int:
        """What ``script``, which answers an integer, answers."""
        return _integer(self.call("EVAL", script, len(keys), *keys, *args), "EVAL")

    def scan_iter(self, match: str, count: int = 100) -> Iterator[str]:
        """Every key matching ``match``, in batches of about ``count``."""
        cursor = b"0"
        while True:
            reply = self.call("SCAN", cursor, "MATCH", match, "COUNT", count)
            shaped = isinstance(reply, list) and len(reply) == 2
            if not (shaped and isinstance(reply[0], bytes) and isinstance(reply[1], list)):
                raise ProtocolError("SCAN answered other than a cursor and its keys")
            cursor, keys = reply
            try:
                names = [k.decode() for k in keys]
            except (AttributeError, UnicodeDecodeError) as exc:
                raise ProtocolError(f"SCAN answered a key that is not text ({exc})") from None
            yield from names
            if cursor == b"0":
                return

    def info(self, section: str) -> dict[str, int | str]:
        """The fields of an ``INFO`` section, numbers as ints."""
        text = _value(self.call("INFO", section), "INFO")
        fields: dict[str, int | str] = {}
        for line in (text or b"").decode(errors="replace").splitlines():
            name, colon, value = line.partition(":")
            if colon and not name.startswith("#"):
                fields[name] = int(value) if _NUMBER.fullmatch(value.encode()) else value
        return fields

    def subscribe(self, channel: str) -> Subscription:
        """A connection of its own, subscribed to ``channel``."""
        conn = self._connect()
        try:
            conn.call("SUBSCRIBE", channel)
        except BaseException:
            conn.close()
            raise
        return Subscription(conn)


class Subscription:
    """A subscribed connection: ``wait`` returns when a message comes, or after a timeout."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._broken = False

    def wait(self, timeout: float) -> bool:
        """Whether a message came within ``timeout`` seconds. A broken connection waits out the
        timeout, so a caller that polls keeps its pace."""
        if self._broken:
            threading.Event().wait(timeout)
            return False
        try:
            if not self._conn.readable(timeout):
                return False
            self._conn.reply()
            return True
        except RedisError:
            self._broken = True
            return False

    def close(self) -> None:
        self._conn.close()
