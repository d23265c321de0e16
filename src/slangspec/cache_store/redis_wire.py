"""The few Redis commands the remote tier sends, spoken over RESP2 on a socket: TCP, TLS
(``rediss://``) or a unix socket, with the URL's user, password and database. Commands go one at
a time or pipelined on a pooled connection; a subscription waits for a message. Connecting and
every read and write are bounded by timeouts, and a connection that failed is dropped.

A process that only reads the tier imports nothing else for it: a full Redis client's import
costs a fresh process more than a remote hit's whole fetch."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from ..frozen import frozen

Arg = bytes | str | int
Reply = bytes | int | list | None

_READ_BYTES = 1 << 16


class RedisError(Exception):
    """A command did not complete: the server is unreachable, slow, or refused it."""


class Unreachable(RedisError):
    """The connection could not be made, or broke."""


class Slow(RedisError):
    """The server did not answer within the timeout."""


class Refused(RedisError):
    """The server answered with an error (``-ERR``, ``-OOM``, ``-NOAUTH`` and so on)."""


class ProtocolError(RedisError):
    """The server's reply is not RESP2."""


@frozen
class Address:
    """Where a server is and how to log in, from a ``redis://``, ``rediss://`` or ``unix://``
    URL (``settings`` has checked its form)."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None
    tls: bool = False
    username: str | None = None
    password: str | None = None
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
    """A socket to the server at ``address``, TLS set up where it asks for it."""
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

    @classmethod
    def open(cls, address: Address, connect_timeout: float, timeout: float) -> Connection:
        """A connection to the server at ``address``, logged in and on its database."""
        conn = cls(connected(address, connect_timeout), timeout)
        try:
            if address.password:
                user = [address.username] if address.username else []
                conn.call("AUTH", *user, address.password)
            if address.db:
                conn.call("SELECT", address.db)
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

    def call(self, *args: Arg) -> Reply:
        """Send one command; its reply (an error reply raised as ``Refused``)."""
        return self.pipeline([args])[0]

    def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Reply]:
        """Send every command at once; their replies in order. The first error reply is raised
        as ``Refused`` once every reply has been read, so the connection stays in step."""
        self._send(b"".join(encode(c) for c in commands))
        replies = [self._reply() for _ in commands]
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
        """The next reply the server sends (an error reply raised as ``Refused``)."""
        reply = self._reply()
        if isinstance(reply, Refused):
            raise reply
        return reply

    def _send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise Slow(f"sending took over {self.timeout:g} s") from exc
        except OSError as exc:
            raise Unreachable(f"the connection broke: {exc}") from exc

    def _received(self, into: memoryview) -> int:
        """How many bytes came into ``into``: at least one, else an error."""
        try:
            got = self.sock.recv_into(into)
        except TimeoutError as exc:
            raise Slow(f"no reply within {self.timeout:g} s") from exc
        except OSError as exc:
            raise Unreachable(f"the connection broke: {exc}") from exc
        if not got:
            raise Unreachable("the server closed the connection")
        return got

    def _more(self) -> None:
        chunk = memoryview(bytearray(_READ_BYTES))
        self._buffer += chunk[: self._received(chunk)]

    def _line(self) -> bytes:
        while True:
            end = self._buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 2]
                return line
            self._more()

    def _exactly(self, n: int) -> bytes:
        """``n`` bytes and the line end after them, read into one buffer."""
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

    def _reply(self) -> Reply | Refused:
        line = self._line()
        kind, rest = line[:1], line[1:]
        try:
            if kind == b"+":
                return rest
            if kind == b"-":
                return Refused(rest.decode(errors="replace"))
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else self._exactly(n)
            if kind == b"*":
                n = int(rest)
                return None if n < 0 else [self._reply() for _ in range(n)]
        except ValueError as exc:
            raise ProtocolError(f"a length that is not a number: {line[:40]!r}") from exc
        raise ProtocolError(f"a reply of unknown kind: {line[:40]!r}")


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

    def call(self, *args: Arg) -> Reply:
        with self.connection() as conn:
            return conn.call(*args)

    def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Reply]:
        if not commands:
            return []
        with self.connection() as conn:
            return conn.pipeline(commands)

    def get(self, key: str) -> bytes | None:
        return self.call("GET", key)  # type: ignore[return-value]

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        return self.call("MGET", *keys) if keys else []  # type: ignore[return-value]

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
        return self.call("EXISTS", key)  # type: ignore[return-value]

    def delete(self, *keys: str) -> int:
        return self.call("DEL", *keys) if keys else 0  # type: ignore[return-value]

    def publish(self, channel: str, message: Arg) -> int:
        return self.call("PUBLISH", channel, message)  # type: ignore[return-value]

    def eval(self, script: str, keys: Sequence[str], *args: Arg) -> Reply:
        return self.call("EVAL", script, len(keys), *keys, *args)

    def scan_iter(self, match: str, count: int = 100) -> Iterator[bytes]:
        """Every key matching ``match``, in batches of about ``count``."""
        cursor = b"0"
        while True:
            cursor, keys = self.call("SCAN", cursor, "MATCH", match, "COUNT", count)  # type: ignore[misc]
            yield from keys
            if cursor == b"0":
                return

    def info(self, section: str) -> dict[str, int | str]:
        """The fields of an ``INFO`` section, numbers as ints."""
        text = self.call("INFO", section)
        fields: dict[str, int | str] = {}
        for line in (text or b"").decode(errors="replace").splitlines():
            name, colon, value = line.partition(":")
            if colon and not name.startswith("#"):
                fields[name] = int(value) if value.lstrip("-").isdigit() else value
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
