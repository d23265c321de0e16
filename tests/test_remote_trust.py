"""What a remote tier may be trusted with, against a real redis-server: without a secret it is
refused unless every writer of the server is trusted, and then nothing from it reaches the local
cache that this process cannot prove; a lease nobody will let go of, and a URL redis-py cannot
take, are named instead of stalling or failing deep inside a call."""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
import warnings

import pytest
import torch
from click.testing import CliRunner

import slangspec
from slangspec.cache_store import CacheWarning, remote_leases
from slangspec.cache_store.entry import blobs_of
from slangspec.cache_store.keys import blob_name
from slangspec.cache_store.remote import PREFIX, RemoteTier
from slangspec.cache_store.remote_config import RemoteSettings, remote_settings
from slangspec.cli import main
from workers import HERE, load

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
    monkeypatch.setattr(remote_leases, "HEARTBEAT_MS", 1000)
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
    monkeypatch.setattr(remote_leases, "HEARTBEAT_MS", 1000)
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


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("redis://:hunter2pass@cache-host:notaport/0", "hunter2pass"),
        ("redis://admin:hunter2pass@cache-host:6379/0?timeout=1", "hunter2pass"),
        ("http://:hunter2pass@cache-host", "hunter2pass"),
        ("redis://:hunter2pass@[::1", "hunter2pass"),
        ("redis://:hunter/2pass@cache-host/0", "hunter/2pass"),  # a slash left unencoded
        ("redis:/:hunter2pass@cache-host", "hunter2pass"),
        ("unix://:hunter2pass@/run/redis.sock?db=x", "hunter2pass"),
        ("redis://:hunter2pass@cache-host:6379/0", "hunter2pass"),  # no secret
    ],
)
def test_no_message_about_a_refused_url_holds_its_password(
    url, password, tmp_path, monkeypatch, caplog
):
    said = []
    with pytest.raises(ValueError) as given:
        slangspec.Cache.for_running(tmp_path, remote=url)
    said.append("".join(traceback.format_exception(given.value)))
    monkeypatch.setenv("SLANGSPEC_REMOTE", url)
    monkeypatch.setenv("SLANGSPEC_LOG", "info")
    with pytest.raises(ValueError) as loaded:
        slangspec.load_source("m", "float f(float x) { return x; }", cache_dir=tmp_path)
    said.append("".join(traceback.format_exception(loaded.value)))
    for args in (["cache", "pull"], ["cache", "stats", "--remote", url]):
        refused = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path)])
        assert refused.exit_code == 2, refused.output
        said.append(refused.output)
    assert all("***@" in message for message in said), said
    said += [r.getMessage() for r in caplog.records]
    assert not [m for m in said if password in m or "2pass" in m]


def test_the_tiers_warnings_and_settings_hide_a_password(tmp_path, caplog):
    url = "redis://admin:hunter2pass@127.0.0.1:1/0"
    tier = RemoteTier(remote_settings(url, trust_all=True))
    with pytest.warns(CacheWarning, match="cannot be used now") as caught, caplog.at_level("INFO"):
        assert tier.fact("f") == {}
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    said += [repr(tier), repr(tier.settings)]
    assert all("admin:***@127.0.0.1:1" in m and "hunter2pass" not in m for m in said), said


@pytest.fixture(scope="module")
def poly(cache_dir, tdev) -> tuple[str, dict]:
    """The key and row of poly's forward entry in the session's cache."""
    m = load(cache_dir)
    a, x = torch.ones(1, device=tdev), torch.full((5,), 2.0, device=tdev)
    signature = m.poly.signature(a, x)
    torch.testing.assert_close(m.poly(a, x), torch.full((5,), 7.0, device=tdev))
    cache = slangspec.Cache(cache_dir)
    (key, row), *_ = [
        (k, r) for k, r in cache.rows() if r and r["preimage"]["signature"] == signature
    ]
    return key, row


def published(cache_dir, server, poly) -> dict:
    """poly's entry on ``server``, as a node that trusts every writer published it."""
    key, row = poly
    blobs = slangspec.Cache(cache_dir).disk.read_blobs(blobs_of(row))
    trusting(server).put(key, row, blobs)
    return json.loads(server.client().get(PREFIX + "entry:" + key))


