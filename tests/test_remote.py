"""The shared remote tier, against a real redis-server: what one process builds, a process with
an empty local cache finds; what the server hands out is checked; a server that fails never
breaks a call."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import time
import tracemalloc
import warnings

import pytest
import torch
from conftest import release_devices

import slangspec
from slangspec.cache_store import CacheWarning
from slangspec.cache_store.keys import SHADERS
from slangspec.cache_store.remote import MAX_VALUE_BYTES, PREFIX, RemoteTier, namespace
from slangspec.cache_store.remote_config import remote_settings
from slangspec.settings import compile_counts
from workers import HERE, held_by_woken_waiters, report, run, worker

SECRET = "a shared secret of this cluster"


@pytest.fixture(autouse=True)
def _trust_all(monkeypatch):
    """Most tests here use a server without a secret, which a node uses only when told to
    trust every writer of it (worker processes inherit it)."""
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")


@pytest.fixture(autouse=True)
def _devices_released():
    """Every test here opens caches of its own: their devices go with it."""
    yield
    release_devices()


def remote_env(server, **more: str) -> dict[str, str]:
    return {"SLANGSPEC_REMOTE": server.url, **more}


def entries(server) -> list[bytes]:
    return sorted(server.client().scan_iter(PREFIX + "*entry:*"))  # any namespace


def load(cache_dir, server, **kw):
    return slangspec.load(
        HERE / "shaders" / "cached.slang",
        include_paths=[HERE / "slang_lib"],
        cache_dir=cache_dir,
        remote=server.url,
        **kw,
    )


def poly_checked(m, tdev) -> None:
    a = torch.randn(1, device=tdev, requires_grad=True)
    x = torch.randn(7, device=tdev, requires_grad=True)
    y = m.poly(a, x)
    y.sum().backward()
    torch.testing.assert_close(y, (a * x * x + 3 * a).detach())
    torch.testing.assert_close(a.grad, (x.detach() ** 2 + 3).sum().reshape(1))
    torch.testing.assert_close(x.grad, (2 * a * x).detach())


def test_a_process_with_an_empty_local_cache_is_served_from_the_remote(
    tmp_path, redis_server, kind
):
    env = remote_env(redis_server, SLANGSPEC_REMOTE_SECRET=SECRET)  # cubins need it to travel
    cold = run(tmp_path / "first", "--signatures", "3", env=env)
    assert cold["counts"]["specialize"] == 3
    assert len(entries(redis_server)) == 3
    forbid = "--forbid-slang" if kind == "cuda" else "--forbid-compile"
    warm = run(tmp_path / "second", "--signatures", "3", forbid, env=env)
    assert warm["ok"]
    assert warm["counts"].get("specialize", 0) == 0
    assert warm["counts"].get("codegen", 0) == 0
    if kind == "cuda":
        assert warm["counts"].get("kernel", 0) == 0  # cubins from the remote: no Slang
    assert len(slangspec.Cache(tmp_path / "second").entries()) == 3


def test_processes_with_separate_local_caches_build_each_key_once(tmp_path, redis_server):
    procs = [
        worker(tmp_path / f"node{i}", "--signatures", "4", env=remote_env(redis_server))
        for i in range(4)
    ]
    reports = [report(p) for p in procs]
    assert all(r["ok"] for r in reports)
    assert sum(r["counts"].get("specialize", 0) for r in reports) == 4
    # Each case's forward kernel and the backward kernel its gradients need, once in all.
    assert sum(r["counts"].get("codegen", 0) for r in reports) == 8


def test_read_only_mode_never_writes(tmp_path, redis_server, monkeypatch, tdev):
    monkeypatch.setenv("SLANGSPEC_REMOTE_MODE", "read")
    poly_checked(load(tmp_path / "c", redis_server), tdev)
    assert redis_server.client().dbsize() == 0


def tamper_entry(server, change) -> None:
    client = server.client()
    (key,) = entries(server)
    stored = json.loads(client.get(key))
    change(client, stored)
    client.set(key, json.dumps(stored))


def drop_a_blob(client, stored) -> None:
    client.delete(PREFIX + "blob:" + next(iter(stored["kernels"].values())))


def flip_a_blob(client, stored) -> None:
    name = PREFIX + "blob:" + next(iter(stored["kernels"].values()))
    data = bytearray(client.get(name))
    data[len(data) // 2] ^= 0x5A
    client.set(name, bytes(data))


def other_preimage(client, stored) -> None:
    stored["preimage"]["defines"] = {"SCALE": "2"}


def forged_mac(client, stored) -> None:
    stored["mac"] = "0" * 64


def a_name_that_is_no_blob(client, stored) -> None:
    stored["kernels"]["forward"] = "zz"


def a_garbled_plan(client, stored) -> None:
    stored["plan"] = "{ not a plan"


def a_nested_plan(client, stored) -> None:
    stored["plan"] = "[" * 100_000


@pytest.mark.parametrize(
    "change,warned",
    [
        (drop_a_blob, None),
        (flip_a_blob, "does not match its name"),
        (other_preimage, "its stored preimage differs from the requested one"),
        (forged_mac, "its MAC does not hold"),
        (a_name_that_is_no_blob, "does not decode"),
        (a_garbled_plan, "plan does not fit its entry"),
        (a_nested_plan, "plan does not fit its entry: JSON nested too deep"),
    ],
    ids=[
        "blob evicted",
        "blob bytes flipped",
        "other preimage",
        "forged MAC",
        "not a blob name",
        "garbled plan",
        "plan nested past the JSON decoder",
    ],
)
def test_what_the_remote_cannot_prove_is_refused_and_built_again(
    tmp_path, redis_server, monkeypatch, tdev, change, warned
):
    if change is forged_mac:
        monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", "a shared secret of this cluster")
    poly_checked(load(tmp_path / "first", redis_server), tdev)
    tamper_entry(redis_server, change)
    before = compile_counts["specialize"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        poly_checked(load(tmp_path / "second", redis_server), tdev)
    assert compile_counts["specialize"] == before + 1
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    if warned is not None:
        assert any(warned in m for m in messages), messages
    # What was built here replaced what was refused: a third node is served.
    before = dict(compile_counts)
    poly_checked(load(tmp_path / "third", redis_server), tdev)
    assert compile_counts["specialize"] == before["specialize"]
    assert compile_counts["codegen"] == before["codegen"]


def test_nodes_with_other_secrets_neither_read_nor_overwrite_each_others_entries(
    tmp_path, redis_server, monkeypatch, tdev
):
    """Each secret (and no secret) has a namespace of its own on the server: a node with a
    mistyped secret, or none, builds for itself and leaves the cluster's entries alone, where
    it used to refuse them, build, and publish over them."""
    cluster = "the cluster's own secret"
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", cluster)
    poly_checked(load(tmp_path / "good", redis_server), tdev)
    for secret in ("a mistyped secret of one node", None):
        if secret is None:
            monkeypatch.delenv("SLANGSPEC_REMOTE_SECRET")
        else:
            monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", secret)
        before = compile_counts["specialize"]
        poly_checked(load(tmp_path / f"other-{secret is None}", redis_server), tdev)
        assert compile_counts["specialize"] == before + 1
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", cluster)
    before = dict(compile_counts)
    poly_checked(load(tmp_path / "next", redis_server), tdev)  # served from the cluster's
    assert compile_counts["specialize"] == before["specialize"]
    assert len(entries(redis_server)) == 3  # one per namespace


@pytest.mark.parametrize("fault", ["down", "paused"])
def test_a_server_that_fails_leaves_results_right_and_calls_bounded(
    tmp_path, redis_server, tdev, fault
):
    if fault == "down":
        redis_server.stop()
    else:
        redis_server.client().execute_command("CLIENT", "PAUSE", "8000", "ALL")
    start = time.monotonic()
    with pytest.warns(CacheWarning, match="cannot be used now"):
        poly_checked(load(tmp_path / "c", redis_server), tdev)
    assert time.monotonic() - start < 30
    assert slangspec.Cache(tmp_path / "c").entries(), "the local tier still caches"


def test_remote_settings_are_checked(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="remote='http://x': expected a redis://"):
        slangspec.Cache.for_running(tmp_path, remote="http://x")
    # Each was a raw ValueError on every call, or (the last) database 0 in silence.
    for url in ("redis://host:notaport", "redis://[::1", "redis://host:6391/abc"):
        with pytest.raises(ValueError, match=f"^remote='{re.escape(url)}': expected a redis://"):
            slangspec.Cache.for_running(tmp_path, remote=url)
        monkeypatch.setenv("SLANGSPEC_REMOTE", url)
        with pytest.raises(ValueError, match=f"^SLANGSPEC_REMOTE='{re.escape(url)}'"):
            slangspec.Cache.for_running(tmp_path)
    monkeypatch.delenv("SLANGSPEC_REMOTE")
    monkeypatch.setenv("SLANGSPEC_REMOTE_MODE", "write-only")
    with pytest.raises(ValueError, match="SLANGSPEC_REMOTE_MODE='write-only'"):
        slangspec.Cache.for_running(tmp_path, remote="redis://127.0.0.1:1/0")
    monkeypatch.setenv("SLANGSPEC_REMOTE_MODE", "read")
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", "short")
    with pytest.raises(
        ValueError, match=r"SLANGSPEC_REMOTE_SECRET=<5 bytes>: expected at least 16 bytes"
    ):
        slangspec.Cache.for_running(tmp_path, remote="redis://127.0.0.1:1/0")


def test_the_remote_tier_speaks_to_redis_without_a_client_package(redis_server):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from slangspec.cache_store.remote import RemoteTier\n"
        "from slangspec.cache_store.remote_config import RemoteSettings\n"
        "tier = RemoteTier(RemoteSettings(sys.argv[1], trust_all=True))\n"
        "tier.note_fact('f', {'a': 1})\n"
        "with tier.lease('n', lambda: False, 5.0):\n"
        "    assert tier.leased('n')\n"
        "assert tier.fact('f') == {'a': 1} and not tier.leased('n')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'hiredis')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, redis_server.url], capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_killed_lease_holder_is_taken_over_after_the_lease(tmp_path, redis_server):
    env = remote_env(redis_server, SLANGSPEC_CACHE_LEASE="3")
    holder = worker(tmp_path / "holder", "--lease-and-die", env=env)
    out, _ = holder.communicate(timeout=300)
    assert json.loads(out.strip().splitlines()[-1])["leased"]
    assert list(redis_server.client().scan_iter(PREFIX + "lease:*")), "the lease outlived it"
    after = run(tmp_path / "next", "--signatures", "1", env=env)
    assert after["ok"]
    assert after["counts"]["specialize"] == 1
    assert after["lease_wait_s"] <= 3 + 0.5


def test_a_killed_holder_frees_the_lease_within_a_heartbeat_not_the_bound(tmp_path, redis_server):
    """With the default bound of 120 s, the lease of a process killed mid-build lapses within
    the heartbeat: the next process has its result within seconds, not minutes."""
    env = remote_env(redis_server)
    holder = worker(tmp_path / "holder", "--lease-and-die", env=env)
    out, _ = holder.communicate(timeout=300)
    assert json.loads(out.strip().splitlines()[-1])["leased"]
    start = time.monotonic()
    after = run(tmp_path / "next", "--signatures", "1", env=env)
    assert after["ok"] and after["counts"]["specialize"] == 1
    assert after["lease_wait_s"] <= 5 + 1.5  # remote_leases.HEARTBEAT_MS, and a poll
    assert time.monotonic() - start < 10 + 10  # the result, process start-up included


@pytest.mark.parametrize("fault", ["flushed", "restarted"])
def test_a_server_flushed_or_restarted_mid_run_leaves_results_right(tmp_path, redis_server, fault):

    stop = threading.Event()

    def disturb() -> None:
        while not stop.wait(0.3):
            if fault == "flushed":
                redis_server.client().flushall()
            else:
                redis_server.stop()
                redis_server.start()

    thread = threading.Thread(target=disturb)
    thread.start()
    try:
        procs = [
            worker(tmp_path / f"node{i}", "--signatures", "4", env=remote_env(redis_server))
            for i in range(2)
        ]
        assert all(report(p)["ok"] for p in procs)
    finally:
        stop.set()
        thread.join()


def specialize(*args: str) -> dict:
    from click.testing import CliRunner

    from slangspec.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_push_and_pull_carry_entries_between_local_caches(
    tmp_path, redis_server, kind, monkeypatch
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)  # cubins need it to travel
    assert run(tmp_path / "built", "--signatures", "2")["ok"]  # no remote: local only
    assert specialize(
        "cache", "push", "--remote", redis_server.url, "--cache-dir", tmp_path / "built", "--json"
    ) == {"entries": 2, "skipped": 0}
    stats = specialize("cache", "stats", "--remote", redis_server.url, "--json")
    assert stats["entries"] == 2 and stats["blobs"] >= 4
    pulled = specialize(
        "cache", "pull", "--remote", redis_server.url, "--cache-dir", tmp_path / "fresh", "--json"
    )
    assert pulled == {"pulled": 2, "present": 0, "refused": 0}
    forbid = "--forbid-slang" if kind == "cuda" else "--forbid-compile"
    assert run(tmp_path / "fresh", "--signatures", "2", forbid)["ok"]


def test_remote_commands_without_a_remote_say_so(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from slangspec.cli import main

    monkeypatch.delenv("SLANGSPEC_REMOTE", raising=False)
    result = CliRunner().invoke(main, ["cache", "pull", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no remote tier: pass --remote URL or set SLANGSPEC_REMOTE" in result.output


def poly_items(tmp_path, specializations: str, masks: str) -> list:
    """The warm items of a manifest of cached.slang's poly (TOML values as given)."""
    from slangspec.aot.warm import parse_manifest

    manifest = tmp_path / "warm.toml"
    manifest.write_text(f"""
[[module]]
path = "{HERE / "shaders" / "cached.slang"}"
include_paths = ["{HERE / "slang_lib"}"]

[[module.function]]
name = "poly"
specializations = {specializations}
masks = {masks}
""")
    return parse_manifest(manifest)


