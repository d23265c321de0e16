"""Portable cache bundles: export the records, plans and sources of a cache; import them into
another, re-keyed for the local machine and cache path.

Each entry travels in the one form the remote tier uses too (``cache_store.travel``). A bundle
is data from elsewhere: it is refused whole, naming the field, unless every part has its
expected shape, every plan is one for its entry's call and every kernel an entry names is the
source its plan generates. Imported entries get sources regenerated here, never the text a
bundle carries.

Compiled binaries (CUDA cubins) travel only when ``SLANGSPEC_SECRET`` is set where the bundle is
made: each entry is then sealed with a MAC made with it, and an import takes its binaries only
when they pass the travelling form's check under its own ``SLANGSPEC_SECRET`` and the entry was
built for this very device.
Without them, ``specialize warm --recorded`` compiles the imported entries from their plans and
sources without type resolution or code generation.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from ..cache_store import CacheStore, binary_added, key_of, regenerated, source_name, travel
from ..compile import FORMATS, toolchain
from ..formats import BUNDLE_FORMAT, BUNDLE_VERSION
from ..runtime.cache import regenerate_source
from ..settings import setting

SECRET_ENV = "SLANGSPEC_SECRET"


def export_bundle(cache: CacheStore, file: str | Path) -> dict[str, int]:
    """Write every record, whole entry and referenced source of ``cache`` to ``file``, and the
    entries' binaries, signed, when ``SLANGSPEC_SECRET`` is set."""
    key = setting(SECRET_ENV)
    entries, sources, binaries = [], {}, {}
    left_out = 0
    for _, row in cache.rows():
        if row is None:
            continue
        texts = {n: cache.read_blob(n) for n in row["kernels"].values()}
        if None in texts.values():
            continue
        sources.update({n: data.decode() for n, data in texts.items()})  # type: ignore[union-attr]
        entry = travel.shared(row)
        kept = entry["binaries"]
        blobs = {b["file"]: cache.read_blob(b["file"]) for b in kept.values()}
        if key is None or None in blobs.values():
            left_out += len(kept)
            entry["binaries"] = {}
            blobs = {}
        for name, data in blobs.items():
            binaries[name] = base64.b64encode(data).decode()  # type: ignore[arg-type]
        entries.append(travel.sealed(entry, {**texts, **blobs}, key))  # type: ignore[arg-type]
    bundle = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "toolchain": toolchain(cache),
        "records": cache.records(),
        "entries": entries,
        "sources": sources,
        "binaries": binaries,
    }
    Path(file).write_text(json.dumps(bundle, indent=1, sort_keys=True))
    return {
        "records": len(bundle["records"]),
        "entries": len(entries),
        "sources": len(sources),
        "binaries": len(binaries),
        "binaries_left_out": left_out,
    }


