"""slangpy's module cache shared through the remote tier, against a real redis-server: a node
fetches the compiled modules its own module cache lacks (slangpy's Slang library above all)
instead of compiling them again, at whatever cache root path, since Slang reaches every node's
module cache at one path; a fact for another path finds nothing; what the server holds is
checked before it is written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import slangspec
from slangspec.cache_store import CacheWarning, remote_admin
from slangspec.cache_store.keys import blob_name, module_cache_fact
from slangspec.cache_store.module_cache import ModuleCacheGuard, slang_path
from slangspec.cache_store.module_seals import SEAL, ModuleSeals
from slangspec.cache_store.remote import RemoteTier
from slangspec.cache_store.remote_config import RemoteSettings
from workers import last_line, python

TOOLCHAIN = {"slang": "test", "slangpy": "test"}
LIBRARY = Path("c" * 40) / "0" / "slangpy.slang-module"
IR = b"compiled IR " * 4000


def listed(data: bytes) -> list[str]:
    """How a module cache's fact lists a compiled module: its blob name and SHA-256."""
    return [blob_name("module", data), hashlib.sha256(data).hexdigest()]


def guard(root: Path, server, secret: str | None = None) -> ModuleCacheGuard:
    """The guard of the module cache under cache root ``root``, as a build makes it."""
    key = None if secret is None else secret.encode()
    settings = RemoteSettings(server.url, key, trust_all=key is None)
    module_cache = root / "slang"
    fact = module_cache_fact(str(module_cache.resolve()), TOOLCHAIN)
    return ModuleCacheGuard(ModuleSeals(module_cache), RemoteTier(settings), fact)


def compiled_here(g: ModuleCacheGuard, data: bytes = IR) -> Path:
    """What Slang does on a node that compiled slangpy's library, then the seal after it."""
    path = g.root / LIBRARY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    g.seal()
    return path


def test_a_node_at_the_same_path_fetches_what_another_compiled(tmp_path, redis_server):
    root = tmp_path / "node"
    compiled_here(guard(root, redis_server))
    shutil.rmtree(root)  # a fresh node: the same path, nothing in it
    fresh = guard(root, redis_server)
    fresh.check()
    assert (root / "slang" / LIBRARY).read_bytes() == IR
    assert ModuleSeals(root / "slang").damaged() == []
    assert (root / "slang" / LIBRARY).with_name(LIBRARY.name + SEAL).is_file()


def test_fetched_modules_are_written_while_the_device_opens(tmp_path, redis_server):
    """``check_while`` runs its work while the fetched files are written, on another thread;
    once it returns they are in place whole and sealed, also when that work failed."""
    root = tmp_path / "node"
    other = LIBRARY.parent / "other.slang-module"
    g = guard(root, redis_server)
    compiled_here(g)
    (g.root / other).write_bytes(b"another module")
    g.seal()
    shutil.rmtree(root)
    seen = {}

    def meanwhile():
        seen["thread"] = threading.current_thread()
        return "device"

    assert guard(root, redis_server).check_while(meanwhile) == "device"
    assert seen["thread"] is threading.main_thread()
    assert (root / "slang" / LIBRARY).read_bytes() == IR
    assert (root / "slang" / other).read_bytes() == b"another module"
    assert ModuleSeals(root / "slang").damaged() == []
    assert not list((root / "slang").rglob("*.tmp"))

    shutil.rmtree(root)
    with pytest.raises(RuntimeError, match="no device"):
        guard(root, redis_server).check_while(
            lambda: (_ for _ in ()).throw(RuntimeError("no device"))
        )
    assert (root / "slang" / LIBRARY).read_bytes() == IR
    assert (root / "slang" / LIBRARY).with_name(LIBRARY.name + SEAL).is_file()


def test_a_fact_for_another_path_finds_nothing(tmp_path, redis_server):
    compiled_here(guard(tmp_path / "one", redis_server))
    other = guard(tmp_path / "two", redis_server)
    other.check()
    assert not (tmp_path / "two" / "slang" / LIBRARY).exists()