@pytest.mark.parametrize(
    ("held", "masks", "lease"),
    [
        # Another machine compiles the first item (for two more seconds: the run waits that
        # long for it), warms it, or warms only its backward kernel for grads "10" (claims are
        # never waited on; held longer than the first item's forward kernel can take to build).
        ("compile lease", '"none"', "{key}"),
        ("warm claim", '"none"', "warm:{key}"),
        ("backward warm claim", '["10"]', "warm:{key}:10"),
    ],
    ids=["compile lease", "warm claim", "backward warm claim"],
)
def test_warm_takes_up_what_another_machine_is_building_after_the_rest(
    tmp_path, redis_server, monkeypatch, held, masks, lease
):
    from slangspec.aot.warm import warm

    monkeypatch.setenv("SLANGSPEC_REMOTE", redis_server.url)
    specializations = '[["f32[1] grad", "f32[7] nograd"], ["f32[1] grad", "f32[7, 5] nograd"]]'
    items = poly_items(tmp_path, specializations, masks)
    m = load(tmp_path / "c", redis_server)
    busy = m.poly.cache_key(items[0].signature)
    name = lease.format(key=busy)
    held_ms = 2000 if held == "compile lease" else 60_000
    redis_server.client().set(PREFIX + "lease:" + name, "elsewhere", px=held_ms)
    order: list[str] = []
    results = warm(
        items, cache_dir=str(tmp_path / "c"), progress=lambda r: order.append(r.item.signature)
    )
    assert [r.status for r in results] == ["built", "built"]
    assert order == [items[1].signature, items[0].signature]
    assert m.poly.missing(items[0].signature, items[0].masks) == []


