"""slangpy's module cache, sealed: damage to the IR Slang keeps there is found and removed
before Slang reads it (some damaged IR makes Slang abort the process), and `cache verify`
reports and repairs it."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest

import slangspec
from slangspec.cache_store import CacheWarning, module_seals
from slangspec.cache_store.module_seals import SEAL, ModuleSeals
from workers import last_line, python


def written(root: Path, data: bytes = b"IR" * 5000, session: str = "a" * 40) -> Path:
    """A compiled module where slangpy keeps one: session digest, session, file."""
    module = root / session / "0" / "lib.slang-module"
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_bytes(data)
    return module


def flipped(module: Path, start: int = 100, every: int = 997) -> None:
    """Damage in place that keeps the file's size, as a bad disk or a stray write would."""
    data = bytearray(module.read_bytes())
    for at in range(start, len(data), every):
        data[at] ^= 0xFF
    module.write_bytes(bytes(data))


def test_a_sealed_file_that_changed_is_removed_with_a_warning(tmp_path):
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    seals.seal()
    assert seals.damaged() == []
    flipped(module)
    assert seals.damaged() == [module]
    with pytest.warns(CacheWarning, match="no longer matches what Slang wrote there"):
        assert seals.remove_damaged() == [module]
    assert not module.exists()
    assert not module.with_name(module.name + SEAL).exists()


def test_an_unsealed_file_is_trusted_and_sealed_after_a_load(tmp_path):
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert seals.remove_damaged() == []
    assert module.exists()
    seals.seal()
    assert json.loads(module.with_name(module.name + SEAL).read_text())["xxh3_128"]


def test_a_file_slang_wrote_again_is_sealed_again(tmp_path):
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    seals.seal()
    again = module.with_name(module.name + "-0123456789abcdef")  # as slangpy writes: then renames
    again.write_bytes(b"new IR" * 100)
    again.rename(module)
    assert seals.seal() == [module]
    assert seals.damaged() == []


def test_a_file_written_over_in_place_is_not_sealed_again_but_removed(tmp_path):
    """slangpy never writes a compiled module in place: a stray write that does must not be
    taken for a new module by the next process that seals."""
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    seals.seal()
    flipped(module)
    assert seals.seal() == []
    with pytest.warns(CacheWarning):
        assert seals.remove_damaged() == [module]


@pytest.mark.parametrize("seal", [b"", b"{not json", b"[1, 2]", b'{"xxh3_128": 7}'])
def test_a_garbled_seal_seals_nothing_the_file_matches(tmp_path, seal):
    module = written(tmp_path)
    module.with_name(module.name + SEAL).write_bytes(seal)
    assert ModuleSeals(tmp_path).damaged() == [module]


def test_a_seal_that_cannot_be_written_leaves_the_file_unsealed_and_trusted(tmp_path):
    module = written(tmp_path)
    other = written(tmp_path, session="b" * 40)
    module.with_name(module.name + SEAL).mkdir()  # where the seal would go: not a file
    seals = ModuleSeals(tmp_path)
    seals.seal()
    assert module.exists()
    assert other.with_name(other.name + SEAL).is_file(), "one failure stopped the others"
    assert seals.damaged() == [module], "a seal that is no file seals nothing"
    with pytest.warns(CacheWarning):
        assert seals.remove_damaged() == [module]
    assert not module.exists()


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
def test_a_directory_where_a_compiled_module_belongs_is_removed_with_a_warning(tmp_path, sealed):
    """Slang can neither read nor write a compiled module where a directory stands."""
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    if sealed:
        seals.seal()
    module.unlink()
    module.mkdir()
    (module / "inside").write_bytes(b"IR")
    assert seals.seal() == []
    with pytest.warns(CacheWarning, match="Slang compiles it again"):
        assert seals.remove_damaged() == [module]
    assert not module.exists()
    assert not module.with_name(module.name + SEAL).exists()


def test_an_unreadable_sealed_module_is_damage_not_an_error(tmp_path, monkeypatch):
    module = written(tmp_path)
    seals = ModuleSeals(tmp_path)
    seals.seal()
    flipped(module)

    def unreadable(path: Path) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(module_seals, "_digest", unreadable)
    assert seals.damaged() == [module]
    assert seals.seal() == []


def test_verify_reports_damaged_module_cache_files_and_repair_removes_them(tmp_path):
    cache = slangspec.Cache(tmp_path / "cache")
    module = written(cache.files.module_cache)
    cache.files.module_seals.seal()
    assert cache.verify()["problems"] == []
    flipped(module)
    problems = cache.verify()["problems"]
    assert problems == [
        {"key": "", "problem": f"slangpy's module cache file {module} does not match its seal"}
    ]
    assert module.exists(), "verify without --repair removed a file"
    assert cache.verify(repair=True)["repaired"] == 1
    assert not module.exists()
    assert cache.verify()["problems"] == []


MIX2 = """
import sys, warnings
import torch, slangspec
from slangspec.cache_store import CacheWarning
warnings.simplefilter("always", CacheWarning)
kind, b_grad = sys.argv[3], sys.argv[4] == "b_grad"
dev = "cuda" if kind == "cuda" else "cpu"
m = slangspec.load(sys.argv[1], cache_dir=sys.argv[2], device=kind)
a = torch.arange(1.0, 9.0, device=dev, requires_grad=True)
b = torch.arange(2.0, 10.0, device=dev, requires_grad=b_grad)
m.mix2(a, b, slangspec.grid((8,))).sum().backward()
torch.testing.assert_close(a.grad, b.detach() + 2.0)
if b_grad:
    torch.testing.assert_close(b.grad, a.detach())
print("ok")
"""


def test_damaged_ir_of_slangpys_library_is_compiled_again_not_read(tmp_path, kind):
    """Slang aborts a process that reads this damaged IR of slangpy's library (damage in its
    first bytes it notices, and compiles again); the seal makes the next process compile the
    library again instead, with a warning, and seal the new IR. The second process builds a
    backward kernel the first did not (b frozen): a process that compiles nothing reads no IR
    (on CUDA it loads stored cubins)."""
    module = tmp_path / "m.slang"
    module.write_text(
        "import slangpy;\n[Differentiable]\nfloat mix2(IDiffTensor<float, 1> a, "
        "IDiffTensor<float, 1> b, int i) { return a[i] * b[i] + 2.0 * a[i]; }\n"
    )
    cache = tmp_path / "cache"

    def run(b_grad: str) -> subprocess.CompletedProcess:
        return python(MIX2, module, cache, kind, b_grad)

    first = run("b_grad")
    assert last_line(first.stdout) == "ok", first.stderr
    (library,) = cache.glob("slang/*/*/slangpy.slang-module")
    flipped(library, start=1000, every=5000)
    damaged = library.read_bytes()
    second = run("b_frozen")
    assert second.returncode == 0, f"rc {second.returncode}: {second.stderr[-2000:]}"
    assert last_line(second.stdout) == "ok"
    assert f"slangspec removed {library}" in second.stderr
    assert library.read_bytes() != damaged
    assert ModuleSeals(cache / "slang").damaged() == []
