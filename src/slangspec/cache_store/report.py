"""What people see of a cache: entry listings, one entry in full, and totals."""

from __future__ import annotations

import json
import time
from typing import Any

from .disk import DiskTier
from .keys import key_of
from .policy import EntryFilter, rows


def described(key: str, preimage: dict[str, Any]) -> dict[str, Any]:
    """What a listing says of every entry: its key, and the module, function, signature and
    device kind its preimage names."""
    return {
        "key": key,
        "module": preimage["module"],
        "function": preimage["function"],
        "signature": preimage["signature"],
        "device": preimage["device"]["kind"],
    }


def entries(tier: DiskTier, where: EntryFilter | None = None) -> list[dict[str, Any]]:
    """One dict per entry ``where`` matches, most recently used first; a damaged row is listed
    as ``{"key": ..., "damaged": True}``."""
    now = time.time()
    out = []
    for key, row in rows(tier):
        if where and not where.matches(key, row, now):
            continue
        if row is None:
            out.append({"key": key, "damaged": True})
            continue
        pre, meta = row["preimage"], row["meta"]
        files = [tier.blob_path(n) for n in row["kernels"].values()]
        files += [tier.blob_path(b["file"]) for b in row.get("binaries", {}).values()]
        size = sum(p.stat().st_size for p in files if p.exists())
        out.append(
            {
                **described(key, pre),
                "target": pre["device"].get("arch") or pre["device"].get("adapter", ""),
                "kernels": sorted(row["kernels"]),
                "size": size + len(row["plan"]),
                "hits": meta["hits"],
                "created": meta["created"],
                "last_used": meta["last_used"],
                "compile_s": meta.get("compile_s", 0.0),
            }
        )
    return sorted(out, key=lambda e: e.get("last_used", 0.0), reverse=True)


def show(tier: DiskTier, prefix: str) -> dict[str, Any]:
    """The one entry whose key starts with ``prefix``, in full; LookupError when there is none
    (or it is damaged), ValueError when the prefix fits more than one."""
    matches = [(k, row) for k, row in rows(tier) if k.startswith(prefix)]
    if not matches:
        raise LookupError(f"no entry has a key starting with {prefix!r}")
    if len(matches) > 1:
        raise ValueError(
            f"{len(matches)} entries have keys starting with {prefix!r}; give more of the key"
        )
    key, row = matches[0]
    if row is None:
        raise LookupError(f"entry {key} is damaged; run 'specialize cache verify --repair'")

    def blob(name: str) -> dict[str, Any]:
        path = tier.blob_path(name)
        return {
            "file": path.name,
            "bytes": path.stat().st_size if path.exists() else None,
            "whole": tier.read_blob(name) is not None,
        }

    kernels = {}
    for label, name in sorted(row["kernels"].items()):
        path = tier.blob_path(name)
        text = path.read_text(errors="replace") if path.exists() else None
        kernels[label] = {"module": name, **blob(name), "text": text}
    return {
        "key": key,
        "key_matches_preimage": key_of(row["preimage"]) == key,
        "preimage": row["preimage"],
        "plan": json.loads(row["plan"]),
        "meta": row["meta"],
        "kernels": kernels,
        "binaries": {
            label: blob(b["file"]) for label, b in sorted(row.get("binaries", {}).items())
        },
    }


def stats(tier: DiskTier) -> dict[str, Any]:
    """Entry count, bytes per part (walked), hits and misses, and entries per device."""
    listed = entries(tier)
    per_device: dict[str, int] = {}
    for e in listed:
        if "device" in e:
            per_device[e["device"]] = per_device.get(e["device"], 0) + 1
    hits, misses = tier.counters()
    part_sizes = tier.measure()
    return {
        "path": str(tier.root),
        "entries": len(listed),
        "bytes": sum(part_sizes.values()),
        "bytes_by_part": part_sizes,
        "hits": hits,
        "misses": misses,
        "per_device": per_device,
    }