def test_what_a_node_has_is_not_fetched_again(tmp_path, redis_server, monkeypatch):
    g = guard(tmp_path / "node", redis_server)
    compiled_here(g)
    asked = []
    monkeypatch.setattr(RemoteTier, "_blobs", lambda self, names: asked.extend(names) or {})
    g.check()
    assert asked == []


def test_a_blob_that_does_not_match_its_name_is_refused(tmp_path, redis_server):
    root = tmp_path / "node"
    g = guard(root, redis_server)
    compiled_here(g)
    client = redis_server.client()
    (key,) = client.scan_iter("*blob:" + blob_name("module", IR))
    client.set(key, b"other bytes" + IR[11:])
    shutil.rmtree(root)
    with pytest.warns(CacheWarning, match="does not match its name"):
        guard(root, redis_server).check()
    assert not (root / "slang" / LIBRARY).exists()


def test_a_blob_whose_sha256_is_not_the_listed_one_is_refused(tmp_path, redis_server):
    """Blob names use a fast hash that does not resist forgery; the SHA-256 the list holds (and
    a secret's MAC covers) does."""
    root = tmp_path / "node"
    g = guard(root, redis_server)
    compiled_here(g)
    g.remote.note_fact(g.fact, {str(LIBRARY): [blob_name("module", IR), "0" * 64]})
    shutil.rmtree(root)
    with pytest.warns(CacheWarning, match="does not match"):
        guard(root, redis_server).check()
    assert not (root / "slang" / LIBRARY).exists()


@pytest.mark.parametrize(
    "path", ["../../escaped.slang-module", "/etc/escaped.slang-module", "c/0/short.slang-module"]
)
def test_a_fact_naming_a_path_outside_the_module_cache_is_refused(tmp_path, redis_server, path):
    root = tmp_path / "node"
    g = guard(root, redis_server)
    compiled_here(g)
    g.remote.note_fact(g.fact, {path: listed(IR)})
    shutil.rmtree(root)
    with pytest.warns(CacheWarning, match="refused"):
        guard(root, redis_server).check()
    assert (root / "slang" / LIBRARY).read_bytes() == IR, "the good one was refused with it"
    assert not list(tmp_path.rglob("escaped.slang-module"))
    assert not list(tmp_path.rglob("short.slang-module"))


def test_an_oversized_blob_is_refused_before_it_travels(tmp_path, redis_server, monkeypatch):
    root = tmp_path / "node"
    compiled_here(guard(root, redis_server))
    shutil.rmtree(root)
    monkeypatch.setattr("slangspec.cache_store.remote.MAX_BLOB_BYTES", len(IR) - 1)
    asked = []
    fetch = RemoteTier._blobs
    monkeypatch.setattr(
        RemoteTier, "_blobs", lambda self, names: asked.extend(names) or fetch(self, names)
    )
    with pytest.warns(CacheWarning, match="past the limit"):
        guard(root, redis_server).check()
    assert asked == []
    assert not (root / "slang" / LIBRARY).exists()


def test_with_a_secret_an_unsigned_list_is_refused(tmp_path, redis_server):
    root = tmp_path / "node"
    signed = guard(root, redis_server, secret="s3cret")
    compiled_here(signed)
    client = redis_server.client()
    (fact,) = client.scan_iter("*fact:modules:*")
    client.set(
        fact, b'{"value": {"%s": "%s"}}' % (str(LIBRARY).encode(), blob_name("module", IR).encode())
    )
    shutil.rmtree(root)
    with pytest.warns(CacheWarning, match="without a valid MAC"):
        guard(root, redis_server, secret="s3cret").check()
    assert not (root / "slang" / LIBRARY).exists()


