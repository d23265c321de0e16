"""Where a `specialize warm` run spends its time, phase by phase, in every worker process.

``install(directory)`` wraps the functions of each phase so that every call appends its
duration to ``directory/<pid>.jsonl``; workers forked afterwards inherit the wrappers.
``summary(directory, wall_s, jobs)`` adds them up. Phases nest (a Slang compile opens the
device on its first call), so each is inclusive.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

PHASES: dict[str, list[tuple[str, str]]] = {
    "load the module": [("slangspec.warm", "module_for")],
    "open slangpy's device": [("slangspec.devices", "open_device")],
    "Slang front-end (reflection)": [("slangspec.runtime.builder.Builder", "front_end")],
    "type resolution": [("slangspec.runtime.builder", "plan_from_signature")],
    "code generation": [("slangspec.runtime.builder", "kernel_source")],
    "Slang compile": [("slangspec.runtime.builder.Builder", "_compiled")],
    "cubin from PTX": [("slangspec.runtime.builder", "cubin_from_ptx")],
    "cache writes": [
        ("slangspec.cache_store.cache.Cache", name)
        for name in ("insert", "add_kernel", "add_binary", "write_source", "write_binary")
    ]
    + [("slangspec.cache_store.cache.Cache", "record")],
    "publishing to the remote tier": [("slangspec.cache_store.cache.Cache", "publish")],
}


def _owner(path: str) -> Any:
    import importlib

    module, _, attribute = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), attribute)


def install(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for phase, places in PHASES.items():
        for owner_path, name in places:
            owner = _owner(owner_path)
            original = getattr(owner, name)

            @functools.wraps(original)
            def timed(*args: Any, _original: Any = original, _phase: str = phase, **kw: Any):
                start = time.perf_counter()
                try:
                    return _original(*args, **kw)
                finally:
                    line = json.dumps({"phase": _phase, "s": time.perf_counter() - start})
                    with open(directory / f"{os.getpid()}.jsonl", "a") as f:
                        f.write(line + "\n")

            setattr(owner, name, timed)


def summary(directory: Path, wall_s: float, jobs: int) -> list[tuple[str, float, int]]:
    """(phase, seconds summed over processes, calls), the phases in ``PHASES`` order, then
    "idle": the time workers were not inside any top-level phase."""
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            seconds[record["phase"]] += record["s"]
            calls[record["phase"]] += 1
    rows = [(phase, seconds[phase], calls[phase]) for phase in PHASES if calls[phase]]
    top = ("load the module", "Slang compile", "cubin from PTX", "cache writes")
    busy = sum(seconds[p] for p in top)
    rows.append(("workers' time outside those phases", max(0.0, wall_s * jobs - busy), 0))
    return rows