def test_rebuilding_a_forward_kernel_holds_the_lease_warming_looks_for(tmp_path, redis_server):
    """A forward kernel built again for an entry that has lost its source (and binary) is
    built under the same lease name that warming elsewhere checks before it compiles it too."""
    from slangspec.cache_store import FORWARD

    [item] = poly_items(tmp_path, '[["f32[1] grad", "f32[7] nograd"]]', '"none"')
    first = load(tmp_path / "c", redis_server)
    assert first.poly.warm(item.signature, []) == "built"
    row = first.cache.disk.row(first.poly.cache_key(item.signature))
    binary = row.get("binaries", {}).get(FORWARD)
    for name in [row["kernels"][FORWARD], *([binary["file"]] if binary else [])]:
        first.cache.disk.blob_path(name).write_bytes(b"damaged")
    again = load(tmp_path / "c", redis_server)
    elsewhere = load(tmp_path / "elsewhere", redis_server)
    seen: list[bool] = []
    compile_source = again.builder._compile

    def compiling(source: str):
        seen.append(elsewhere.poly.leased_elsewhere(item.signature))
        return compile_source(source)

    again.builder._compile = compiling
    with pytest.warns(CacheWarning, match="missing or damaged"):
        assert again.poly.warm(item.signature, []) == "built"
    assert seen == [True]