def test_nodes_with_another_secret_neither_read_nor_overwrite_the_list(tmp_path, redis_server):
    root = tmp_path / "node"
    compiled_here(guard(root, redis_server, secret="ours"))
    shutil.rmtree(root)
    theirs = guard(root, redis_server, secret="theirs")
    theirs.check()
    assert not (root / "slang" / LIBRARY).exists()
    compiled_here(theirs, b"their IR " * 100)
    shutil.rmtree(root)
    guard(root, redis_server, secret="ours").check()
    assert (root / "slang" / LIBRARY).read_bytes() == IR


def test_evict_on_the_remote_keeps_listed_modules_and_verify_checks_the_list(
    tmp_path, redis_server
):
    g = guard(tmp_path / "node", redis_server)
    compiled_here(g)
    remote_admin.evict(g.remote, slangspec.EntryFilter())
    client = redis_server.client()
    assert list(client.scan_iter("*blob:" + blob_name("module", IR)))
    assert remote_admin.verify(g.remote)["problems"] == []
    g.remote.note_fact(g.fact, {"not a path": "m_0"})
    (problem,) = remote_admin.verify(g.remote, repair=True)["problems"]
    assert "its value does not have its kind's shape" in problem["problem"]
    assert g.remote.fact(g.fact) == {}


def test_a_node_that_trusts_every_writer_never_fetches_compiled_modules(
    tmp_path, redis_server, monkeypatch
):
    """Nothing can check a compiled module against what it was compiled from, so without a
    secret a node compiles its own rather than keep what any writer of the server listed."""
    root = tmp_path / "node"
    compiled_here(guard(root, redis_server))
    shutil.rmtree(root)
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")
    slangspec.Cache.for_running(root, redis_server.url).module_cache_guard(TOOLCHAIN).check()
    assert not (root / "slang" / LIBRARY).exists()


def test_pull_leaves_module_lists_on_the_server(tmp_path, redis_server):
    g = guard(tmp_path / "node", redis_server)
    compiled_here(g)
    cache = slangspec.Cache(tmp_path / "other")
    remote_admin.pull(cache.disk, g.remote)
    assert cache.disk.fact_names("modules:") == []


MIX = """
import sys
import torch, slangspec
kind, function = sys.argv[3], sys.argv[4]
dev = "cuda" if kind == "cuda" else "cpu"
m = slangspec.load(sys.argv[1], cache_dir=sys.argv[2], device=kind, remote=sys.argv[5])
a = torch.arange(1.0, 9.0, device=dev, requires_grad=True)
b = torch.arange(2.0, 10.0, device=dev, requires_grad=True)
getattr(m, function)(a, b, slangspec.grid((8,))).sum().backward()
scale = 2.0 if function == "mix2" else 3.0
torch.testing.assert_close(a.grad, b.detach() + scale)
torch.testing.assert_close(b.grad, a.detach())
print("ok")
"""


def test_slang_reaches_every_module_cache_at_one_path(tmp_path):
    first, second = tmp_path / "one" / "slang", tmp_path / "two" / "slang"
    path = slang_path(first)
    assert path == slang_path(first)
    assert slang_path(second) != path
    (first / "marker").write_text("one")
    assert (path / "marker").read_text() == "one"
    shutil.rmtree(first)  # a cache clear: the path reaches the directory that replaces it
    assert slang_path(first) == path
    assert not (path / "marker").exists()
    (first / "marker").write_text("again")
    assert (path / "marker").read_text() == "again"


SAME_PATH = "the same cache root path"
ANOTHER_PATH = "another cache root path"


