"""Portable cache bundles: export the records, plans and sources of a cache; import them into
another, re-keyed for the local machine and cache path.

Compiled artifacts do not travel (they belong to one toolchain and device); ``specialize warm
--recorded`` compiles the imported entries from their plans and sources without type
resolution or code generation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .cache_store import Cache, key_of
from .cache_store.keys import source_name
from .preimage import toolchain
from .warm import items_from_records, module_for

BUNDLE_FORMAT = "slangspec-bundle"
BUNDLE_VERSION = 1


def export_bundle(cache: Cache, file: str | Path) -> dict[str, int]:
    """Write every record, whole entry and referenced source of ``cache`` to ``file``."""
    entries, sources = [], {}
    for _, row in cache.rows():
        if row is None:
            continue
        texts = {n: cache.read_source(n) for n in row["kernels"].values()}
        if None in texts.values():
            continue
        sources.update(texts)
        entries.append(
            {"preimage": row["preimage"], "plan": row["plan"], "kernels": row["kernels"]}
        )
    bundle = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "toolchain": toolchain(),
        "records": cache.records(),
        "entries": entries,
        "sources": sources,
    }
    Path(file).write_text(json.dumps(bundle, indent=1, sort_keys=True))
    return {"records": len(bundle["records"]), "entries": len(entries), "sources": len(sources)}


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
    return bundle


def import_bundle(cache: Cache, file: str | Path, device: str | None = None) -> dict[str, Any]:
    """Import a bundle; returns counts and what was skipped, with why."""
    bundle = read_bundle(file)
    skipped: list[dict[str, str]] = []
    local = toolchain()
    formats = ("cache_format", "signature_format", "plan_format", "codegen_format")
    mismatch = [f for f in formats if bundle["toolchain"].get(f) != local[f]]
    if "signature_format" in mismatch:
        return {
            "records": 0,
            "entries": 0,
            "sources": 0,
            "skipped": [
                {
                    "what": "everything",
                    "why": "signature format "
                    f"{bundle['toolchain'].get('signature_format')} differs from "
                    f"{local['signature_format']} here",
                }
            ],
        }
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
        cache.write_source(text)
        sources += 1
    entries = 0
    for e in bundle["entries"]:
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
        m = module_for(item, device, str(cache.root))
        here = m.preimage(pre["function"], pre["signature"])
        if here["sources"] != pre["sources"] or here["defines"] != pre["defines"]:
            skipped.append({"what": what, "why": "its Slang sources differ here"})
            continue
        cache.insert(key_of(here), here, e["plan"], e["kernels"], {"imported": True})
        entries += 1
    return {"records": records, "entries": entries, "sources": sources, "skipped": skipped}