def read_bundle(file: str | Path) -> dict[str, Any]:
    try:
        bundle = json.loads(Path(file).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{file}: not a readable slangspec bundle ({exc})") from None
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{file}: not a slangspec bundle")
    if bundle.get("version") != BUNDLE_VERSION:
        raise ValueError(
            f"{file}: bundle version {bundle.get('version')} is not "
            f"{BUNDLE_VERSION}, the one this slangspec reads"
        )
    try:
        _check_shape(bundle)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
    return bundle


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _expect(ok: bool, field: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{field}: expected {what}")


def _check_shape(bundle: dict[str, Any]) -> None:
    """ValueError naming the first field that does not have the shape an export writes."""
    _expect(isinstance(bundle.get("toolchain"), dict), "toolchain", "an object")
    _expect(_strings(bundle.get("sources")), "sources", "an object of strings")
    _expect(_strings(bundle.get("binaries", {})), "binaries", "an object of strings")
    records, entries = bundle.get("records"), bundle.get("entries")
    _expect(isinstance(records, list), "records", "a list")
    _expect(isinstance(entries, list), "entries", "a list")
    for i, r in enumerate(records):
        at = f"records[{i}]"
        _expect(isinstance(r, dict), at, "an object")
        for name in ("module", "function", "signature", "device"):
            _expect(isinstance(r.get(name), str), f"{at}.{name}", "a string")
        for name in ("path", "source"):
            _expect(r.get(name) is None or isinstance(r[name], str), f"{at}.{name}", "a string")
        paths = r.get("include_paths")
        _expect(
            isinstance(paths, list) and all(isinstance(p, str) for p in paths),
            f"{at}.include_paths",
            "a list of strings",
        )
        _expect(_strings(r.get("defines")), f"{at}.defines", "an object of strings")
    for i, e in enumerate(entries):
        try:
            travel.parts(e)
        except travel.Refused as exc:
            at = f"entries[{i}]" + (f".{exc.part}" if exc.part else "")
            raise ValueError(f"{at}: {exc.why}") from None


def _entry_sources(i: int, entry: dict[str, Any]) -> dict[str, str]:
    """The kernel sources entry ``i``'s plan generates, by label; ValueError naming the field
    when the plan is not one for the entry's call, or a kernel is not what the plan makes."""
    try:
        sources, changed = regenerated(entry, regenerate_source)
    except ValueError as exc:
        raise ValueError(f"entries[{i}].plan: {exc}") from None
    if changed:
        label = changed[0]
        raise ValueError(
            f"entries[{i}].kernels.{label}: {entry['kernels'][label]} is not the source its "
            "plan generates"
        )
    return sources


def _carried(
    key: bytes | None,
    stored: dict[str, Any],
    bundle: dict[str, Any],
    device: dict[str, Any],
) -> tuple[dict[str, bytes] | None, str]:
    """The binaries an entry carries, by name, when they may be taken here under ``key``; else
    None and why not."""
    if key is None:
        return None, f"not taken without {SECRET_ENV}; built here when needed"
    entry = travel.parts(stored)
    if entry["preimage"]["device"] != device:
        return None, "built for another device"
    data: dict[str, bytes] = {}
    for b in entry["binaries"].values():
        try:
            data[b["file"]] = base64.b64decode(bundle["binaries"][b["file"]], validate=True)
        except (KeyError, binascii.Error):
            return None, f"the bundle lacks binary {b['file']}"
    texts = {n: bundle["sources"].get(n, "").encode() for n in entry["kernels"].values()}
    try:
        travel.check(stored, {**texts, **data}, key)
    except travel.Refused as exc:
        return None, f"{exc} ({SECRET_ENV})"
    return data, ""


def import_bundle(cache: CacheStore, file: str | Path, device: str | None = None) -> dict[str, Any]:
    """Import a bundle; returns counts and what was skipped, with why."""
    # Importing loads modules (torch, and slangpy where something is missing); exporting does not.
    from ..specializer import plan_from_signature
    from .warm import items_from_records, module_for

    bundle = read_bundle(file)
    key_here = setting(SECRET_ENV)
    skipped: list[dict[str, str]] = []
    local = toolchain(cache)
    mismatch = [f for f in FORMATS if bundle["toolchain"].get(f) != local[f]]
    if "signature_format" in mismatch:
        return {
            "records": 0,
            "entries": 0,
            "sources": 0,
            "binaries": 0,
            "skipped": [
                {
                    "what": "everything",
                    "why": "signature format "
                    f"{bundle['toolchain'].get('signature_format')} differs from "
                    f"{local['signature_format']} here",
                }
            ],
        }
    # Every entry that could be imported is checked before anything is written.
    generated = [
        None if mismatch or e["preimage"]["toolchain"] != local else _entry_sources(i, e)
        for i, e in enumerate(bundle["entries"])
    ]
    records = 0
    for item, record in zip(items_from_records(bundle["records"]), bundle["records"], strict=False):
        if item.source is None and not Path(item.path).is_file():
            skipped.append(
                {
                    "what": f"record {item.label}",
                    "why": f"module file {item.path} does not exist here",
                }
            )
            continue
        cache.record(record)
        records += 1
    sources = 0
    for name, text in bundle["sources"].items():
        if source_name(text) != name:
            skipped.append({"what": f"source {name}", "why": "content does not match its name"})
            continue
        cache.write_blob("source", text)
        sources += 1
    entries = binaries = 0
    for e, kernel_sources in zip(bundle["entries"], generated, strict=True):
        pre = e["preimage"]
        what = f"entry {pre['module']}::{pre['function']} {pre['signature']}"
        if mismatch:
            skipped.append(
                {"what": what, "why": f"{', '.join(mismatch)} differ from this slangspec's"}
            )
            continue
        if pre["toolchain"] != local:
            changed = [k for k in local if pre["toolchain"].get(k) != local[k]]
            skipped.append({"what": what, "why": f"built with other {', '.join(changed)}"})
            continue
        record = next(
            (
                r
                for r in bundle["records"]
                if r["module"] == pre["module"]
                and r["function"] == pre["function"]
                and r["signature"] == pre["signature"]
            ),
            None,
        )
        if record is None:
            skipped.append({"what": what, "why": "no record says where its module is"})
            continue
        item = items_from_records([record])[0]
        if item.source is None and not Path(item.path).is_file():
            skipped.append({"what": what, "why": f"module file {item.path} does not exist here"})
            continue
        m = module_for(item, device, cache)
        here = m.preimage(pre["function"], pre["signature"])
        if here["sources"] != pre["sources"] or here["defines"] != pre["defines"]:
            skipped.append({"what": what, "why": "its Slang sources differ here"})
            continue
        overloads = m.function_overloads(pre["function"])
        planned = plan_from_signature(overloads, pre["signature"])
        if json.loads(planned.to_json()) != json.loads(e["plan"]):
            why = "its plan is not the one type resolution makes for its call here"
            skipped.append({"what": what, "why": why})
            continue
        for text in kernel_sources.values():
            cache.write_blob("source", text)
        key = key_of(here)
        cache.insert(key, here, e["plan"], e["kernels"], {"imported": True})
        # Its plan generated the kernels checked above, which call this function of the module.
        described = [o.to_json() for o in overloads]
        cache.note_fact(m.functions_fact(pre["function"]), {pre["function"]: described})
        entries += 1
        if e.get("binaries"):
            data, why = _carried(key_here, e, bundle, here["device"])
            if data is None:
                skipped.append({"what": f"binaries of {what}", "why": why})
                continue
            for blob in data.values():
                cache.write_blob("binary", blob)
            binaries += len(data)  # blobs, as an export counts them (kernels may share one)
            for label, b in e["binaries"].items():
                cache.amend(key, binary_added(label, b))
    return {
        "records": records,
        "entries": entries,
        "sources": sources,
        "binaries": binaries,
        "skipped": skipped,
    }
