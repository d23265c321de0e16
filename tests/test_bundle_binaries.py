"""Binaries in bundles: carried only sealed with ``SLANGSPEC_SECRET``, taken only when the
MAC holds here and the entry was built for this device; everything else in the entry is
still imported and the binaries are built here when needed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import slangspec
from slangspec.aot.bundle import export_bundle, import_bundle
from slangspec.cache_store import travel
from slangspec.cache_store.keys import blob_name
from workers import copied, run

SECRET = "a shared secret of the cluster"
CUBIN = b"\x7fELF not really a cubin"


def with_binary(source: Path, path: Path, key: str, change=lambda entry, blobs: None) -> Path:
    """A bundle of a real cache whose first entry carries a signed binary (then ``change``d)."""
    export_bundle(slangspec.Cache(source), path)
    bundle = json.loads(path.read_text())
    for carried in bundle["entries"]:  # only the crafted binary below, on every device
        carried["binaries"] = {}
        carried.pop("mac", None)
    name = blob_name("binary", CUBIN)
    binaries = {"forward": {"file": name, "group": 32, "layout": {"size": 8}}}
    blobs = {n: text.encode() for n, text in bundle["sources"].items()}
    entry = travel.sealed(
        {**bundle["entries"][0], "binaries": binaries}, {**blobs, name: CUBIN}, key.encode()
    )
    bundle["entries"][0] = entry
    bundle["binaries"] = {name: base64.b64encode(CUBIN).decode()}
    change(entry, bundle["binaries"])
    path.write_text(json.dumps(bundle))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("built") / "source"
    assert run(cache, "--signatures", "2")["ok"]
    return cache


@pytest.fixture
def source(tmp_path, built) -> Path:
    return copied(built, tmp_path / "source")


def imported(target: Path, bundle: Path) -> tuple[dict, list[dict]]:
    report = import_bundle(slangspec.Cache(target), bundle)
    assert report["entries"] == 2, report
    return report, [row for _, row in slangspec.Cache(target).rows()]


def test_a_signed_binary_is_taken_with_the_same_secret(tmp_path, source, monkeypatch):
    monkeypatch.setenv("SLANGSPEC_SECRET", SECRET)
    report, rows = imported(tmp_path / "t", with_binary(source, tmp_path / "b.json", SECRET))
    assert report["binaries"] == 1 and report["skipped"] == []
    (carried,) = [row["binaries"] for row in rows if row.get("binaries")]
    assert carried["forward"]["file"] == blob_name("binary", CUBIN)
    assert slangspec.Cache(tmp_path / "t").read_blob(blob_name("binary", CUBIN)) == CUBIN


def tamper_bytes(entry, blobs):
    forged = CUBIN.replace(b"not", b"now")
    entry["binaries"]["forward"]["file"] = blob_name("binary", forged)
    blobs[blob_name("binary", forged)] = base64.b64encode(forged).decode()


@pytest.mark.parametrize(
    "secret_here, signed_with, change, why",
    [
        (None, SECRET, None, "not taken without SLANGSPEC_SECRET"),
        ("another secret of some length", SECRET, None, "MAC does not hold"),
        (SECRET, SECRET, tamper_bytes, "MAC does not hold"),
        (SECRET, SECRET, lambda e, b: e["binaries"]["forward"].update(group=64), "MAC"),
        (SECRET, SECRET, lambda e, b: b.clear(), "the bundle lacks binary b_"),
        (SECRET, SECRET, lambda e, b: e["preimage"]["device"].update(arch="sm_0"), "another dev"),
    ],
)
def test_an_unsigned_or_altered_binary_is_left_out_and_the_entry_kept(
    tmp_path, source, monkeypatch, secret_here, signed_with, change, why
):
    if secret_here:
        monkeypatch.setenv("SLANGSPEC_SECRET", secret_here)
    else:
        monkeypatch.delenv("SLANGSPEC_SECRET", raising=False)
    bundle = with_binary(source, tmp_path / "b.json", signed_with, change or (lambda e, b: None))
    report, rows = imported(tmp_path / "t", bundle)
    assert report["binaries"] == 0
    (skipped,) = report["skipped"]
    assert skipped["what"].startswith("binaries of entry") and why in skipped["why"]
    assert not any(row.get("binaries") for row in rows)
    assert list((tmp_path / "t" / "binaries").glob("*")) == []


def test_a_short_secret_is_refused_naming_the_variable(tmp_path, source, monkeypatch):
    monkeypatch.setenv("SLANGSPEC_SECRET", "short")
    with pytest.raises(ValueError, match=r"SLANGSPEC_SECRET=<5 bytes>: expected at least 16 bytes"):
        import_bundle(slangspec.Cache(tmp_path / "t"), with_binary(source, tmp_path / "b", SECRET))
    assert slangspec.Cache(tmp_path / "t").entries() == []


def test_a_malformed_binary_is_refused_whole_naming_the_field(tmp_path, source):
    bundle = with_binary(
        source, tmp_path / "b.json", SECRET, lambda e, b: e["binaries"].update(forward="x")
    )
    with pytest.raises(ValueError, match=r"entries\[0\]\.binaries\.forward: expected an object"):
        import_bundle(slangspec.Cache(tmp_path / "t"), bundle)


def test_cuda_binaries_travel_signed_and_serve_without_slang(tmp_path, kind, monkeypatch):
    if kind != "cuda":
        pytest.skip("binaries are kept for CUDA kernels")
    source, target = tmp_path / "source", tmp_path / "target"
    assert run(source, "--signatures", "3")["ok"]
    monkeypatch.delenv("SLANGSPEC_SECRET", raising=False)
    assert export_bundle(slangspec.Cache(source), tmp_path / "plain.json")["binaries"] == 0
    monkeypatch.setenv("SLANGSPEC_SECRET", SECRET)
    counts = export_bundle(slangspec.Cache(source), tmp_path / "signed.json")
    assert counts["binaries"] > 0 and counts["binaries_left_out"] == 0
    report = import_bundle(slangspec.Cache(target), tmp_path / "signed.json")
    assert report["binaries"] == counts["binaries"] and report["skipped"] == []
    warm = run(target, "--signatures", "3", "--forbid-slang")
    assert warm["ok"] and warm["counts"].get("kernel", 0) == 0