def test_warming_reflects_a_module_another_machine_is_reflecting(
    tmp_path, redis_server, monkeypatch, kind
):
    if kind != "cuda":
        pytest.skip("only a CUDA process waits for another machine's reflection")
    from concurrent.futures import ThreadPoolExecutor

    from slangspec.aot.warm import warm

    monkeypatch.setenv("SLANGSPEC_REMOTE", redis_server.url)
    items = poly_items(tmp_path, '[["f32[1] grad", "f32[7] nograd"]]', '"none"')
    client = redis_server.client()
    for fact in client.keys(PREFIX + "fact:functions:*"):
        client.delete(fact)
    # As if another machine were reflecting the module, for longer than the test runs.
    lease = load(tmp_path / "probe", redis_server).functions_fact("poly") + ":poly"
    client.set(PREFIX + "lease:" + lease, "elsewhere", px=600_000)
    pool = ThreadPoolExecutor(1)
    warming = pool.submit(warm, items, cache_dir=str(tmp_path / "c"))
    try:
        results = warming.result(timeout=120)
        held_meanwhile = client.exists(PREFIX + "lease:" + lease)
    finally:
        client.delete(PREFIX + "lease:" + lease)
        client.publish(PREFIX + "landed:" + lease, "elsewhere")
        pool.shutdown()
    assert held_meanwhile, "the warm run waited until the other machine's reflection ended"
    assert [r.status for r in results] == ["built"]


