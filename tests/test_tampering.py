"""A cache that was tampered with, damaged, locked or left open to others never runs code from
its rows, never touches files outside itself, and never stops a computation."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import threading
import time
import warnings
import zlib
from collections import Counter
from pathlib import Path

import pytest
import torch

import slangspec
from slangspec.aot.bundle import export_bundle, import_bundle
from slangspec.cache_store import disk, key_of, location
from slangspec.runtime.module import Module
from slangspec.runtime.module_base import load_module_source
from workers import copied, load, python, report, run, worker

NEW_ROW = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size,"
    " mode, filename, value) VALUES (?, ?, 0, NULL, 0, 0, NULL, 0, ?, ?, ?)"
)


def opens(path: Path) -> bytes:
    """A pickle that, when loaded, creates ``path``: what a crafted row would run."""
    return b"cbuiltins\nopen\n(V" + str(path).encode() + b"\nVw\ntR."


def index(cache: Path) -> sqlite3.Connection:
    return sqlite3.connect(cache / "index" / "cache.db")


def entry_rowids(db: sqlite3.Connection) -> list[int]:
    rowids = []
    for rowid, key in db.execute("SELECT rowid, key FROM Cache WHERE raw = 1").fetchall():
        if json.loads(zlib.decompress(key)).startswith("entry:"):
            rowids.append(rowid)
    return rowids


def test_pickled_values_are_refused_never_loaded(tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    assert run(cache, "--signatures", "1")["ok"]
    with index(cache) as db:
        db.execute("UPDATE Cache SET mode = 4, value = ?", (opens(marker),))
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    c.stats()
    c.verify(repair=True)
    assert not marker.exists(), "a row in the cache ran code"


def test_pickled_keys_are_refused_never_loaded(tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    assert run(cache, "--signatures", "1")["ok"]
    with index(cache) as db:
        db.execute(NEW_ROW, (opens(marker), 0, 1, None, b"{}"))
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    assert len(c.entries()) == 1 and c.records()
    c.verify(repair=True)
    assert not marker.exists(), "a key in the cache ran code"


def test_a_row_naming_a_file_outside_the_index_touches_nothing(tmp_path):
    cache, victim = tmp_path / "cache", tmp_path / "victim"
    victim.write_text("not the cache's")
    assert run(cache, "--signatures", "2")["ok"]
    with index(cache) as db:
        for rowid in entry_rowids(db):
            db.execute(
                "UPDATE Cache SET mode = 2, filename = '../../victim', value = NULL "
                "WHERE rowid = ?",
                (rowid,),
            )
    assert run(cache, "--signatures", "2")["ok"]
    slangspec.Cache(cache).verify(repair=True)
    assert victim.read_text() == "not the cache's"


def test_a_cache_others_can_write_is_never_run_from(tmp_path, tdev):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.warns(slangspec.CacheWarning, match="others can write to it"):
        m = load(cache)
    a, x = torch.ones(1, device=tdev), torch.full((4,), 2.0, device=tdev)
    torch.testing.assert_close(m.poly(a, x), torch.full((4,), 7.0, device=tdev))
    assert list(cache.iterdir()) == [], "kernels were kept where others could change them"


def test_files_the_cache_writes_are_private(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    files = [p for part in ("index", "kernels", "binaries") for p in (cache / part).rglob("*")]
    files = [p for p in files if p.is_file()]
    assert files
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, f"{p} is readable by others"


@contextlib.contextmanager
def locked_index(cache: Path, tdev: str, monkeypatch, wait: float):
    """A module of a cache whose index another connection holds locked, and its first argument;
    index operations wait ``wait`` seconds."""
    a = torch.ones(1, device=tdev)
    load(cache).poly(a, torch.ones(4, device=tdev))
    monkeypatch.setattr(disk, "INDEX_WAIT_SECONDS", wait)
    fresh = load(cache)
    db = index(cache)
    db.execute("BEGIN EXCLUSIVE")
    try:
        yield fresh, a
    finally:
        db.rollback()
        db.close()


def test_a_locked_index_is_set_aside_not_rebuilt(tmp_path, tdev, monkeypatch):
    cache = tmp_path / "cache"
    with (
        locked_index(cache, tdev, monkeypatch, 0.2) as (fresh, a),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        y = fresh.poly(a, torch.ones(4, 3, device=tdev))
        fresh.poly(a, torch.ones(4, 2, device=tdev))
    torch.testing.assert_close(y, torch.full((4, 3), 4.0, device=tdev))
    set_aside = [w for w in caught if "cannot be used now" in str(w.message)]
    assert len(set_aside) == 1, [str(w.message) for w in caught]
    assert len(slangspec.Cache(cache).entries()) == 1, "the index lost what it held"


def test_a_locked_index_is_set_aside_within_its_wait_not_a_minute(tmp_path, tdev, monkeypatch):
    """diskcache retries a locked index for 60 s as it opens it; slangspec waits only as long
    as any index operation does before it computes without caching."""
    cache = tmp_path / "cache"
    with locked_index(cache, tdev, monkeypatch, 1.0) as (fresh, a):
        start = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = fresh.poly(a, torch.ones(4, 3, device=tdev))
        took = time.monotonic() - start
    torch.testing.assert_close(y, torch.full((4, 3), 4.0, device=tdev))
    assert took < 10, f"the call waited {took:.1f} s on a locked index"


@pytest.mark.parametrize("damage", ["bytes", "directory"])
def test_a_damaged_module_copy_is_rewritten_and_reported(tmp_path, tdev, damage):
    cache = tmp_path / "cache"
    source = "[Differentiable] float twice(float x) { return 2.0 * x; }"
    slangspec.load_source("copied", source, cache_dir=cache)
    (copy,) = (cache / "modules").glob("*/copied.slang")
    if damage == "bytes":
        copy.write_bytes(b"\xff\xfe not utf-8")
    else:
        copy.unlink()
        copy.mkdir()
        (copy / "inside").write_bytes(b"x")
    assert slangspec.Cache(cache).verify()["problems"] == [
        {"key": "", "problem": f"module copy {copy} is damaged"}
    ]
    with pytest.warns(slangspec.CacheWarning, match="copied.slang is damaged; writing it again"):
        m = slangspec.load_source("copied", source, cache_dir=cache)
    x = torch.ones(3, device=tdev)
    torch.testing.assert_close(m.twice(x), 2 * x)
    assert slangspec.Cache(cache).verify()["problems"] == []


def test_a_clear_between_writing_a_source_module_and_compiling_it_breaks_nothing(tmp_path, tdev):
    """Another process's ``cache clear`` removes a ``load_source`` module's file after it is
    written: the module is keyed from the source it was given, and written again to compile."""
    cache = slangspec.Cache(tmp_path / "cache")
    files = cache.files
    written = files.write_module

    def cleared_after(name: str, source: str) -> Path:
        path = written(name, source)
        shutil.rmtree(tmp_path / "cache" / "modules")
        return path

    files.write_module = cleared_after  # type: ignore[method-assign]
    source = "[Differentiable] float thrice(float x) { return 3.0 * x; }"
    m = load_module_source(Module, "cleared", source, cache=cache)
    files.write_module = written  # type: ignore[method-assign]
    assert not (tmp_path / "cache" / "modules").exists()
    x = torch.ones(3, device=tdev)
    torch.testing.assert_close(m.thrice(x), 3 * x)
    assert list((tmp_path / "cache" / "modules").glob("*/cleared.slang"))


def test_a_dead_lease_holder_is_taken_over_at_once(tmp_path):
    cache = tmp_path / "cache"
    long_lease = {"SLANGSPEC_CACHE_LEASE": "600"}
    holder = worker(cache, "--lease-and-die", env=long_lease)
    holder.communicate(timeout=300)
    assert holder.returncode == -9
    start = time.monotonic()
    r = run(cache, "--signatures", "1", env=long_lease)
    assert r["ok"] and r["counts"]["specialize"] == 1
    # One process's start-up and compile, not the dead holder's ten-minute lease.
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-3", "soon"])
def test_lease_settings_are_checked(monkeypatch, value):
    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", value)
    with pytest.raises(ValueError, match=rf"SLANGSPEC_CACHE_LEASE='{value}': expected a number"):
        location.lease_seconds()


def test_a_tiny_size_bound_still_computes(tmp_path):
    r = run(tmp_path / "cache", "--signatures", "2", env={"SLANGSPEC_CACHE_SIZE": "4096"})
    assert r["ok"]


def test_a_part_replaced_by_a_file_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    for part in ("kernels", "binaries"):
        location.shutil.rmtree(cache / part)
        (cache / part).write_text("not a directory")
    assert run(cache, "--signatures", "1")["ok"]
    assert (cache / "kernels").is_dir()


def test_an_entry_pointing_at_another_kernel_is_caught_and_dropped(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "2")["ok"]
    c = slangspec.Cache(cache)
    (first, row), (_, other) = c.rows()
    first_forward, elsewhere = row["kernels"]["forward"], other["kernels"]["forward"]
    c.disk.update(first, lambda row: row["kernels"].__setitem__("forward", elsewhere))
    problems = [p["problem"] for p in c.verify()["problems"]]
    assert problems[0] == f"kernel sources {elsewhere} (forward) are not what its plan generates"
    assert problems[1:] == [f"kernel source {first_forward} is referenced by no entry"]
    c.verify(repair=True)
    assert [k for k, _ in c.rows()] != [first] and len(c.entries()) == 1
    assert run(cache, "--signatures", "2")["ok"]


def crafted(tmp_path: Path, change) -> Path:
    """A bundle exported from a real cache, then changed by ``change(bundle)``."""
    source = tmp_path / "source"
    if not source.exists():
        assert run(source, "--signatures", "2")["ok"]
    path = tmp_path / "bundle.json"
    export_bundle(slangspec.Cache(source), path)
    bundle = json.loads(path.read_text())
    change(bundle)
    path.write_text(json.dumps(bundle))
    return path


def swap_forward(bundle: dict) -> None:
    first, second = bundle["entries"]
    first["kernels"]["forward"] = second["kernels"]["forward"]


@pytest.mark.parametrize(
    "change, field",
    [
        (swap_forward, r"entries\[0\]\.kernels\.forward: k_\w+ is not the source its plan"),
        (lambda b: b["entries"][0].update(plan="{not json"), r"entries\[0\]\.plan: not a plan"),
        (lambda b: b["entries"][0].update(kernels=None), r"entries\[0\]\.kernels: expected"),
        (lambda b: b["records"][0].update(defines=[]), r"records\[0\]\.defines: expected"),
        (lambda b: b.update(sources=None), r"sources: expected an object of strings"),
    ],
)
def test_a_crafted_or_malformed_bundle_is_refused_whole(tmp_path, change, field):
    target = tmp_path / "target"
    with pytest.raises(ValueError, match=field):
        import_bundle(slangspec.Cache(target), crafted(tmp_path, change))
    assert slangspec.Cache(target).entries() == [] and slangspec.Cache(target).records() == []


def test_a_bundle_plan_edited_where_the_code_does_not_show_it_is_not_imported(tmp_path):
    def rename(bundle: dict) -> None:
        plan = json.loads(bundle["entries"][0]["plan"])
        plan["args"][0]["param"] = "renamed"  # the generated kernels are the same
        bundle["entries"][0]["plan"] = json.dumps(plan)

    target = slangspec.Cache(tmp_path / "target")
    report = import_bundle(target, crafted(tmp_path, rename))
    assert report["entries"] == 1
    (skipped,) = [s for s in report["skipped"] if s["what"].startswith("entry")]
    assert skipped["why"] == "its plan is not the one type resolution makes for its call here"
    assert [p for p in target.verify()["problems"] if p["key"]] == []


def test_shrinking_a_cache_reads_each_row_once(tmp_path, monkeypatch):
    c = slangspec.Cache(tmp_path / "cache")
    for i in range(60):
        pre = {"module": "m", "function": "f", "signature": f"m::f call s{i}"}
        pre["device"] = {"kind": "vulkan", "adapter": "none"}
        forward = c.write_blob("source", f"// forward {i}\n" + "x" * 4000)
        c.insert(key_of(pre), pre, "{}", {"forward": forward})
    reads: Counter[str] = Counter()
    real = disk.DiskTier.row

    def counted(self, key):
        reads[key] += 1
        return real(self, key)

    monkeypatch.setattr(disk.DiskTier, "row", counted)
    assert len(c.evict(max_size=c.disk.size() // 2)) >= 25
    assert max(reads.values()) == 1, "rows were read again for every eviction"


def test_a_concurrent_clear_never_breaks_a_running_process(tmp_path):
    cache = tmp_path / "cache"
    stop = threading.Event()

    def clearing() -> None:
        while not stop.wait(0.25):
            slangspec.Cache(cache).clear()

    clearer = threading.Thread(target=clearing)
    clearer.start()
    try:
        reports = [report(p) for p in [worker(cache, "--signatures", "5") for _ in range(4)]]
    finally:
        stop.set()
        clearer.join()
    assert all(r["ok"] for r in reports)


def test_a_directory_a_clear_removes_between_listings_holds_nothing(tmp_path, monkeypatch):
    """A clear in another process may remove a directory after its parent was listed and before
    it is; the module cache's count and the module and blob listings then skip it."""
    root = tmp_path / "cache"
    root.mkdir()
    tier = disk.DiskTier(root)
    for config in ("a", "b"):
        module = root / "slang" / config / "1" / "m.slang-module"
        module.parent.mkdir(parents=True)
        module.write_bytes(b"ir")
    (tier.kernel_dir / "k_0.slang").write_text("source")
    listing = os.scandir

    def cleared_first(path=".", *rest):
        if not isinstance(path, int) and Path(path).name in ("a", "kernels"):
            shutil.rmtree(path)
        return listing(path, *rest)

    monkeypatch.setattr(os, "scandir", cleared_first)
    tier.note_module_cache()
    assert tier.size() > 0
    assert location.compiled_modules(root, "m") == [root / "slang" / "b" / "1" / "m.slang-module"]
    assert list(tier.blob_names()) == []