def swap_forward(server, key: str, stored: dict) -> None:
    """Replace the forward kernel on the server with one that computes another function, named
    by its content as a real one is."""
    client = server.client()
    source = client.get(PREFIX + "blob:" + stored["kernels"]["forward"]).decode()
    swapped = source.replace("poly(", "twin(")
    assert swapped != source
    name = blob_name("source", swapped)
    client.set(PREFIX + "blob:" + name, swapped.encode())
    client.set(PREFIX + "entry:" + key, json.dumps({**stored, "kernels": {"forward": name}}))


def test_a_kernel_swapped_on_a_trusted_server_is_refused_and_never_kept(
    cache_dir, poly, tmp_path, redis_server, trust_all
):
    key, row = poly
    stored = published(cache_dir, redis_server, poly)
    swap_forward(redis_server, key, stored)
    fresh = slangspec.Cache(tmp_path / "fresh", remote_settings(redis_server.url))
    with pytest.warns(CacheWarning, match=f"entry {key[:12]} not used: kernel sources k_"):
        assert fresh.serve(key, row["preimage"]) is None
    assert fresh.disk.get(key) is None, "the swapped kernel was kept locally"
    assert list(fresh.disk.blob_names()) == []
    # Restored: what this process proves is kept, as generated here; binaries never are.
    redis_server.client().set(PREFIX + "entry:" + key, json.dumps(stored))
    served = fresh.serve(key, row["preimage"])
    assert served is not None and served.kernels == row["kernels"] and served.binaries == {}
    (name,) = row["kernels"].values()
    assert fresh.read_blob(name) == slangspec.Cache(cache_dir).read_blob(name)


def test_a_call_through_a_trusted_server_holding_a_swapped_kernel_computes_right(
    cache_dir, poly, redis_server, trust_all, tdev
):
    """End to end: the session's cache loses poly's entry while the server holds it swapped;
    the call is right, and right again once the server is gone."""
    key, _ = poly
    swap_forward(redis_server, key, published(cache_dir, redis_server, poly))
    slangspec.Cache(cache_dir).disk.delete(key)
    a, x = torch.ones(1, device=tdev), torch.full((5,), 2.0, device=tdev)
    m = slangspec.load(
        HERE / "shaders" / "cached.slang",
        include_paths=[HERE / "slang_lib"],
        cache_dir=cache_dir,
        remote=redis_server.url,
    )
    with pytest.warns(CacheWarning, match="not what its plan generates"):
        torch.testing.assert_close(m.poly(a, x), torch.full((5,), 7.0, device=tdev))
    redis_server.stop()
    torch.testing.assert_close(load(cache_dir).poly(a, x), torch.full((5,), 7.0, device=tdev))


def a_garbled_plan(stored: dict) -> dict:
    return {**stored, "plan": "{ not a plan"}


def a_plan_for_another_call(stored: dict) -> dict:
    plan = json.loads(stored["plan"])
    plan["signature"] = "something else"
    return {**stored, "plan": json.dumps(plan)}


@pytest.mark.parametrize("change", [a_garbled_plan, a_plan_for_another_call, None])
def test_pull_from_a_trusted_server_keeps_only_what_it_proves(
    cache_dir, poly, tmp_path, redis_server, trust_all, change
):
    key, _ = poly
    stored = published(cache_dir, redis_server, poly)
    client = redis_server.client()
    if change is None:
        swap_forward(redis_server, key, stored)
    else:
        client.set(PREFIX + "entry:" + key, json.dumps(change(stored)))
    client.set(PREFIX + "fact:functions:0", json.dumps({"value": {"poly": False}}))
    fresh = tmp_path / "fresh"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        pulled = CliRunner().invoke(
            main, ["cache", "pull", "--remote", redis_server.url, "--cache-dir", fresh, "--json"]
        )
    assert pulled.exit_code == 0, pulled.output
    assert json.loads(pulled.output) == {"pulled": 0, "present": 0, "refused": 1}
    local = slangspec.Cache(fresh)
    assert list(local.rows()) == [] and local.disk.fact_names("") == []