@pytest.mark.parametrize("where", [SAME_PATH, ANOTHER_PATH])
def test_a_fresh_node_does_not_compile_slangpys_library(
    tmp_path, redis_server, kind, monkeypatch, where
):
    """The second node calls a function the first never did, so it needs Slang (on CUDA too);
    it publishes no compiled module, because Slang compiled none for it, wherever its cache
    root is."""
    monkeypatch.setenv("SLANGSPEC_REMOTE_SECRET", "a shared secret of this cluster")
    module = tmp_path / "m.slang"
    module.write_text(
        "import slangpy;\n"
        "[Differentiable]\nfloat mix2(IDiffTensor<float, 1> a, IDiffTensor<float, 1> b, int i)"
        " { return a[i] * b[i] + 2.0 * a[i]; }\n"
        "[Differentiable]\nfloat mix3(IDiffTensor<float, 1> a, IDiffTensor<float, 1> b, int i)"
        " { return a[i] * b[i] + 3.0 * a[i]; }\n"
    )
    root = tmp_path / "node"

    def node(function: str) -> None:
        done = python(MIX, module, root, kind, function, redis_server.url)
        assert last_line(done.stdout) == "ok", done.stderr[-2000:]

    client = redis_server.client()
    client.config_set("notify-keyspace-events", "E$")
    writes = client.pubsub()
    writes.subscribe("__keyevent@0__:set")

    def published() -> int:
        """Compiled modules written to the server since the last call (snapshots of slangpy's
        shader cache travel too, as blobs of their own kind)."""
        count = 0
        while (message := writes.get_message(timeout=0.2)) is not None:
            if message["type"] == "message" and b"blob:m_" in message["data"]:
                count += 1
        return count

    node("mix2")
    assert published() >= 1, "the first node did not publish slangpy's library"
    (library,) = root.glob("slang/*/*/slangpy.slang-module")
    shutil.rmtree(root)
    if where == ANOTHER_PATH:
        root = tmp_path / "elsewhere" / "node"
        library = root / library.relative_to(tmp_path / "node")
    node("mix3")
    assert library.is_file()
    assert published() == 0, "the second node compiled a module the first had published"


def test_a_slot_in_use_leaves_slang_the_directory_itself(tmp_path):
    from slangspec.cache_store import module_cache

    taken = module_cache.FIRST_SLOT + len(module_cache._slots)
    held = os.open(tmp_path, os.O_RDONLY)
    try:
        os.dup2(held, taken)  # a descriptor the process uses for something else
        directory = tmp_path / "root" / "slang"
        assert slang_path(directory) == directory
        assert os.path.samestat(os.fstat(taken), os.stat(tmp_path))  # left as it was
    finally:
        os.close(taken)
        os.close(held)


def test_loading_a_module_makes_room_for_the_slots_on_a_thread_of_its_own(tmp_path):
    """The descriptor table grows past the slots while a module loads, so a first build's
    ``slang_path`` takes its slot at once; the descriptor that grew it is closed again."""
    from slangspec.cache_store import module_cache

    code = (
        "import os, sys\n"
        "import slangspec\n"
        "from slangspec.cache_store import module_cache\n"
        "def table():\n"
        "    status = open('/proc/self/status').read()\n"
        "    return int(status.split('FDSize:')[1].split()[0])\n"
        "before = table()\n"
        "slangspec.load(sys.argv[1], cache_dir=sys.argv[2])\n"
        "if module_cache._room is not None:\n"
        "    module_cache._room.join()\n"
        "high = [int(fd) for fd in os.listdir('/proc/self/fd') if int(fd) >= 900]\n"
        "print(before, table(), high)\n"
    )
    module = tmp_path / "m.slang"
    module.write_text("float twice(float x) { return 2.0 * x; }\n")
    # A forked process's table is as large as its parent's highest open descriptor needs, and
    # this process may hold a slot already: a shell's child starts from the shell's few.
    command = ["sh", "-c", '"$0" "$@" & wait $!', sys.executable, "-c", code]
    done = subprocess.run(
        [*command, str(module), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    before, after, high = last_line(done.stdout).split(" ", 2)
    assert int(before) <= module_cache.FIRST_SLOT, done.stderr[-2000:]
    assert int(after) > module_cache.FIRST_SLOT, done.stderr[-2000:]
    assert high == "[]"