def test_a_directory_where_a_kernel_source_belongs_is_replaced(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "2")["ok"]
    for source in (cache / "kernels").glob("*.slang"):
        source.unlink()
        source.mkdir()
    for cubin in (cache / "binaries").glob("*.cubin"):  # so that CUDA reads the sources too
        cubin.unlink()
    assert run(cache, "--signatures", "2")["ok"]
    assert all(p.is_file() for p in (cache / "kernels").glob("*.slang"))
    assert slangspec.Cache(cache).verify()["problems"] == []


AFFINE = """
[Differentiable] float affine(float w, float x, float b) { return w * x + b; }
"""
AFFINE_CALL = """
import sys, torch, slangspec
m = slangspec.load_source("affine", sys.argv[2], cache_dir=sys.argv[1])
w = torch.full((5,), 2.0, device=m.torch_device, requires_grad=True)
x = torch.arange(5.0, device=m.torch_device)
y = m.affine(w, x, 1.0)
y.sum().backward()
torch.testing.assert_close(y.detach(), 2 * x + 1)
torch.testing.assert_close(w.grad, x)
print("ok")
"""


def affine_process(cache: Path) -> subprocess.CompletedProcess:
    return python(AFFINE_CALL, cache, AFFINE, timeout=240)


@pytest.fixture(scope="module")
def affine_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("affine") / "cache"
    first = affine_process(cache)
    assert first.stdout.strip().endswith("ok"), first.stderr
    return cache


