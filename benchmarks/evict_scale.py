"""Eviction at scale: how long shrinking a large cache takes, and what a build over the size
bound pays for keeping it, against one under it.

    python benchmarks/evict_scale.py [--entries 1500] [--repeat 5]

Fills a fresh cache with synthetic entries (rows, a forward and a backward source and a binary
each; nothing is compiled), then times ``specialize cache evict --max-size`` to half its size,
and ``Cache.enforce_bound`` after one more entry with the bound just under (must evict) and just
over (nothing to do) the cache's size. Medians of ``--repeat`` fresh caches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import slangspec
from slangspec.cache_store import key_of
from slangspec.cache_store.entry import binary_added


def fill(cache: slangspec.Cache, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        pre = {
            "module": "m",
            "function": "f",
            "signature": f"m::f call s{i}",
            "device": {"kind": "vulkan", "adapter": "none"},
        }
        key = key_of(pre)
        forward = cache.write_blob("source", f"// forward {i}\n" + "x" * 600)
        backward = cache.write_blob("source", f"// backward {i}\n" + "y" * 600)
        cache.insert(key, pre, "{}", {"forward": forward, "10": backward})
        binary = cache.write_blob("binary", f"cubin {i}".encode() * 200)
        cache.amend(key, binary_added("forward", {"file": binary, "layout": {}, "group": 128}))


def one_run(n: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="slangspec-evict-"))
    cache = slangspec.Cache(root)
    fill(cache, n)
    size = cache.disk.size()
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "slangspec",
            "cache",
            "evict",
            "--max-size",
            str(size // 2),
            "--cache-dir",
            str(root),
        ],
        check=True,
        capture_output=True,
    )
    evict_s = time.perf_counter() - start
    refilled = slangspec.Cache(root)
    fill(refilled, n - len(refilled.entries()), start=n)
    size = refilled.disk.size()
    timings = {}
    for name, bound in (("under", size * 2), ("over", size - 1)):
        fill(refilled, 1, start=3 * n + len(timings))
        os.environ["SLANGSPEC_CACHE_SIZE"] = str(bound)
        start = time.perf_counter()
        shrinking = refilled.enforce_bound()
        timings[name] = time.perf_counter() - start
        if shrinking is not None:
            shrinking.join()
            timings["background"] = time.perf_counter() - start
    os.environ.pop("SLANGSPEC_CACHE_SIZE")
    return {
        "evict_s": evict_s,
        "under_ms": timings["under"] * 1e3,
        "over_ms": timings["over"] * 1e3,
        "background_ms": timings["background"] * 1e3,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--entries", type=int, default=1500)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    runs = [one_run(args.entries) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{args.entries} entries, median of {args.repeat} fresh caches")
    print(f"  specialize cache evict --max-size half      {med['evict_s']:8.2f} s")
    print(f"  bound check after a build, under the bound   {med['under_ms']:8.2f} ms")
    print(f"  bound check after a build, over the bound    {med['over_ms']:8.2f} ms")
    extra = med["over_ms"] - med["under_ms"]
    print(f"  over - under                                 {extra:8.2f} ms")
    print(f"  the eviction it started, on its own thread   {med['background_ms']:8.2f} ms")


if __name__ == "__main__":
    main()
