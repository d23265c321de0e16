"""The remote tier's Redis client against a real redis-server: every command it sends, large
values, transactions that lose a race, error replies, logins, unix sockets, TLS, timeouts,
broken connections and replies that are not RESP2."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest
from redis_server import RedisServer

from slangspec.cache_store.redis_wire import (
    REPLY_BYTES,
    Address,
    Client,
    ProtocolError,
    Refused,
    Slow,
    Unreachable,
)


def client(url: str, timeout: float = 2.0) -> Client:
    return Client(url, 1.0, timeout)


def test_every_command_the_tier_sends(redis_server):
    c = client(redis_server.url)
    assert c.set("k", b"v") and c.get("k") == b"v"
    assert not c.set("k", b"w", nx=True) and c.get("k") == b"v"
    assert c.set("lease", "token", nx=True, px=60_000)
    assert 0 < redis_server.client().pttl("lease") <= 60_000
    assert c.mset({"a": b"1", "b": b""})
    assert c.mget(["a", "missing", "b"]) == [b"1", None, b""]
    assert c.mget([]) == []
    assert c.pipeline([("STRLEN", "a"), ("STRLEN", "missing")]) == [1, 0]
    assert c.exists("a") == 1 and c.exists("missing") == 0
    assert c.delete("a", "b", "missing") == 2 and c.delete() == 0
    assert c.eval("return redis.call('get', KEYS[1]) == ARGV[1] and 7 or 0", ["k"], "v") == 7
    assert c.publish("channel", b"x") == 0
    names = {f"scan:{i}" for i in range(250)}
    c.mset(dict.fromkeys(names, b""))
    assert set(c.scan_iter("scan:*", count=10)) == names
    memory = c.info("memory")
    assert isinstance(memory["used_memory"], int) and memory["used_memory"] > 0
    assert isinstance(memory["maxmemory_policy"], str)


def test_values_of_any_bytes_and_size_travel_whole(redis_server):
    c = client(redis_server.url)
    values = {
        "empty": b"",
        "line ends": b"\r\n\r\n$3\r\n*1\r\n",
        "binary": bytes(range(256)) * 3,
        "large": os.urandom(20 << 20),
    }
    assert c.mset(values)
    most = sum(len(v) for v in values.values())
    assert c.mget(list(values), most) == list(values.values())
    assert c.get("large", most) == values["large"]
    assert redis_server.client().get("line ends") == values["line ends"]


def test_a_reply_past_its_bound_is_refused_as_announced_and_its_connection_dropped(redis_server):
    c = client(redis_server.url)
    value = os.urandom(REPLY_BYTES + 1)
    assert c.mset({"a": value, "b": value})
    past = f"a string of {len(value)} bytes, past the reply's bound of {REPLY_BYTES} bytes"
    with pytest.raises(ProtocolError, match=f"^{past}$"):
        c.get("a")
    with pytest.raises(ProtocolError, match="past the reply's bound"):
        c.mget(["a", "b"], 2 * len(value) - 1)  # the second value is refused
    assert c.get("a", len(value)) == value  # on a connection of its own, in step
    assert c.mget(["a", "b"], 2 * len(value)) == [value, value]


def test_an_error_reply_is_refused_and_the_connection_stays_in_step(redis_server):
    c = client(redis_server.url)
    c.set("text", b"abc")
    with pytest.raises(Refused, match="WRONGTYPE"):
        c.pipeline([("GET", "text"), ("LPUSH", "text", "x"), ("STRLEN", "text")])
    with pytest.raises(Refused, match="unknown command"):
        c.call("NO-SUCH-COMMAND")
    assert c.get("text") == b"abc"


def test_a_transaction_whose_watched_key_changed_is_not_applied(redis_server):
    c = client(redis_server.url)
    c.set("entry", b"before")
    with c.connection() as conn:
        conn.call("WATCH", "entry")
        redis_server.client().set("entry", b"theirs")
        *_, done = conn.pipeline([("MULTI",), ("SET", "entry", b"ours"), ("EXEC",)])
    assert done is None and c.get("entry") == b"theirs"
    with c.connection() as conn:
        conn.call("WATCH", "entry")
        *_, done = conn.pipeline([("MULTI",), ("SET", "entry", b"ours"), ("EXEC",)])
    assert done == [b"OK"] and c.get("entry") == b"ours"


def test_threads_share_a_client(redis_server):
    c = client(redis_server.url)
    failures = []

    def work(i: int) -> None:
        for j in range(50):
            value = f"{i}:{j}".encode() * 1000
            c.set(f"t{i}", value)
            if c.get(f"t{i}") != value:
                failures.append((i, j))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_forked_child_opens_connections_of_its_own(redis_server):
    c = client(redis_server.url)
    c.mset({"parent": b"p" * 100_000, "child": b"c" * 100_000})
    assert c.get("parent") == b"p" * 100_000  # leaves a connection in the pool
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if all(c.get("child") == b"c" * 100_000 for _ in range(200)) else 1
        finally:
            os._exit(code)
    parent_ok = all(c.get("parent") == b"p" * 100_000 for _ in range(200))
    _, status = os.waitpid(pid, 0)
    assert parent_ok and os.waitstatus_to_exitcode(status) == 0


def test_a_password_a_database_and_a_unix_socket(tmp_path):
    server = RedisServer(tmp_path / "redis", password="p@ss w:rd", unix_socket=True)
    server.url = server.url.replace("p@ss w:rd", "p%40ss%20w%3Ard")
    server.unix_url = server.unix_url.replace("p@ss w:rd", "p%40ss%20w%3Ard")
    server.start()
    try:
        admin = server.client()
        on_db_3 = client(server.url.replace("/0", "/3"))
        assert on_db_3.set("k", b"three")
        assert admin.get("k") is None
        assert client(server.unix_url + "?db=3").get("k") == b"three"
        with pytest.raises(Refused, match="NOAUTH"):
            client(f"redis://127.0.0.1:{server.port}/0").get("k")
        with pytest.raises(Refused, match="WRONGPASS"):
            client(f"redis://:wrong@127.0.0.1:{server.port}/0").get("k")
    finally:
        server.stop()


def test_urls_are_read_as_the_settings_accept_them():
    assert Address.of("redis://h") == Address(host="h")
    assert Address.of("redis://u:p%2F@h:7/2") == Address("h", 7, None, False, "u", "p/", 2)
    assert Address.of("rediss://h:7?db=4") == Address("h", 7, tls=True, db=4)
    assert Address.of("unix:///run/r.sock?db=1") == Address(path="/run/r.sock", db=1)


@pytest.fixture
def certificates(tmp_path):
    """A certificate authority and a server certificate it signed for 127.0.0.1."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed (scripts/setup.sh installs it)")
    d = tmp_path / "tls"
    d.mkdir()

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)

    subject = "/CN=slangspec test"
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", subject + " CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", subject)  # fmt: skip
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip
    return d