@pytest.mark.parametrize("seed", [8, 11])
def test_byte_damage_inside_the_shader_cache_leads_to_a_rebuild(tmp_path, affine_cache, seed):
    # LMDB has no checksums: these flips inside pages kill a process that maps the file (SIGBUS).
    cache = copied(affine_cache, tmp_path / "cache")
    rng = random.Random(seed)
    for path in (cache / "shaders").rglob("*.mdb"):
        if path.stat().st_size > 8192:
            data = bytearray(path.read_bytes())
            for _ in range(40):
                data[rng.randrange(len(data))] ^= 0x5A
            path.write_bytes(bytes(data))
    for _ in range(2):
        again = affine_process(cache)
        assert again.returncode == 0 and again.stdout.strip().endswith("ok"), again.stderr[-3000:]


def test_a_kernel_evicted_by_another_process_is_rebuilt_without_a_warning(
    tmp_path, tdev, monkeypatch
):
    cache = tmp_path / "cache"
    a, x = torch.ones(1, device=tdev), torch.ones(4, device=tdev)
    load(cache).poly(a, x)
    fresh = load(cache)

    def evicted_meanwhile(read):
        def read_after_eviction(name):
            slangspec.Cache(cache).evict(slangspec.EntryFilter(unused_since=-1))
            return read(name)

        return read_after_eviction

    # Another process evicts between this one's lookup and its read of the entry's kernel.
    monkeypatch.setattr(fresh.cache, "read_blob", evicted_meanwhile(fresh.cache.read_blob))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fresh.poly(a, x)
    torch.testing.assert_close(y, torch.full((4,), 4.0, device=tdev))
    assert [str(w.message) for w in caught] == []