def test_ls_evict_and_verify_act_on_the_remote(tmp_path, redis_server):
    assert run(tmp_path / "node", "--signatures", "2", env=remote_env(redis_server))["ok"]
    url = redis_server.url
    listed = specialize("cache", "ls", "--remote", url, "--json")
    assert sorted(e["function"] for e in listed) == ["poly", "poly"]
    assert specialize("cache", "verify", "--remote", url, "--json")["problems"] == []
    flip_a_blob(
        redis_server.client(), json.loads(redis_server.client().get(entries(redis_server)[0]))
    )
    from click.testing import CliRunner

    from slangspec.cli import main

    damaged = CliRunner().invoke(main, ["cache", "verify", "--remote", url, "--json"])
    assert damaged.exit_code == 1
    repaired = specialize("cache", "verify", "--remote", url, "--repair", "--json")
    assert repaired["repaired"] == 1 and repaired["remaining"] == []
    gone = specialize("cache", "evict", "--remote", url, "--function", "poly", "--json")
    assert len(gone["evicted"]) == 1
    assert entries(redis_server) == []
    client = redis_server.client()
    left = {k.decode().rpartition(":")[2] for k in client.scan_iter(PREFIX + "blob:*")}
    listed = set()
    for fact in client.scan_iter(PREFIX + "fact:modules:*"):
        listed |= {blob for blob, _ in json.loads(client.get(fact))["value"].values()}
    assert left == listed, "evict left a blob no entry names, or took a compiled module"
    assert all(name.startswith("m_") for name in left)


