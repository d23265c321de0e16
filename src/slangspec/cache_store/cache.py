"""``slangspec.Cache``: inspect, bound, evict and verify a cache directory."""

from __future__ import annotations

import os
import shutil
from typing import Any

from .location import PARTS, cache_root
from .policy import enforce_bound, evict, select, sizes, verify
from .store import Store


class Cache:
    """A slangspec cache directory (``path``, else ``SLANGSPEC_CACHE_DIR``, else the user cache)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.root = cache_root(path)
        self.store = Store(self.root)

    def __repr__(self) -> str:
        return f"<slangspec.Cache {self.root}>"

    def entries(self) -> list[dict[str, Any]]:
        """One dict per entry: key, module, function, signature, device, kernels, metadata."""
        out = []
        for key, row in self.store.rows():
            if row is None:
                out.append({"key": key, "damaged": True})
                continue
            pre, meta = row["preimage"], row["meta"]
            files = [self.store.source_path(n) for n in row["kernels"].values()]
            files += [self.store.binary_path(b["file"]) for b in row.get("binaries", {}).values()]
            size = sum(p.stat().st_size for p in files if p.exists())
            out.append(
                {
                    "key": key,
                    "module": pre["module"],
                    "function": pre["function"],
                    "signature": pre["signature"],
                    "device": pre["device"]["kind"],
                    "adapter": pre["device"]["adapter"],
                    "kernels": sorted(row["kernels"]),
                    "size": size + len(row["plan"]),
                    "hits": meta["hits"],
                    "created": meta["created"],
                    "last_used": meta["last_used"],
                    "compile_s": meta.get("compile_s", 0.0),
                }
            )
        return sorted(out, key=lambda e: e.get("last_used", 0.0), reverse=True)

    def stats(self) -> dict[str, Any]:
        """Entry count, bytes per part, hits and misses, and entries per device."""
        entries = self.entries()
        per_device: dict[str, int] = {}
        for e in entries:
            if "device" in e:
                per_device[e["device"]] = per_device.get(e["device"], 0) + 1
        hits, misses = self.store.counters()
        part_sizes = sizes(self.store)
        return {
            "path": str(self.root),
            "entries": len(entries),
            "bytes": sum(part_sizes.values()),
            "bytes_by_part": part_sizes,
            "hits": hits,
            "misses": misses,
            "per_device": per_device,
        }

    def evict(
        self,
        *,
        older_than: float | None = None,
        unused_since: float | None = None,
        max_size: int | None = None,
        module: str | None = None,
        function: str | None = None,
        key: str | None = None,
        device: str | None = None,
    ) -> list[str]:
        """Evict matching entries (ages in seconds, ``key`` by prefix), then shrink to
        ``max_size`` bytes by least-recent use; returns the evicted keys."""
        filters = (older_than, unused_since, module, function, key, device)
        gone = []
        if any(f is not None for f in filters):
            gone = evict(
                self.store,
                select(
                    self.store,
                    older_than=older_than,
                    unused_since=unused_since,
                    module=module,
                    function=function,
                    key=key,
                    device=device,
                ),
            )
        if max_size is not None:
            gone += enforce_bound(self.store, max_size)
        return gone

    def clear(self) -> None:
        """Remove every entry, source, compiled artifact and record."""
        self.store.close()
        for name in PARTS:
            shutil.rmtree(self.root / name, ignore_errors=True)
        self.store = Store(self.root)

    def verify(self, repair: bool = False) -> dict[str, Any]:
        """Check rows, preimages, plans and sources; ``repair`` drops or rebuilds what fails."""
        return verify(self.store, repair)