def test_an_eviction_elsewhere_tells_a_failed_build_to_try_again(tmp_path, tdev):
    cache = tmp_path / "cache"
    load(cache).poly(torch.ones(1, device=tdev), torch.ones(4, device=tdev))
    c = slangspec.Cache(cache)
    before = c.files.layout_id()
    assert slangspec.Cache(cache).evict(slangspec.EntryFilter(function="poly"))
    assert c.files.layout_id() != before


def test_a_clear_during_the_front_end_load_is_retried(tmp_path, kind, tdev, monkeypatch):
    import slangspec.compile as compile_path

    cache = tmp_path / "cache"
    m = load(cache)
    # The front-end: Slang's C API on CUDA (as the compile path's face names it to the build
    # backend), slangpy's session on Vulkan.
    owner = compile_path if kind == "cuda" else m.backend.compiler
    front_end = owner.front_end
    calls = []

    def cleared_meanwhile(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            slangspec.Cache(cache).clear()
            raise RuntimeError("filesystem error: cannot create directories")
        return front_end(*args, **kwargs)

    monkeypatch.setattr(owner, "front_end", cleared_meanwhile)
    y = m.poly(torch.ones(1, device=tdev), torch.ones(4, device=tdev))
    torch.testing.assert_close(y, torch.full((4,), 4.0, device=tdev))
    assert len(calls) == 2


def test_an_index_found_damaged_inside_a_transaction_is_replaced_without_a_crash(tmp_path):
    tier = slangspec.Cache(tmp_path / "cache").disk
    tier.count(disk.HITS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tier._transact():
            # What a read inside the block does when it finds the database malformed.
            tier._rebuild_index(sqlite3.DatabaseError("database disk image is malformed"))
    assert "is damaged" in str(caught[0].message)
    tier.count(disk.HITS)
    assert tier.counters() == (1, 0)


@pytest.mark.parametrize("recreated", [False, True], ids=["gone", "recreated empty"])
def test_an_index_a_clear_removed_is_opened_again_from_another_thread(tmp_path, recreated):
    c = slangspec.Cache(tmp_path / "c")
    c.count_miss()
    slangspec.Cache(tmp_path / "c").clear()
    if recreated:
        (tmp_path / "c" / "index").mkdir(parents=True)
        sqlite3.connect(tmp_path / "c" / "index" / "cache.db").close()
    seen: dict = {}

    def autograd_like_thread() -> None:
        # A thread that has not used the index yet opens a connection of its own.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            c.count_miss()
            seen["misses"] = c.stats()["misses"]
        seen["warnings"] = [str(w.message) for w in caught]

    thread = threading.Thread(target=autograd_like_thread)
    thread.start()
    thread.join()
    assert seen["warnings"] == []
    assert seen["misses"] == 1
    assert slangspec.Cache(tmp_path / "c").stats()["misses"] == 1


def _verify_finds(cache: Path, text: str) -> None:
    found = slangspec.Cache(cache).verify()["problems"]
    assert any(text in p["problem"] for p in found), found
    slangspec.Cache(cache).verify(repair=True)
    assert slangspec.Cache(cache).verify()["problems"] == []


def test_verify_finds_a_plan_edited_where_the_code_does_not_show_it(tmp_path, tdev):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    (key,) = [k for k, _ in c.rows()]
    plan = json.loads(c.disk.row(key)["plan"])
    plan["args"][0]["param"] = "renamed"  # the generated kernel is the same

    def edit(row: dict) -> None:
        row["plan"] = json.dumps(plan)

    c.disk.update(key, edit)
    _verify_finds(cache, "plan is not the one type resolution makes for its call")
    assert [k for k, _ in slangspec.Cache(cache).rows()] == []


def test_verify_finds_an_entry_naming_what_is_no_blob(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    (key,) = [k for k, _ in c.rows()]
    c.disk.update(key, lambda row: row["kernels"].update(forward="../../etc/passwd"))
    _verify_finds(cache, "is not a kernel source name")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"functions": 3}, "does not have its kind's shape"),
        ({"poly": False}, "has no function poly, which entry"),
    ],
)
def test_verify_finds_facts_that_are_misshapen_or_contradict_an_entry(tmp_path, value, text):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    (functions,) = c.disk.fact_names("functions:")
    names = functions.replace("functions:", "names:", 1)
    c.disk.note_fact(names if "functions" in value else functions, value)
    _verify_finds(cache, text)


def test_a_row_naming_what_is_no_blob_is_dropped_and_rebuilt_with_a_warning(cache_dir, tdev):
    a, b = torch.ones(3, device=tdev), torch.full((3,), 2.0, device=tdev)
    m = load(cache_dir)
    torch.testing.assert_close(m.twin(a, b), torch.full((3,), 3.0, device=tdev))
    signature = m.twin.signature(a, b)
    c = slangspec.Cache(cache_dir)
    (key,) = [k for k, row in c.rows() if row and row["preimage"]["signature"] == signature]
    c.disk.update(key, lambda row: row["kernels"].update(forward="zz"))
    found = [p["problem"] for p in c.verify()["problems"] if p["key"] == key]
    assert found == [
        "plan does not fit its entry: kernels.forward: 'zz' is not a kernel source name"
    ]
    with pytest.warns(slangspec.CacheWarning, match=f"entry {key[:12]} dropped: .*'zz' is not a"):
        torch.testing.assert_close(load(cache_dir).twin(a, b), torch.full((3,), 3.0, device=tdev))
    assert c.disk.row(key)["kernels"]["forward"].startswith("k_")
