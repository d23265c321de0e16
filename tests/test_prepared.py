"""``specialize prepare``: slangpy's Slang library as IR and Slang's CUDA prelude, made once per
toolchain and read by CUDA builds of any cache, checked against their digests and toolchain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cuda_step import MIX, SIGNATURES, kernels_of, needs_nvrtc

from slangspec.cache_store import CacheWarning
from slangspec.cache_store.module_cache import ModuleCacheGuard
from slangspec.cache_store.module_seals import ModuleSeals
from slangspec.compile.cuda import build
from slangspec.compile.cuda.build import library_dir, stored_prelude
from slangspec.compile.cuda.prepared import (
    MANIFEST,
    PRELUDE_FILE,
    directory_of,
    prepare,
    prepared,
)
from slangspec.compile.cuda.source import LIBRARY_FILE, cuda_source, split_prelude
from slangspec.settings import compile_counts
from slangspec.signatures.module_text import ModuleText
from workers import specialize

TOOLCHAIN = {"slang": "prepared-test"}
MODULE = """import slangpy;
[Differentiable]
float mix(IDiffTensor<float, 1> a, IDiffTensor<float, 1> b, int i) { return a[i] * b[i]; }
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    prepare(root, TOOLCHAIN)
    return root


@pytest.fixture
def compiles(monkeypatch) -> list[dict[str, str]]:
    """The defines of each compile of slangpy's library ``library_dir`` asks for, none made:
    whether it compiles or copies is what these tests check (``root`` compiles it for real)."""
    made: list[dict[str, str]] = []

    def slangpy_library(defines: dict[str, str]) -> bytes:
        made.append(dict(defines))
        return b"compiled"

    monkeypatch.setattr(build, "slangpy_library", slangpy_library)
    return made


def guard_in(directory: Path) -> ModuleCacheGuard:
    return ModuleCacheGuard(ModuleSeals(directory / "slang"), None, "")


def test_prepared_files_are_the_library_and_the_prelude_a_build_makes(root, tmp_path):
    """Read as the library, the prepared IR compiles the same kernels as the library's source
    (entry points and layouts; the IR itself differs in a few bytes between compiles)."""
    files = prepared(root, TOOLCHAIN)
    assert files is not None and files.read(LIBRARY_FILE) is not None
    module = ModuleText("m", tmp_path / "m.slang", MODULE)
    kernels = kernels_of(MIX, SIGNATURES[MIX], tmp_path)
    source = cuda_source(module, kernels)
    again = cuda_source(module, kernels, library=directory_of(root, TOOLCHAIN))
    assert again.entries == source.entries
    assert files.read(PRELUDE_FILE).decode() == split_prelude(source.text)[0]


def test_a_cache_copies_the_prepared_library_and_compiles_none(root, tmp_path):
    guard = guard_in(tmp_path)
    before = compile_counts["library"]
    library = library_dir(guard, TOOLCHAIN, {}, prepared(root, TOOLCHAIN))
    assert compile_counts["library"] == before
    assert (library / LIBRARY_FILE).read_bytes() == (
        directory_of(root, TOOLCHAIN) / LIBRARY_FILE
    ).read_bytes()
    assert ModuleSeals(guard.root).damaged() == []
    # Damaged in the cache, it is copied again, still without a compile.
    with open(library / LIBRARY_FILE, "r+b") as f:
        f.seek(1000)
        f.write(b"damaged")
    with pytest.warns(CacheWarning, match="no longer matches"):
        library_dir(guard, TOOLCHAIN, {}, prepared(root, TOOLCHAIN))
    assert compile_counts["library"] == before


def test_with_defines_the_library_is_compiled_not_copied(root, tmp_path, compiles):
    before = compile_counts["library"]
    library = library_dir(guard_in(tmp_path), TOOLCHAIN, {"X": "1"}, prepared(root, TOOLCHAIN))
    assert compile_counts["library"] == before + 1 and compiles == [{"X": "1"}]
    assert (library / LIBRARY_FILE).read_bytes() == b"compiled"


def test_the_prelude_a_cache_kept_comes_first_then_the_prepared_one(root, tmp_path):
    files = prepared(root, TOOLCHAIN)
    assert stored_prelude(tmp_path / "none.h", files) == files.read(PRELUDE_FILE).decode()
    (tmp_path / "kept.h").write_text("kept")
    assert stored_prelude(tmp_path / "kept.h", files) == "kept"
    assert stored_prelude(tmp_path / "none.h", None) is None