def test_publishing_keeps_the_kernels_another_machine_published_meanwhile(
    tmp_path, redis_server, monkeypatch, tdev
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", "a shared secret of this cluster")
    a = torch.ones(1, device=tdev, requires_grad=True)
    x = torch.ones(7, device=tdev, requires_grad=True)
    first = load(tmp_path / "first", redis_server)
    signature = first.poly.signature(a, x)
    first.poly.warm(signature, ["10"])
    # Built at the same time elsewhere, without seeing the first: then published.
    second = slangspec.load(
        HERE / "shaders" / "cached.slang",
        include_paths=[HERE / "slang_lib"],
        cache_dir=tmp_path / "second",
    )
    second.poly.warm(signature, ["01"])
    url = redis_server.url
    pushed = specialize(
        "cache", "push", "--remote", url, "--cache-dir", tmp_path / "second", "--json"
    )
    assert pushed == {"entries": 1, "skipped": 0}
    (listed,) = specialize("cache", "ls", "--remote", url, "--json")
    # On CUDA each build of a forward kernel also built the backward of both tensors.
    both = ["11"] if tdev == "cuda" else []
    assert listed["kernels"] == ["01", "10", *both, "forward"]
    assert specialize("cache", "verify", "--remote", url, "--json")["problems"] == []


def test_a_warm_process_with_local_answers_never_asks_the_server(tmp_path, redis_server, tdev):
    poly_checked(load(tmp_path / "c", redis_server), tdev)
    redis_server.stop()  # any call to it now would warn that it cannot be used
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        poly_checked(load(tmp_path / "c", redis_server), tdev)


def test_what_comes_from_the_server_counts_against_the_local_bound(tmp_path, redis_server):
    assert run(tmp_path / "built", "--signatures", "6", env=remote_env(redis_server))["ok"]
    # What a cache served from the server holds. Without a secret only kernel sources travel:
    # they are compiled again here, which keeps Slang's caches (on CUDA, its prelude) too.
    assert run(tmp_path / "served", "--signatures", "6", env=remote_env(redis_server))["ok"]
    parts = slangspec.Cache(tmp_path / "served").disk.measure()
    # What it holds beside its kernels, and about half of them.
    bound = sum(parts.values()) - (parts["kernels"] + parts["binaries"]) // 2
    env = remote_env(redis_server, SLANGSPEC_CACHE_SIZE=str(bound))
    assert run(tmp_path / "small", "--signatures", "6", env=env)["ok"]
    small = slangspec.Cache(tmp_path / "small")
    assert sum(small.disk.measure().values()) <= bound
    # How many stay depends on what the index takes during the run; never the one used last.
    assert 1 <= len(small.entries()) < 6


def test_waiters_woken_together_take_the_result_not_the_lease_in_turns(redis_server):
    holder = RemoteTier(remote_settings(redis_server.url))
    waiter = RemoteTier(remote_settings(redis_server.url))
    client = redis_server.client()
    held = held_by_woken_waiters(
        lambda: holder.lease("k", lambda: False, 30),
        lambda done: waiter.lease("k", done, 30),
        lambda: bool(client.exists(PREFIX + "lease:k")),
    )
    assert held == [False] * 4, "a woken waiter took the lease instead of the result"


def test_a_cuda_node_waits_for_another_machines_reflection_instead_of_its_own(
    tmp_path, redis_server, kind
):
    if kind != "cuda":
        pytest.skip("elsewhere a node compiles what it fetches through Slang, so it reflects")
    env = remote_env(redis_server, SLANGSPEC_REMOTE_SECRET=SECRET)  # cubins need it to travel
    prefix = namespace(SECRET.encode())
    assert run(tmp_path / "first", "--signatures", "1", env=env)["ok"]
    client = redis_server.client()
    # As if another machine were reflecting the module now: its functions not yet noted.
    (fact,) = client.keys(prefix + "fact:functions:*")
    noted = client.get(fact)
    client.delete(fact)
    lease = "functions:" + fact.decode().rsplit(":", 1)[1] + ":poly"
    client.set(prefix + "lease:" + lease, "elsewhere", px=60_000)
    node = worker(tmp_path / "second", "--signatures", "1", env=env)
    deadline = time.monotonic() + 120
    while not dict(client.pubsub_numsub(prefix + "landed:" + lease)).get(
        (prefix + "landed:" + lease).encode()
    ):
        assert node.poll() is None, "the node went on without waiting for the reflection"
        assert time.monotonic() < deadline, "the node never waited for the reflection"
        time.sleep(0.05)
    client.set(fact, noted)
    client.delete(prefix + "lease:" + lease)
    client.publish(prefix + "landed:" + lease, "elsewhere")
    second = report(node)
    assert second["ok"]
    assert "front_end" not in second["counts"] and "specialize" not in second["counts"]
    assert not second["slangpy_imported"]


def snapshot(root, server) -> tuple[dict, list, dict]:
    """Every file under ``root`` but the index with its size and time, every row of the index
    (opening it, diskcache stores its unchanged settings again, so the files themselves
    change), and every key the server holds with its value."""
    files = {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if "index" not in p.relative_to(root).parts
    }
    with contextlib.closing(sqlite3.connect(root / "index" / "cache.db")) as db:
        rows = sorted(db.iterdump())
    client = server.client()
    return files, rows, {k: client.dump(k) for k in client.scan_iter("*")}


def test_explain_and_a_dry_run_write_nothing_locally_or_remotely(
    tmp_path, redis_server, monkeypatch, tdev
):
    from click.testing import CliRunner

    from slangspec.cli import main

    shader, lib = HERE / "shaders" / "cached.slang", HERE / "slang_lib"
    manifest = tmp_path / "warm.toml"
    manifest.write_text(
        f'[[module]]\npath = "{shader}"\ninclude_paths = ["{lib}"]\n\n'
        '[[module.function]]\nname = "poly"\nspecializations = [["f32[1] grad", "f32[7]"]]\n'
    )
    monkeypatch.setenv("SLANGSPEC_REMOTE", redis_server.url)
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)  # on CUDA the cubins make it present
    runner = CliRunner()
    built = runner.invoke(
        main, ["warm", str(manifest), "--jobs", "1", "--cache-dir", str(tmp_path / "first")]
    )
    assert built.exit_code == 0, built.output
    # This machine holds one entry of its own (so that there are rows to drop or touch) and is
    # asked about the one only the server holds.
    second = tmp_path / "second"
    poly_checked(load(second, redis_server), tdev)
    before = snapshot(second, redis_server)
    explain = ["explain", str(shader), "poly", "f32[1] grad; f32[7]", "-I", str(lib)]
    explained = runner.invoke(main, [*explain, "--cache-dir", str(second), "--json"])
    assert explained.exit_code == 0, explained.output
    assert json.loads(explained.stdout)["hit"], "the server's entry is found"
    dry = runner.invoke(
        main, ["warm", str(manifest), "--jobs", "1", "--cache-dir", str(second), "--dry-run"]
    )
    assert dry.exit_code == 0 and "1 present" in dry.output, dry.output
    after = snapshot(second, redis_server)
    changed = {p for p in before[0].keys() | after[0].keys() if before[0].get(p) != after[0].get(p)}
    assert changed == set(), "files written locally"
    assert after[1] == before[1], "the index written"
    assert after[2] == before[2], "written to the server"