def test_tls_with_the_servers_authority_trusted_and_refused_without(tmp_path, certificates):
    server = RedisServer(tmp_path / "redis", tls=certificates).start()
    code = (
        "import sys\n"
        "from slangspec.cache_store.redis_wire import Client, RedisError\n"
        "c = Client(sys.argv[1], 1.0, 2.0)\n"
        "try:\n"
        "    print(c.set('k', b'v') and c.get('k') == b'v')\n"
        "except RedisError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    try:
        env = {**os.environ, "SSL_CERT_FILE": str(certificates / "ca.pem")}
        trusted = subprocess.run(
            [sys.executable, "-c", code, server.tls_url], capture_output=True, text=True, env=env
        )
        assert trusted.stdout.strip() == "True", trusted.stdout + trusted.stderr
        env.pop("SSL_CERT_FILE")
        untrusted = subprocess.run(
            [sys.executable, "-c", code, server.tls_url], capture_output=True, text=True, env=env
        )
        assert "Unreachable" in untrusted.stdout and "CERTIFICATE_VERIFY_FAILED" in untrusted.stdout
        assert server.client().get("k") == b"v"
    finally:
        server.stop()


def test_a_stopped_server_is_slow_within_the_timeout_and_a_gone_one_unreachable(redis_server):
    c = client(redis_server.url, timeout=0.5)
    assert c.set("k", b"v")
    os.kill(redis_server.process.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(Slow):
            c.get("k")
        assert time.monotonic() - start < 1.5
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)
    assert c.get("k") == b"v"  # the connection that timed out was dropped, not reused
    redis_server.stop()
    with pytest.raises(Unreachable):
        c.get("k")


def test_a_connection_that_cannot_be_made_leaves_no_socket_and_no_error_behind(redis_server):
    plain = f"rediss://127.0.0.1:{redis_server.port}/0"  # TLS to a port that speaks none
    unheard: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unheard.append
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for url in (plain, f"redis://127.0.0.1:{_closed_port()}/0"):
                with pytest.raises((Unreachable, Slow)):  # TLS waits for a server hello
                    client(url).get("k")
            gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unheard == [] and [w for w in caught if w.category is ResourceWarning] == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_subscription_wakes_on_a_message_and_waits_out_a_broken_connection(redis_server):
    c = client(redis_server.url)
    waiter = c.subscribe("landed")
    try:
        assert not waiter.wait(0.05)
        threading.Timer(0.1, lambda: c.publish("landed", b"token")).start()
        start = time.monotonic()
        assert waiter.wait(5.0)
        assert time.monotonic() - start < 2.0
        redis_server.stop()
        assert not waiter.wait(0.2)
        start = time.monotonic()
        assert not waiter.wait(0.3)
        assert time.monotonic() - start >= 0.3
    finally:
        waiter.close()


@pytest.mark.parametrize(
    "answer",
    [b"?what\r\n", b"$x\r\n", b"$5\r\nab\r\n", b"$2\r\nabcd\r\n", b""],
    ids=["unknown kind", "bad length", "cut short", "no line end", "closed"],
)
def test_a_reply_that_is_not_resp2_is_an_error_never_a_hang(answer):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.sendall(answer)
        if answer != b"$5\r\nab\r\n":
            conn.close()
        else:
            time.sleep(1.0)  # sends part of the value, then nothing
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    c = client(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", timeout=0.3)
    with pytest.raises((ProtocolError, Unreachable, Slow)):
        c.get("k")
    listener.close()