def copy_of(root: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    directory = directory_of(copy, TOOLCHAIN)
    directory.mkdir(parents=True)
    for f in directory_of(root, TOOLCHAIN).iterdir():
        (directory / f.name).write_bytes(f.read_bytes())
    return copy


@pytest.mark.parametrize(
    "spoil",
    ["flipped byte", "truncated", "file missing", "manifest torn", "manifest of another toolchain",
     "manifest missing", "manifest not a mapping"],
)  # fmt: skip
def test_a_damaged_or_foreign_prepared_file_is_not_read(root, tmp_path, spoil, compiles):
    copy = copy_of(root, tmp_path)
    directory = directory_of(copy, TOOLCHAIN)
    library, manifest = directory / LIBRARY_FILE, directory / MANIFEST
    if spoil == "flipped byte":
        data = bytearray(library.read_bytes())
        data[len(data) // 2] ^= 1
        library.write_bytes(bytes(data))
    elif spoil == "truncated":
        library.write_bytes(library.read_bytes()[:1000])
    elif spoil == "file missing":
        library.unlink()
    elif spoil == "manifest torn":
        manifest.write_text(manifest.read_text()[:40])
    elif spoil == "manifest of another toolchain":
        value = json.loads(manifest.read_text())
        value["toolchain"] = {"slang": "another"}
        manifest.write_text(json.dumps(value))
    elif spoil == "manifest missing":
        manifest.unlink()
    else:
        manifest.write_text("[1, 2]")
    files = prepared(copy, TOOLCHAIN)
    assert files is None or files.read(LIBRARY_FILE) is None
    before = compile_counts["library"]
    library = library_dir(guard_in(tmp_path), TOOLCHAIN, {}, files)
    assert compile_counts["library"] == before + 1  # compiled, as with nothing prepared
    assert compiles == [{}] and (library / LIBRARY_FILE).read_bytes() == b"compiled"


def test_nothing_prepared_for_another_toolchain(root):
    assert prepared(root, {"slang": "another"}) is None
    assert prepared(root / "absent", TOOLCHAIN) is None


def test_the_command_prepares_where_it_is_told_and_says_so(tmp_path):
    done = specialize("prepare", "--dir", tmp_path / "p", "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert set(made["files"]) == {LIBRARY_FILE, PRELUDE_FILE}
    assert (Path(made["directory"]) / MANIFEST).is_file()
    by_setting = specialize("prepare", env={"SLANGSPEC_PREPARED_DIR": str(tmp_path / "q")})
    assert by_setting.returncode == 0, by_setting.stderr
    assert by_setting.stdout.startswith(f"prepared {LIBRARY_FILE} (") and str(tmp_path / "q") in (
        by_setting.stdout
    )


def test_the_command_names_a_directory_it_cannot_write(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    done = specialize("prepare", "--dir", blocked / "p")
    assert done.returncode == 1
    assert f"cannot write the prepared files in {blocked / 'p'}" in done.stderr


@needs_nvrtc
def test_a_cuda_build_into_an_empty_cache_reads_the_prepared_files(tmp_path):
    """``specialize warm --arch`` (no GPU needed) into an empty cache compiles no library
    when the toolchain was prepared, and compiles it when it was not."""
    (tmp_path / "mix.slang").write_text(MODULE.replace("mix(", "mixed(") + "\n")
    (tmp_path / "poly.slang").write_text(
        "import slangpy;\n[Differentiable]\nfloat poly(float a, float x) { return a * x * x; }\n"
    )
    (tmp_path / "warm.toml").write_text(
        '[[module]]\npath = "poly.slang"\n[[module.function]]\nname = "poly"\n'
        'specializations = [["f32[N] grad", "f32[N] nograd"]]\n'
    )
    prepared_dir = tmp_path / "prepared"
    assert specialize("prepare", "--dir", prepared_dir).returncode == 0
    log = {"SLANGSPEC_LOG": "info", "CUDA_VISIBLE_DEVICES": ""}
    args = ("warm", tmp_path / "warm.toml", "--device", "cuda", "--arch", "sm_90", "--jobs", "1")
    ready = specialize(*args, "--cache-dir", tmp_path / "a", env={
        **log, "SLANGSPEC_PREPARED_DIR": str(prepared_dir)})  # fmt: skip
    assert ready.returncode == 0, ready.stderr[-3000:]
    assert "1 built" in ready.stdout
    assert "as IR for CUDA, copied from the prepared one" in ready.stderr
    bare = specialize(*args, "--cache-dir", tmp_path / "b", env={
        **log, "SLANGSPEC_PREPARED_DIR": str(tmp_path / "none")})  # fmt: skip
    assert bare.returncode == 0, bare.stderr[-3000:]
    assert "as IR for CUDA, compiled" in bare.stderr
