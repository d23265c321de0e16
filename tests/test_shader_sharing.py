"""slangpy's shader cache (Vulkan target code and pipelines) shared through the remote tier,
against a real redis-server: a node at another cache root takes the newest snapshot another
node offered before its device opens, and creates no pipeline that node created; a snapshot
that fails its checks is refused and the node builds its own; a server that proves nothing
(no secret) carries no snapshot."""

from __future__ import annotations

import json

import pytest
from conftest import DEVICE_KIND

import slangspec
from slangspec.cache_store import remote_admin
from slangspec.cache_store.keys import SHADERS, SNAPSHOT, shader_cache_fact
from slangspec.cache_store.remote import RemoteTier
from slangspec.cache_store.remote_config import RemoteSettings
from slangspec.cache_store.shader_snapshots import ShaderSnapshots
from workers import HERE, last_line, python

SECRET = "a shared secret of this cluster"

pytestmark = pytest.mark.skipif(
    DEVICE_KIND != "vulkan", reason="slangpy's shader cache is the Vulkan device's"
)


NODE = """
import json, sys
import torch, slangspec
module, library, root, url = sys.argv[1:5]
m = slangspec.load(module, include_paths=[library], cache_dir=root, remote=url)
a = torch.randn(1, requires_grad=True)
x = torch.randn(9, requires_grad=True)
y = m.poly(a, x)
y.sum().backward()
torch.testing.assert_close(y, (a * x * x + 3 * a).detach())
torch.testing.assert_close(x.grad, (2 * a * x).detach())
stats = m.backend.device.shader_cache_stats
print(json.dumps({"hits": stats.hit_count, "misses": stats.miss_count}))
"""


def node(root, server) -> dict:
    """A fresh process of a node whose cache root is ``root``: its first poly forward and
    backward, checked against torch, and what slangpy's shader cache counted."""
    module, library = HERE / "shaders" / "cached.slang", HERE / "slang_lib"
    done = python(NODE, module, library, root, server.url)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(last_line(done.stdout)), "stderr": done.stderr}


def snapshot_facts(server) -> list[bytes]:
    return list(server.client().scan_iter(f"*fact:{SHADERS}*"))


def test_a_node_at_another_path_takes_the_pipelines_another_created(
    tmp_path, redis_server, monkeypatch
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)
    first = node(tmp_path / "one", redis_server)
    assert first["misses"] > 0
    assert len(snapshot_facts(redis_server)) == 1
    second = node(tmp_path / "elsewhere" / "two", redis_server)
    assert second["hits"] > 0
    assert second["misses"] == 0, "the second node built what the first had offered"


def test_a_snapshot_that_fails_its_checks_is_refused(tmp_path, redis_server, monkeypatch):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)
    node(tmp_path / "one", redis_server)
    client = redis_server.client()
    remote = RemoteTier(RemoteSettings(redis_server.url, SECRET.encode()))
    (name,) = [k.decode().split("fact:", 1)[1] for k in snapshot_facts(redis_server)]
    blob, _ = remote.fact(name)[SNAPSHOT]
    (key,) = client.scan_iter(f"*blob:{blob}")
    client.set(key, b"\0" * len(client.get(key)))
    second = node(tmp_path / "two", redis_server)
    assert "does not match its name or SHA-256" in second["stderr"]
    assert second["misses"] > 0


def test_a_server_without_a_secret_carries_no_snapshot(tmp_path, redis_server, monkeypatch):
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")
    node(tmp_path / "one", redis_server)
    assert snapshot_facts(redis_server) == []
    second = node(tmp_path / "two", redis_server)
    assert second["misses"] > 0


def test_eviction_keeps_the_snapshot_and_verify_checks_its_fact(
    tmp_path, redis_server, monkeypatch
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", SECRET)
    node(tmp_path / "one", redis_server)
    remote = RemoteTier(RemoteSettings(redis_server.url, SECRET.encode()))
    (name,) = [k.decode().split("fact:", 1)[1] for k in snapshot_facts(redis_server)]
    remote_admin.evict(remote, slangspec.EntryFilter(module="no such module"))
    assert remote.shader_snapshot(name) is not None
    assert remote_admin.verify(remote)["problems"] == []
    remote.note_fact(name, {SNAPSHOT: ["m_0000000000000000", "0" * 64]})
    (problem,) = remote_admin.verify(remote, repair=True)["problems"]
    assert "its value does not have its kind's shape" in problem["problem"]


class _Offered:
    def __init__(self, data: bytes | None) -> None:
        self.data = data
        self.offers: list[bytes] = []

    def fetch(self) -> bytes | None:
        return self.data

    def offer(self, data: bytes) -> None:
        self.offers.append(data)


@pytest.mark.parametrize("data", [None, b"", b"\0" * 8192], ids=["none", "empty", "not lmdb"])
def test_a_root_without_a_snapshot_keeps_none_that_is_not_whole(tmp_path, data):
    snapshots = ShaderSnapshots(tmp_path / "shaders", 1 << 22)
    snapshots.share_through(_Offered(data))
    private = snapshots.checkout()
    assert list(private.iterdir()) == []
    assert snapshots.damaged() is None
    assert not (tmp_path / "shaders").exists() or list((tmp_path / "shaders").iterdir()) == []


def test_the_fact_covers_the_toolchain():
    assert shader_cache_fact({"slangpy": "0.43.1"}) != shader_cache_fact({"slangpy": "0.44"})
