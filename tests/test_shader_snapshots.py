"""slangpy's shader cache as snapshots: what a process gets from ``checkout`` and when
``publish`` keeps its copy, on files laid out as LMDB lays out its data file."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

import slangspec
from slangspec.cache_store import CacheWarning, ShaderSnapshots
from slangspec.cache_store.shader_snapshots import POINTER, lmdb_whole

PAGE = 4096


def lmdb_file(pages: int, fill: int) -> bytes:
    """An LMDB data file of ``pages`` pages whose newest meta page names them all."""
    data = bytearray([fill]) * (pages * PAGE)
    for start, txn in ((0, 1), (PAGE, 2)):
        data[start : start + 160] = bytes(160)
        struct.pack_into("<I", data, start + 16, 0xBEEFC0DE)
        struct.pack_into("<I", data, start + 40, PAGE)
        struct.pack_into("<QQ", data, start + 136, pages - 1, txn)
    return bytes(data)


def slangpy_writes(private: Path, data: bytes) -> None:
    (private / "rhi").mkdir(exist_ok=True)
    (private / "rhi" / "data.mdb").write_bytes(data)


def fresh(shared: Path) -> ShaderSnapshots:
    return ShaderSnapshots(shared, 1 << 20)


def test_a_published_copy_is_what_the_next_process_checks_out(tmp_path):
    data = lmdb_file(4, 7)
    first = fresh(tmp_path)
    slangpy_writes(first.checkout(), data)
    first.publish(misses=2)
    second = fresh(tmp_path).checkout()
    assert (second / "rhi" / "data.mdb").read_bytes() == data
    assert second != first.checkout()


def test_nothing_is_published_without_new_misses(tmp_path):
    first = fresh(tmp_path)
    slangpy_writes(first.checkout(), lmdb_file(3, 1))
    first.publish(misses=0)
    assert not (tmp_path / POINTER).exists()
    first.publish(misses=1)
    slangpy_writes(first.checkout(), lmdb_file(3, 2))
    first.publish(misses=1)
    assert (fresh(tmp_path).checkout() / "rhi" / "data.mdb").read_bytes() == lmdb_file(3, 1)


def test_a_torn_copy_is_not_published(tmp_path):
    first = fresh(tmp_path)
    slangpy_writes(first.checkout(), lmdb_file(4, 1)[: 3 * PAGE])
    first.publish(misses=1)
    assert not (tmp_path / POINTER).exists()


def test_an_older_snapshot_is_removed_when_a_newer_one_lands(tmp_path):
    for fill in (1, 2):
        process = fresh(tmp_path)
        slangpy_writes(process.checkout(), lmdb_file(3, fill))
        process.publish(misses=1)
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == POINTER
    assert len(list(tmp_path.glob("*.mdb"))) == 1


def damage(kind: str, shared: Path) -> None:
    (snapshot,) = shared.glob("*.mdb")
    if kind == "flipped":
        data = bytearray(snapshot.read_bytes())
        data[3 * PAGE - 5] ^= 0x5A
        snapshot.write_bytes(bytes(data))
    elif kind == "truncated":
        snapshot.write_bytes(snapshot.read_bytes()[:PAGE])
    elif kind == "a directory":
        snapshot.unlink()
        snapshot.mkdir()
    elif kind == "pointer garbled":
        (shared / POINTER).write_bytes(b"\xff../../etc/passwd")
    elif kind == "pointer a directory":
        (shared / POINTER).unlink()
        (shared / POINTER).mkdir()


@pytest.mark.parametrize(
    "kind", ["flipped", "truncated", "a directory", "pointer garbled", "pointer a directory"]
)
def test_damage_gives_an_empty_cache_and_a_warning(tmp_path, kind):
    first = fresh(tmp_path)
    slangpy_writes(first.checkout(), lmdb_file(4, 3))
    first.publish(misses=1)
    damage(kind, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        private = fresh(tmp_path).checkout()
    assert list(private.iterdir()) == []
    assert [w.category for w in caught] == [CacheWarning]
    assert "is damaged; starting an empty one" in str(caught[0].message)
    assert list(tmp_path.iterdir()) == [], "the damaged snapshot was left for the next process"


def test_a_missing_snapshot_is_an_empty_cache_without_a_warning(tmp_path):
    first = fresh(tmp_path)
    slangpy_writes(first.checkout(), lmdb_file(3, 4))
    first.publish(misses=1)
    for snapshot in tmp_path.glob("*.mdb"):
        snapshot.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(fresh(tmp_path).checkout().iterdir()) == []


def test_lmdb_whole_reads_the_newest_meta_page():
    data = lmdb_file(5, 0)
    assert lmdb_whole(data)
    assert not lmdb_whole(data[: 4 * PAGE])
    assert not lmdb_whole(b"\0" * (5 * PAGE))
    assert not lmdb_whole(data[:100])


def test_verify_reports_a_damaged_snapshot_and_repair_removes_it(tmp_path):
    cache = slangspec.Cache(tmp_path / "cache")
    process = cache.files.shader_cache()
    slangpy_writes(process.checkout(), lmdb_file(3, 5))
    process.publish(misses=1)
    assert cache.verify()["problems"] == []
    damage("flipped", tmp_path / "cache" / "shaders")
    (problem,) = cache.verify()["problems"]
    (snapshot,) = (tmp_path / "cache" / "shaders").glob("*.mdb")
    assert problem == {"key": "", "problem": f"shader cache snapshot {snapshot} is damaged"}
    assert cache.verify(repair=True)["repaired"] == 1
    assert cache.verify()["problems"] == []
