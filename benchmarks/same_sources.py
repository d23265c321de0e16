"""Whether another tree of slangspec makes the very plans and kernel sources this one stored.

    python benchmarks/same_sources.py dump ROOT... > entries.jsonl     # with this tree
    PYTHONPATH=OTHER/src python benchmarks/same_sources.py check entries.jsonl

``dump`` writes, for every entry of the cache roots under each ROOT (a directory holding cache
roots at any depth, as a test run's temporary directory does), its call's preimage, its stored
plan, its function's stored description and its kernel sources. ``check``, run with the other
tree first on the path, resolves each call again from the description, generates each kernel
again from that plan, and counts the entries whose plan and every source are byte for byte the
stored ones; it lists the first that differ and exits 1 if any does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from baseline_tree import from_tree


def dump(roots: list[str]) -> None:
    import slangspec
    from slangspec.cache_store import entry_facts

    for top in roots:
        for index in sorted(Path(top).rglob("index/cache.db")):
            cache = slangspec.Cache(index.parent.parent)
            for _, row in cache.rows():
                if not row or "plan" not in row:
                    continue
                pre = row["preimage"]
                sources = {}
                for label, name in row["kernels"].items():
                    text = cache.read_blob(name)
                    if text is not None:
                        sources[label] = text.decode()
                described = cache.fact(entry_facts(pre)[0]).get(pre["function"])
                entry = {"preimage": pre, "plan": row["plan"], "sources": sources}
                print(json.dumps({**entry, "described": described}))


def check(path: str) -> int:
    regenerate = from_tree("regenerate_source", "slangspec.runtime.cache", "slangspec.cache")
    replan = from_tree("resolved_plan", "slangspec.runtime.cache", "slangspec.cache")
    same, differ, unplanned = 0, [], 0
    seen: set[str] = set()
    for line in Path(path).read_text().splitlines():
        if line in seen:
            continue
        seen.add(line)
        entry: dict[str, Any] = json.loads(line)
        pre, plan = entry["preimage"], entry["plan"]
        if isinstance(entry["described"], list):
            plan_here = replan(entry["described"], pre)
            if json.loads(plan_here) != json.loads(plan):
                differ.append(f"{pre['function']} {pre['signature']}: plan")
                continue
        else:
            unplanned += 1
        changed = [
            label
            for label, text in entry["sources"].items()
            if regenerate(plan, pre, label) != text
        ]
        if changed:
            differ.append(f"{pre['function']} {pre['signature']}: {', '.join(changed)}")
        else:
            same += 1
    print(
        f"{same} entries the same, {len(differ)} differ "
        f"({unplanned} without a stored description: their sources only)"
    )
    for d in differ[:20]:
        print("  differs:", d)
    return 1 if differ else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["dump"] and len(args) > 1:
        dump(args[1:])
    elif args[:1] == ["check"] and len(args) == 2:
        sys.exit(check(args[1]))
    elif args in (["-h"], ["--help"]):
        print(__doc__)
    else:
        sys.exit(__doc__)