@pytest.mark.parametrize("expiry_ms", [None, 600_000], ids=["no expiry", "past the bound"])
def test_a_lease_that_would_never_lapse_is_waited_on_for_the_bound_at_most(redis_server, expiry_ms):
    tier = RemoteTier(remote_settings(redis_server.url))
    redis_server.client().set(PREFIX + "lease:k", "someone", px=expiry_ms)
    finished = threading.Event()

    def wait() -> None:
        with tier.lease("k", lambda: False, 1.0):
            finished.set()

    start = time.monotonic()
    threading.Thread(target=wait, daemon=True).start()
    assert finished.wait(10), "the wait outlived the lease bound"
    assert time.monotonic() - start < 3.5


def test_an_unsigned_fact_from_the_server_is_used_but_never_kept(tmp_path, redis_server, tdev):
    """A poisoned fact (no secret to refuse it) hides a function while the server holds it,
    and not a moment longer: the local cache never keeps it."""
    m = load(tmp_path / "local", redis_server)
    RemoteTier(remote_settings(redis_server.url)).note_fact(
        m.functions_fact("poly"), {"poly": False}
    )
    with pytest.raises(slangspec.UnknownFunctionError):
        _ = m.poly
    redis_server.client().flushall()
    poly_checked(
        slangspec.load(
            HERE / "shaders" / "cached.slang",
            include_paths=[HERE / "slang_lib"],
            cache_dir=tmp_path / "local",
        ),
        tdev,
    )


def test_an_oversized_blob_is_refused_before_it_travels(tmp_path, redis_server, monkeypatch, tdev):
    from slangspec.cache_store import remote

    poly_checked(load(tmp_path / "first", redis_server), tdev)
    client = redis_server.client()
    (key,) = entries(redis_server)
    name = next(iter(json.loads(client.get(key))["kernels"].values()))
    # A limit every blob the first node published keeps (cubins too, on CUDA), then one past it.
    limit = max(client.strlen(k) for k in client.scan_iter(PREFIX + "*blob:*"))
    monkeypatch.setattr(remote, "MAX_BLOB_BYTES", limit)
    client.set(PREFIX + "blob:" + name, b"x" * (limit + 1))
    before = compile_counts["specialize"]
    with pytest.warns(
        CacheWarning, match=rf"{name} is {limit + 1} bytes, past the limit of {limit}"
    ):
        poly_checked(load(tmp_path / "second", redis_server), tdev)
    assert compile_counts["specialize"] == before + 1


def test_a_fact_past_its_bound_is_refused_unread_and_never_published(redis_server):
    """Entries and facts are a few kilobytes: one of 400 MB cost a fresh node 44 s and 2.1 GB.
    Blobs keep their own bound (see the test above): one of 2 MiB travels."""
    tier = RemoteTier(remote_settings(redis_server.url))
    big = {"a": "x" * MAX_VALUE_BYTES}
    with pytest.warns(CacheWarning, match=r"is not sent fact f, which is \d+ bytes, past the"):
        tier.note_fact("f", big)
    client = redis_server.client()
    assert client.dbsize() == 0
    client.set(PREFIX + "fact:f", json.dumps({"value": big}))
    tracemalloc.start()
    try:
        with pytest.warns(CacheWarning, match=r"\(ProtocolError: a string of \d+ bytes, past"):
            assert tier.fact("f") == {}
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_VALUE_BYTES, "the fact was read before it was refused"
    snapshot = os.urandom(2 * MAX_VALUE_BYTES)
    fresh = RemoteTier(remote_settings(redis_server.url))
    fresh.share_shader_snapshot(SHADERS + "n", snapshot)
    assert RemoteTier(remote_settings(redis_server.url)).shader_snapshot(SHADERS + "n") == snapshot


