"""The disk cache's guarantees: keys, preimage checks, format versions, warm starts, many
processes, killed lock holders, damage, the size bound, and nothing executable stored."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import warnings
import zlib
from pathlib import Path

import pytest
import torch

import slangspec
from slangspec.cache_store import key_of, location
from slangspec.cache_store.entry import binary_added
from slangspec.compile import toolchain_identity as toolchain
from slangspec.settings import compile_counts
from slangspec.signatures import preimage
from workers import copied, held_by_woken_waiters, load, python, report, run, worker

HERE = Path(__file__).parent
SHADERS = HERE / "shaders"


# --- keys ---------------------------------------------------------------------------------------


def base_preimage(**changes):
    fields = {
        "device": {"kind": "vulkan", "adapter": "llvmpipe"},
        "module": "cached",
        "sources": {"cached.slang": "a", "helpers.slang": "b"},
        "defines": {},
        "function": "poly",
        "signature": "cached::poly call [D1,S6,G1,V1] [D1,S6,G0,Vx]",
    }
    fields.update(changes)
    return preimage.preimage(toolchain=toolchain.toolchain(), **fields)


def test_key_changes_with_every_preimage_component():
    variants = [
        base_preimage(),
        base_preimage(device={"kind": "cuda", "adapter": "H200", "arch": "sm_90"}),
        base_preimage(device={"kind": "vulkan", "adapter": "other"}),
        base_preimage(module="other"),
        base_preimage(sources={"cached.slang": "a", "helpers.slang": "c"}),
        base_preimage(defines={"SCALE": "2"}),
        base_preimage(function="twin"),
        base_preimage(signature="cached::poly call [D1,S6,G0,V1] [D1,S6,G0,Vx]"),
    ]
    for field in (
        "cache_format",
        "signature_format",
        "plan_format",
        "codegen_format",
        "binary_format",
        "slangspec",
        "slangpy",
        "slang",
    ):
        changed = base_preimage()
        changed["toolchain"] = {**changed["toolchain"], field: "other"}
        variants.append(changed)
    keys = [key_of(p) for p in variants]
    assert len(set(keys)) == len(keys)
    assert all(len(k) == 32 for k in keys)


def test_module_closure_covers_transitive_imports(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "top.slang").write_text('import mid;\n#include "inc.h"\nfloat f() { return g(); }')
    (tmp_path / "inc.h").write_text("// included")
    (lib / "mid.slang").write_text("import leaf.deep;\npublic float g() { return h(); }")
    (lib / "leaf").mkdir()
    (lib / "leaf" / "deep.slang").write_text("public float h() { return 1.0; }")
    closure = preimage.module_closure(tmp_path / "top.slang", [lib])
    assert set(closure) == {"top.slang", "inc.h", "mid.slang", "leaf/deep.slang"}
    (lib / "leaf" / "deep.slang").write_text("public float h() { return 2.0; }")
    changed = preimage.module_closure(tmp_path / "top.slang", [lib])
    assert changed["leaf/deep.slang"] != closure["leaf/deep.slang"]
    assert changed["top.slang"] == closure["top.slang"]


@pytest.mark.parametrize("form", ["import", "__exported import", "__import"])
def test_module_closure_covers_every_form_of_import(tmp_path, form):
    (tmp_path / "top.slang").write_text(f"{form} mid;\nfloat f() {{ return g(); }}")
    (tmp_path / "mid.slang").write_text("public float g() { return 1.0; }")
    closure = preimage.module_closure(tmp_path / "top.slang", [])
    assert set(closure) == {"top.slang", "mid.slang"}
    (tmp_path / "mid.slang").write_text("public float g() { return 2.0; }")
    assert preimage.module_closure(tmp_path / "top.slang", []) != closure


def test_imported_names_reads_what_the_compiler_and_the_key_both_need():
    text = 'import slangpy;\n  __exported import a.b;\nimplementing "c";\n#include "d.h"\n'
    assert preimage.imported_names(text) == ["slangpy", "a.b", "c"]
    assert preimage.imported_names("// import slangpy;\nfloat f();") == []


@pytest.mark.parametrize("form", ["import", "__exported import"])
def test_editing_an_imported_file_or_a_define_misses(tmp_path, tdev, form):
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil_copy(SHADERS / "cached.slang", tmp_path / "cached.slang")
    helpers = (HERE / "slang_lib" / "helpers.slang").read_text()
    assert helpers.startswith("import basics;")
    (lib / "helpers.slang").write_text(helpers.replace("import basics;", f"{form} basics;", 1))
    shutil_copy(HERE / "slang_lib" / "basics.slang", lib / "basics.slang")
    cache = tmp_path / "cache"
    a, x = torch.ones(1, device=tdev), torch.full((4,), 2.0, device=tdev)

    def call(defines=None):
        m = slangspec.load(
            tmp_path / "cached.slang", include_paths=[lib], cache_dir=cache, defines=defines
        )
        return m.poly.cache_key(m.poly.signature(a, x)), m.poly(a, x)

    key1, y1 = call()
    (lib / "basics.slang").write_text("[Differentiable]\npublic float one() { return 2.0; }\n")
    key2, y2 = call()
    key3, _ = call({"UNUSED": "1"})
    assert len({key1, key2, key3}) == 3
    torch.testing.assert_close(y1, torch.full((4,), 7.0, device=tdev))
    torch.testing.assert_close(y2, torch.full((4,), 11.0, device=tdev))


def shutil_copy(src: Path, dst: Path) -> None:
    dst.write_bytes(src.read_bytes())


# --- preimage and format checks ---------------------------------------------------------------


def test_stored_preimage_is_compared_on_every_hit(tmp_path):
    c = slangspec.Cache(tmp_path)
    pre = base_preimage()
    key = key_of(pre)
    c.insert(key, pre, "{}", {"forward": "k_" + "0" * 16})
    assert c.lookup(key, pre) is not None
    other = base_preimage(function="twin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c.lookup(key, other) is None
    assert c.lookup(key, pre) is not None, "a lookup only reads"
    with pytest.warns(slangspec.CacheWarning, match="stored preimage differs"):
        assert c.serve(key, other) is None
    assert c.lookup(key, pre) is None, "serving drops the mismatched entry"


@pytest.mark.parametrize(
    "field,current",
    [
        ("cache_format", toolchain.CACHE_FORMAT),
        ("signature_format", toolchain.SIGNATURE_FORMAT),
        ("plan_format", toolchain.PLAN_FORMAT),
        ("codegen_format", toolchain.CODEGEN_FORMAT),
        ("binary_format", toolchain.BINARY_FORMAT),
    ],
)
def test_old_format_entry_is_never_served(tmp_path, tdev, field, current):
    cache = tmp_path / "cache"
    m = load(cache)
    a, x = torch.ones(1, device=tdev), torch.full((4,), 2.0, device=tdev)
    sig = m.poly.signature(a, x)
    pre = m.preimage("poly", sig)
    key = key_of(pre)
    # A shimmed entry as an older slangspec would have written it: the previous format number,
    # stored under the key the current format computes (as a truncated key or collision would).
    old = json.loads(json.dumps(pre))
    old["toolchain"][field] = current - 1
    m.cache.insert(key, old, '{"bogus": true}', {"forward": "k_" + "0" * 16})
    before = compile_counts["specialize"]
    with pytest.warns(slangspec.CacheWarning, match="stored preimage differs"):
        y = m.poly(a, x)
    assert compile_counts["specialize"] == before + 1
    torch.testing.assert_close(y, torch.full((4,), 7.0, device=tdev))
    assert m.cache.lookup(key, pre).row["preimage"]["toolchain"][field] == current


# --- warm start -----------------------------------------------------------------------------------


def slang_module_files(cache: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in (cache / "slang").rglob("*.slang-module")}


def test_warm_process_does_no_resolution_codegen_or_library_front_end(tmp_path, kind):
    cache = tmp_path / "cache"
    cold = run(cache, "--signatures", "3")
    assert cold["counts"]["specialize"] == 3
    compiled = slang_module_files(cache)
    # On CUDA a module that imports nothing (as this one) leaves nothing in the module cache.
    assert compiled or kind == "cuda", "slangpy's module cache lives under the cache root"
    warm = run(cache, "--signatures", "3", "--forbid-compile")
    assert warm["ok"]
    assert warm["counts"].get("specialize", 0) == 0
    assert warm["counts"].get("codegen", 0) == 0
    # CUDA loads cubins; Vulkan compiles the stored kernels against the module's own text,
    # read once, and slangpy's library as compiled IR.
    assert warm["counts"].get("front_end", 0) == (1 if kind == "vulkan" else 0)
    # No compiled module was written again.
    assert slang_module_files(cache) == compiled
    assert slangspec.Cache(cache).stats()["hits"] >= 3


def library_files(cache: Path) -> dict[str, float]:
    files = slang_module_files(cache).items()
    return {p: t for p, t in files if p.endswith("/slangpy.slang-module")}


MIX = """import slangpy;
import helper;
[Differentiable]
float mix(IDiffTensor<float, 1> a, int i) { return twice(a[i]) + OFFSET; }
"""


def test_slangpys_library_is_compiled_once_for_modules_in_every_directory(tmp_path, tdev):
    """Two modules in two directories, each importing slangpy's library and a helper beside
    it: the library is compiled to IR once, and the second module loads it unchanged."""
    cache = tmp_path / "cache"
    for n, place in enumerate(["one", "two"]):
        directory = tmp_path / place
        directory.mkdir()
        (directory / "helper.slang").write_text(
            f"static const float OFFSET = {n}.0;\n"
            "[Differentiable] float twice(float x) { return 2.0 * x; }\n"
        )
        (directory / f"mix_{place}.slang").write_text(MIX)
        m = slangspec.load(directory / f"mix_{place}.slang", cache_dir=cache)
        a = torch.arange(4.0, device=tdev, requires_grad=True)
        y = m.mix(a, slangspec.grid((4,)))
        torch.testing.assert_close(y, 2.0 * a.detach() + n)
        y.sum().backward()
        torch.testing.assert_close(a.grad, torch.full((4,), 2.0, device=tdev))
        if n == 0:
            library = library_files(cache)
            assert len(library) == 1, slang_module_files(cache)
    assert library_files(cache) == library


def test_warm_cuda_process_loads_cubins_and_never_starts_slang(tmp_path, kind):
    if kind != "cuda":
        pytest.skip("binaries are kept for CUDA kernels")
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "3")["ok"]
    rows = [row for _, row in slangspec.Cache(cache).rows()]
    assert len(rows) == 3
    assert all(set(row["binaries"]) == set(row["kernels"]) for row in rows)
    warm = run(cache, "--signatures", "3", "--forbid-slang")
    assert warm["ok"]
    assert warm["counts"].get("kernel", 0) == 0


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_damaged_cubins_are_dropped_and_rebuilt(tmp_path, kind, damage):
    if kind != "cuda":
        pytest.skip("binaries are kept for CUDA kernels")
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "2")["ok"]
    files = list((cache / "binaries").glob("*.cubin"))
    assert files
    for p in files:
        if damage == "missing":
            p.unlink()
        else:
            p.write_bytes(p.read_bytes()[:100])
    again = run(cache, "--signatures", "2")
    assert again["ok"]
    assert again["counts"]["kernel"] >= len(files)  # rebuilt through slangpy
    problems = slangspec.Cache(cache).verify()["problems"]
    assert not [p for p in problems if "missing or damaged" in p["problem"]]
    assert run(cache, "--signatures", "2", "--forbid-slang")["ok"]


# --- many processes -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["load_source", "file"])
@pytest.mark.parametrize("disturbed", [True, False], ids=["cleared", "undisturbed"])
def test_a_build_that_keeps_failing_in_the_cache_is_finished_apart_from_it(
    tmp_path, tdev, monkeypatch, where, disturbed
):
    cache = tmp_path / "cache"
    if where == "file":
        m = load(cache)
    else:
        text = (HERE / "shaders" / "cached.slang").read_text()
        m = slangspec.load_source(
            "cached", text, include_paths=[HERE / "slang_lib"], cache_dir=cache
        )
    backend = type(m.backend)
    real = backend.compiled
    broken = []

    def clear_then_fail(self, sources, apart=None):
        if apart is not None:
            private, include_paths, text = apart
            inside = [private, text.path, *include_paths]
            assert not any(p.resolve().is_relative_to(cache.resolve()) for p in inside)
            return real(self, sources, apart)
        if disturbed:
            slangspec.Cache(cache).clear()
        broken.extend(sources)
        raise RuntimeError("SLANG_FAIL, as when a build reads a module a clear removed")

    monkeypatch.setattr(backend, "compiled", clear_then_fail)
    a = torch.randn(1, device=tdev, requires_grad=True)
    x = torch.randn(5, device=tdev, requires_grad=True)
    y = m.poly(a, x)
    y.sum().backward()
    assert broken, "the builds in the cache were broken"
    torch.testing.assert_close(y, (a * x * x + 3 * a).detach())
    torch.testing.assert_close(a.grad, (x.detach() ** 2 + 3).sum().reshape(1))
    torch.testing.assert_close(x.grad, (2 * a * x).detach())


def test_four_cold_processes_compile_each_key_once(tmp_path):
    cache = tmp_path / "cache"
    procs = [worker(cache, "--signatures", "4") for _ in range(4)]
    reports = [report(p) for p in procs]
    assert all(r["ok"] for r in reports)
    assert sum(r["counts"].get("specialize", 0) for r in reports) == 4
    # Four forward kernels and four backward kernels, each generated by one process only.
    assert sum(r["counts"].get("codegen", 0) for r in reports) == 8
    assert len(slangspec.Cache(cache).entries()) == 4


# --- damage ---------------------------------------------------------------------------------------


def damage_each(cache: Path):
    """Yield (description, damage function) for every kind of stored file."""

    def truncate(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])

    def kernel_sources():
        for p in (cache / "kernels").glob("*.slang"):
            truncate(p)

    def rows(change):
        with sqlite3.connect(cache / "index" / "cache.db") as db:
            for rowid, value in db.execute("SELECT rowid, value FROM Cache").fetchall():
                if isinstance(value, bytes) and b'"plan"' in zlib.decompress(value):
                    db.execute("UPDATE Cache SET value = ? WHERE rowid = ?", (change(value), rowid))

    def index_rows():
        # Well-formed rows with an altered field: only the row checksum can tell.
        rows(lambda v: zlib.compress(zlib.decompress(v).replace(b'"hits":', b'"hits":7', 1)))

    def index_rows_garbled():
        rows(lambda v: v[:-9] + b"garbage!!")

    def index_database():
        truncate(cache / "index" / "cache.db")

    def slang_modules():
        for p in (cache / "slang").rglob("*.slang-module"):
            truncate(p)

    def shader_cache():
        for p in (cache / "shaders").rglob("*"):
            if p.is_file():
                truncate(p)

    def missing_sources():
        for p in (cache / "kernels").glob("*.slang"):
            p.unlink()

    return [
        ("kernel sources truncated", kernel_sources),
        ("index rows altered", index_rows),
        ("index rows garbled", index_rows_garbled),
        ("index database truncated", index_database),
        ("compiled modules truncated", slang_modules),
        ("shader cache truncated", shader_cache),
        ("kernel sources missing", missing_sources),
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("built") / "cache"
    assert run(cache, "--signatures", "2")["ok"]
    return cache


@pytest.mark.parametrize(
    "damage",
    [
        "kernel sources truncated",
        "index rows altered",
        "index rows garbled",
        "index database truncated",
        "compiled modules truncated",
        "shader cache truncated",
        "kernel sources missing",
    ],
)
def test_damaged_files_are_rebuilt_with_correct_results(tmp_path, built, damage):
    cache = copied(built, tmp_path / "cache")
    dict(damage_each(cache))[damage]()
    again = run(cache, "--signatures", "2")
    assert again["ok"]
    assert run(cache, "--signatures", "2")["ok"]


def test_damage_is_reported_as_a_warning(tmp_path, tdev):
    cache = tmp_path / "cache"
    m = load(cache)
    a, x = torch.ones(1, device=tdev), torch.ones(5, device=tdev)
    m.poly(a, x)
    # Damage what a fresh process reads: the sources, and on CUDA the cubins built from them.
    for p in [*(cache / "kernels").glob("*.slang"), *(cache / "binaries").glob("*.cubin")]:
        p.write_text("garbage")
    fresh = load(cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fresh.poly(a, x)
    assert any(issubclass(w.category, slangspec.CacheWarning) for w in caught)
    torch.testing.assert_close(y, torch.full((5,), 4.0, device=tdev))


# --- bounds, API, safety ------------------------------------------------------------------------


def test_size_bound_holds_after_a_burst_of_inserts(tmp_path):
    unbounded = tmp_path / "unbounded"
    assert run(unbounded, "--signatures", "6")["ok"]
    parts = slangspec.Cache(unbounded).disk.measure()
    kernels = parts["kernels"] + parts["binaries"]
    # A bound that holds what the cache holds beside its kernels (the imported modules' IR, the
    # shader cache, the index) and about half of the six specializations' kernels.
    bound = sum(parts.values()) - kernels // 2
    cache = tmp_path / "cache"
    r = run(cache, "--signatures", "6", env={"SLANGSPEC_CACHE_SIZE": str(bound)})
    assert r["ok"]
    c = slangspec.Cache(cache)
    after = c.disk.measure()
    assert sum(after.values()) <= bound
    # How many stay depends on what the index takes during the run; never the one used last.
    assert 1 <= len(c.entries()) < 6
    assert after["slang"] == parts["slang"], "slangpy's compiled modules were evicted"


def test_cache_api_stats_entries_evict_verify_clear(tmp_path, tdev):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "3")["ok"]
    c = slangspec.Cache(cache)
    stats = c.stats()
    assert stats["entries"] == 3 and stats["misses"] == 3
    assert stats["per_device"] == {os.environ.get("SLANGSPEC_DEVICE", "vulkan"): 3}
    assert stats["bytes"] == sum(stats["bytes_by_part"].values()) > 0
    entries = c.entries()
    assert {e["function"] for e in entries} == {"poly"}
    # Each worker call trains ``a`` only: one backward kernel, for mask "10".
    assert all(e["kernels"] == ["10", "forward"] for e in entries)
    assert c.verify() == {"checked": 3, "problems": [], "repaired": 0}
    first = entries[0]["key"]
    for p in (cache / "kernels").glob("*.slang"):
        p.write_text("damaged")
    report_ = c.verify()
    assert len(report_["problems"]) >= 3 and report_["repaired"] == 0
    repaired = c.verify(repair=True)
    assert repaired["repaired"] >= 3
    assert c.verify()["problems"] == []
    assert c.evict(slangspec.EntryFilter(key=first[:10])) == [first]
    assert len(c.entries()) == 2
    assert c.evict(slangspec.EntryFilter(function="nope")) == []
    assert len(c.evict(slangspec.EntryFilter(unused_since=-1))) == 2
    assert c.entries() == []
    c.clear()
    after = c.stats()
    assert after["entries"] == 0 and after["hits"] == after["misses"] == 0
    assert all(after["bytes_by_part"][p] == 0 for p in ("kernels", "slang", "shaders"))


def test_binaries_are_sized_verified_repaired_and_collected(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    c = slangspec.Cache(cache)
    (key,) = c.disk.entry_keys()
    before = c.entries()[0]["size"]
    blob = b"\x7fELF not really a cubin" * 64
    name = c.write_blob("binary", blob)
    assert c.read_blob(name) == blob
    c.amend(
        key, binary_added("11", {"file": name, "layout": {"size": 0, "params": []}, "group": 1})
    )
    assert c.entries()[0]["size"] == before + len(blob)
    assert c.verify()["problems"] == []
    c.disk.blob_path(name).write_bytes(blob[:10])
    assert c.read_blob(name) is None
    problems = c.verify()["problems"]
    assert [p["problem"] for p in problems] == [f"binary {name} (11) missing or damaged"]
    # One pass drops the reference and then collects the file it orphaned.
    assert c.verify(repair=True)["repaired"] == 2
    assert "11" not in c.lookup(key, c.disk.row(key)["preimage"]).binaries
    assert not c.disk.blob_path(name).exists()
    assert c.verify()["problems"] == []
    name = c.write_blob("binary", blob)
    c.amend(
        key, binary_added("11", {"file": name, "layout": {"size": 0, "params": []}, "group": 1})
    )
    assert c.evict(slangspec.EntryFilter(key=key)) == [key]
    assert not c.disk.blob_path(name).exists()


def test_cache_directory_is_private(tmp_path):
    root = location.cache_root(tmp_path / "new" / "cache")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_no_stored_value_is_a_pickle(tmp_path):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "3")["ok"]
    with sqlite3.connect(cache / "index" / "cache.db") as db:
        rows = db.execute("SELECT key, value FROM Cache").fetchall()
    assert rows
    for key, value in rows:
        for blob in (key, value):
            if isinstance(blob, bytes):
                assert not blob.startswith(b"\x80"), "a pickled value"
                json.loads(zlib.decompress(blob))
    for path in (cache / "index").rglob("*.val"):
        data = zlib.decompress(path.read_bytes())
        assert not data.startswith(b"\x80")
        json.loads(data)


def test_bad_size_bound_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SLANGSPEC_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="SLANGSPEC_CACHE_SIZE='lots': expected a size in bytes"):
        location.size_bound()


def test_running_size_matches_a_walk_of_the_tree(tmp_path, tdev):
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "3")["ok"]
    m = slangspec.load_source(
        "inline", "[Differentiable] float sq(float x) { return x * x; }", cache_dir=cache
    )
    m.sq(torch.ones(3, device=tdev, requires_grad=True)).sum().backward()
    c = slangspec.Cache(cache)
    assert c.disk.size() == sum(c.disk.measure().values())
    c.evict(slangspec.EntryFilter(function="poly", key=c.entries()[-1]["key"]))
    assert len(c.entries()) == 3
    assert c.disk.size() == sum(c.disk.measure().values())


def test_a_miss_within_the_bound_walks_no_tree(tmp_path, tdev, monkeypatch):
    m = load(tmp_path / "cache")
    a, x = torch.ones(1, device=tdev), torch.ones(4, device=tdev)
    m.poly(a, x)

    def refuse(*_a, **_k):
        raise AssertionError("the cache tree was walked on a miss")

    monkeypatch.setattr(os, "walk", refuse)
    monkeypatch.setattr(Path, "rglob", refuse)
    y = m.poly(a, torch.ones(4, 3, device=tdev))
    torch.testing.assert_close(y, torch.full((4, 3), 4.0, device=tdev))


def test_the_miss_path_says_how_each_kernel_was_served(tmp_path, tdev):
    cache = tmp_path / "cache"
    first, second = load(cache), load(cache)
    a = torch.ones(1, device=tdev, requires_grad=True)
    sig = first.poly.signature(a, torch.ones(4, device=tdev))
    found = first.builder.specialization("poly", sig)
    assert (found.outcome, found.forward is not None) == ("built", True)
    assert first.builder.kernel(found, "10")[1] == "built"
    again = second.builder.specialization("poly", sig)
    assert (again.outcome, again.forward) == ("cached", None)
    assert second.builder.kernel(again, "forward")[1] == "cached"
    assert second.builder.kernel(again, "10")[1] == "cached"

    # An entry that lands between a process's first look and its lease was built elsewhere.
    other = first.poly.signature(a, torch.ones(4, 2, device=tdev))
    assert first.poly.warm(other) == "built"
    real, looks = second.cache.serve, []

    def late_serve(key, pre):
        looks.append(key)
        return None if len(looks) == 1 else real(key, pre)

    second.cache.serve = late_serve
    assert second.builder.specialization("poly", other).outcome == "taken"
    assert second.poly.warm(other) == "cached"


def test_a_warm_process_knows_its_functions_without_reflecting(tmp_path):
    cache = tmp_path / "cache"
    m = load(cache)
    assert not hasattr(m, "nope") and hasattr(m, "poly")
    code = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from slangspec.runtime import backend\n"
        "from workers import load\n"
        "def refuse(*_a, **_k):\n"
        "    raise AssertionError('reflected')\n"
        "backend.SlangBackend.front_end = refuse\n"
        "m = load(sys.argv[1])\n"
        "print(hasattr(m, 'nope'), hasattr(m, 'poly'))\n"
    )
    here = str(Path(__file__).parent)
    out = python(code, cache, here, timeout=120)
    assert out.stdout.split()[-2:] == ["False", "True"], out.stderr[-2000:]


def test_waiters_woken_together_take_the_result_not_the_lease_in_turns(tmp_path):
    from slangspec.cache_store.disk import LOCK, DiskTier

    (tmp_path / "c").mkdir()
    holder, waiter = DiskTier(tmp_path / "c"), DiskTier(tmp_path / "c")
    held = held_by_woken_waiters(
        lambda: holder.lease("k", lambda: False, 30),
        lambda done: waiter.lease("k", done, 30),
        lambda: waiter._read(LOCK + "k") is not None,
    )
    assert held == [False] * 4, "a woken waiter took the lease instead of the result"
