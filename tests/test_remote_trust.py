"""What a remote tier may be trusted with, against a real redis-server: without a secret it is
refused unless every writer of the server is trusted, and then nothing from it reaches the local
cache that this process cannot prove; a lease nobody will let go of, and a URL redis-py cannot
take, are named instead of stalling or failing deep inside a call."""

from __future__ import annotations

import re
import threading
import time
import warnings

import pytest
from click.testing import CliRunner

import slangspec
from slangspec.cache_store import CacheWarning, remote
from slangspec.cache_store.remote import PREFIX, RemoteSettings, RemoteTier, remote_settings
from slangspec.cli import main

UNREACHABLE = "redis://127.0.0.1:1/0"
SECRET = "a shared secret of this cluster"


@pytest.fixture(autouse=True)
def _no_remote_settings(monkeypatch):
    for name in ("SLANGSPEC_REMOTE", "SLANGSPEC_REMOTE_SECRET", "SLANGSPEC_REMOTE_TRUST_ALL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def trust_all(monkeypatch) -> None:
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")


@pytest.mark.parametrize(
    "url",
    [
        "redis://host:1/0?db=x",
        "redis://host:1/0?foo=1",
        "redis://host:1/0?socket_timeout=900",
        "unix:///tmp/redis.sock?db=x",
        "unix://",
        "redis:6379",
    ],
)
def test_a_url_redis_cannot_take_is_refused_naming_where_it_came_from(
    url, tmp_path, monkeypatch, trust_all
):
    with pytest.raises(ValueError, match=f"^remote={re.escape(repr(url))}: expected a redis://"):
        slangspec.Cache.for_running(tmp_path, remote=url)
    monkeypatch.setenv("SLANGSPEC_REMOTE", url)
    with pytest.raises(ValueError, match=f"^SLANGSPEC_REMOTE={re.escape(repr(url))}: expected"):
        slangspec.Cache.for_running(tmp_path)


def trusting(server) -> RemoteTier:
    """The server as a node that trusts every writer of it sees it (``trust_all``)."""
    return RemoteTier(remote_settings(server.url))


@pytest.mark.parametrize("expiry_ms", [None, 600_000], ids=["no expiry", "past a heartbeat"])
def test_a_lease_nobody_renews_is_cut_to_a_heartbeat_with_a_warning(
    redis_server, monkeypatch, trust_all, expiry_ms
):
    monkeypatch.setattr(remote, "HEARTBEAT_MS", 1000)
    tier = trusting(redis_server)
    key = PREFIX + "lease:k"
    redis_server.client().set(key, "set by hand", px=expiry_ms)
    finished = threading.Event()
    caught: list[warnings.WarningMessage] = []

    def wait() -> None:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with tier.lease("k", lambda: False, 120.0):
                finished.set()
        caught.extend(seen)

    start = time.monotonic()
    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    assert finished.wait(10), "the waiter stalled for the lease bound"
    assert time.monotonic() - start < 1 + 2  # the heartbeat, and a poll
    thread.join(5)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    expiry = "no expiry" if expiry_ms is None else "an expiry of 600 s"
    assert len(messages) == 1 and f"holds lease {key} with {expiry}" in messages[0], messages


def test_a_lease_its_holder_renews_is_never_cut(redis_server, monkeypatch, trust_all):
    """Not even by a waiter whose own bound is shorter than the holder's heartbeat."""
    monkeypatch.setattr(remote, "HEARTBEAT_MS", 1000)
    holder, waiter = trusting(redis_server), trusting(redis_server)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with holder.lease("k", lambda: False, 120.0), waiter.lease("k", lambda: False, 0.5):
            pass
    assert not [w for w in caught if "holds lease" in str(w.message)]


def test_a_remote_without_a_secret_is_refused_unless_every_writer_is_trusted(tmp_path, monkeypatch):
    advice = "SLANGSPEC_REMOTE_SECRET is not set"
    opt_in = "or SLANGSPEC_REMOTE_TRUST_ALL=1 (remote_trust_all=True)"
    with pytest.raises(ValueError, match=f"^remote='{re.escape(UNREACHABLE)}': {advice}") as no:
        slangspec.Cache.for_running(tmp_path, remote=UNREACHABLE)
    assert opt_in in str(no.value)
    monkeypatch.setenv("SLANGSPEC_REMOTE", UNREACHABLE)
    with pytest.raises(ValueError, match=f"^SLANGSPEC_REMOTE='{re.escape(UNREACHABLE)}': {advice}"):
        slangspec.Cache.for_running(tmp_path)
    with pytest.raises(ValueError, match=advice):
        RemoteSettings(UNREACHABLE)
    refused = CliRunner().invoke(main, ["cache", "pull", "--cache-dir", str(tmp_path)])
    assert refused.exit_code == 2 and advice in refused.output
    # Opted in, by argument or by setting; or a secret.
    assert slangspec.Cache.for_running(tmp_path, remote_trust_all=True).tiers[-1].proven is False
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")
    assert remote_settings().trust_all
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "0")
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)
    assert slangspec.Cache.for_running(tmp_path).tiers[-1].proven