def test_json_nested_past_the_decoders_depth_is_garbage_like_any_other(redis_server):
    """It raised RecursionError out of the tier, which only ValueError means garbage to."""
    tier = RemoteTier(remote_settings(redis_server.url))
    client = redis_server.client()
    client.set(PREFIX + "entry:k", "[" * 100_000)
    client.set(PREFIX + "fact:f", "[" * 100_000)
    with pytest.warns(CacheWarning, match=r"entry k that does not decode \(JSON nested too deep"):
        assert not tier.get("k").usable
    with pytest.warns(CacheWarning, match=r"fact f that does not decode \(JSON nested too deep"):
        assert tier.fact("f") == {}
    assert tier.listing() == [("k", None)]


def test_a_call_fetches_each_blob_once_even_when_it_is_refused(
    tmp_path, redis_server, monkeypatch, tdev
):
    poly_checked(load(tmp_path / "first", redis_server), tdev)
    client = redis_server.client()
    (key,) = entries(redis_server)
    name = next(iter(json.loads(client.get(key))["kernels"].values()))
    client.set(PREFIX + "blob:" + name, b"damaged, and not what its name hashes")
    fetched: list[str] = []
    fetch = RemoteTier._blobs

    def counted(self, wanted):
        fetched.extend(wanted)
        return fetch(self, wanted)

    monkeypatch.setattr(RemoteTier, "_blobs", counted)
    with pytest.warns(CacheWarning, match="does not match its name"):
        poly_checked(load(tmp_path / "second", redis_server), tdev)  # forward and backward
    repeated = {n: fetched.count(n) for n in fetched if fetched.count(n) > 1}
    assert fetched and not repeated


def an_edited_plan(client, stored) -> None:
    """A plan edited where the generated code does not show it: the first argument's name."""
    plan = json.loads(stored["plan"])
    plan["args"][0]["param"] = "renamed"
    stored["plan"] = json.dumps(plan)


@pytest.mark.parametrize("change", [a_name_that_is_no_blob, a_garbled_plan, an_edited_plan])
def test_verify_on_the_remote_finds_and_removes_what_a_node_would_refuse(
    tmp_path, redis_server, change
):
    url = redis_server.url
    assert run(tmp_path / "node", "--signatures", "1", env=remote_env(redis_server))["ok"]
    assert specialize("cache", "verify", "--remote", url, "--json")["problems"] == []
    tamper_entry(redis_server, change)
    from click.testing import CliRunner

    from slangspec.cli import main

    found = CliRunner().invoke(main, ["cache", "verify", "--remote", url, "--json"])
    assert found.exit_code == 1, found.output
    (problem,) = json.loads(found.output)["problems"]
    if change is an_edited_plan:
        assert problem["problem"] == "plan is not the one type resolution makes for its call"
    repaired = specialize("cache", "verify", "--remote", url, "--repair", "--json")
    assert repaired["repaired"] == 1 and repaired["remaining"] == []
    assert entries(redis_server) == []


def test_verify_on_the_remote_removes_facts_without_a_valid_mac(
    tmp_path, redis_server, monkeypatch
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", "a shared secret of this cluster")
    env = remote_env(redis_server)
    assert run(tmp_path / "node", "--signatures", "1", env=env)["ok"]
    url = redis_server.url
    assert specialize("cache", "verify", "--remote", url, "--json")["problems"] == []
    client = redis_server.client()
    (fact,) = list(client.scan_iter(PREFIX + "*fact:functions:*"))
    client.set(fact, json.dumps({"value": {"poly": False}}))  # no MAC
    from click.testing import CliRunner

    from slangspec.cli import main

    with pytest.warns(CacheWarning, match="without a valid MAC"):
        found = CliRunner().invoke(main, ["cache", "verify", "--remote", url, "--json"])
    assert found.exit_code == 1
    (problem,) = json.loads(found.output)["problems"]
    assert "does not decode, or is not proven" in problem["problem"]
    specialize("cache", "verify", "--remote", url, "--repair", "--json")
    assert list(client.scan_iter(PREFIX + "*fact:functions:*")) == []
