"""Where a `specialize warm` run spends its time, phase by phase, in every worker process.

``install(directory)`` wraps the functions of each phase, as their modules are first
imported, so that every call appends its start (epoch seconds) and duration to
``directory/<pid>.jsonl``; workers forked afterwards inherit the wrappers.
``summary(directory, wall_s, jobs)`` adds them up. Phases nest (a Slang compile opens the
device on its first call), so each is inclusive. ``timeline(directory,
started)`` says when, from ``started``, the run first entered a phase, first compiled, last
left a phase and finished its last task, and when each of the command's own steps began and
ended (gathering results, printing its report, finding its workers to kill, running its exit
handlers): what came before the first compile is start-up, what comes after the last task is
the tail.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

TASK = "a worker's task, whole"
"""The phase around every other, whose end says when the last result was ready."""
RESULTS = "the command gathering results"
REPORT = "the command's report"
FIND = "the command finding its workers"
HANDLERS = "the command's exit handlers"
EXIT = "the command's exit call"
COMMAND = (RESULTS, REPORT, FIND, HANDLERS, EXIT)
"""The command's own phases, in the parent process: not summed with the workers', and timed
in the parent only (a worker finds its children too, as it exits)."""

PHASES: dict[str, list[tuple[str, str]]] = {
    "load the module": [("slangspec.aot.warm", "module_for")],
    "open the cache": [("slangspec.runtime.cache", "Cache.for_running")],
    "the toolchain's identity": [("slangspec.runtime.module_base", "toolchain_of")],
    "torch's CUDA context": [("slangspec.runtime.cuda_backend", "primary_context")],
    "check slangpy's module cache": [
        ("slangspec.cache_store.module_cache", "ModuleCacheGuard.check")
    ],
    "seal slangpy's module cache": [
        ("slangspec.cache_store.module_cache", "ModuleCacheGuard.seal")
    ],
    "open slangpy's device": [("slangspec.runtime.devices", "open_device")],
    "Slang front-end (reflection)": [("slangspec.runtime.backend", "SlangBackend.front_end")],
    "Slang session": [("slangspec.compile.slang.vulkan_compiler", "Compiler._session")],
    "slangpy's library front-end": [
        ("slangspec.compile.slang.vulkan_compiler", "Compiler._library")
    ],
    "module front-end": [("slangspec.compile.slang.vulkan_compiler", "Compiler._loaded")],
    "type resolution": [("slangspec.runtime.miss_path", "plan_from_signature")],
    "code generation": [("slangspec.runtime.miss_path", "kernel_source")],
    "Slang compile": [
        ("slangspec.runtime.cuda_backend", "CudaBackend.compiled"),
        ("slangspec.runtime.vulkan_backend", "VulkanBackend.compiled"),
    ],
    "Slang to target code (Vulkan)": [
        ("slangspec.compile.slang.vulkan_compiler", "Compiler.kernel")
    ],
    "Slang's global session (CUDA)": [("slangspec.compile.slang.api", "SlangSession.__init__")],
    "slangpy's library to IR (CUDA)": [("slangspec.compile.cuda.build", "slangpy_library")],
    "module front-end (CUDA)": [("slangspec.compile.cuda.source", "front_end")],
    "reflection to FunctionInfo": [("slangspec.specializer.reflect", "function_info")],
    "Slang to CUDA source": [("slangspec.compile.cuda.build", "cuda_source")],
    "NVRTC": [("slangspec.compile.cuda.nvrtc", "Nvrtc.compile")],
    "the compile server (client's wait)": [("slangspec.compile.server.client", "exchange")],
    "starting the compile server": [("slangspec.compile.server.client", "start")],
    "cubin into the CUDA context": [("slangspec.runtime.cuda_driver", "DriverKernel.from_binary")],
    "cache writes": [
        ("slangspec.cache_store.cache", f"Cache.{name}")
        for name in ("insert", "amend", "write_blob", "record")
    ],
    "publishing to the remote tier": [("slangspec.cache_store.cache", "Cache.publish")],
    TASK: [("slangspec.aot.warm", "warm_task")],
    RESULTS: [("slangspec.aot.warm", "warm")],
    REPORT: [("slangspec.cli.warm", "_report")],
    FIND: [("multiprocessing", "active_children")],
    HANDLERS: [("atexit", "_run_exitfuncs")],
}
"""Each phase's functions: (module, attribute path in it)."""


def _write(directory: Path, phase: str, began: float, seconds: float) -> None:
    line = json.dumps({"phase": phase, "start": began, "s": seconds})
    with open(directory / f"{os.getpid()}.jsonl", "a") as f:
        f.write(line + "\n")


def _records(directory: Path) -> list[dict[str, Any]]:
    return [
        {**json.loads(line), "pid": path.stem}
        for path in directory.glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]


def _wrap(module: ModuleType, directory: Path) -> None:
    """Time every phase function of ``module``."""
    for phase, places in PHASES.items():
        for module_name, attribute in places:
            if module_name != module.__name__:
                continue
            *path, name = attribute.split(".")
            owner: Any = module
            for part in path:
                owner = getattr(owner, part, None)
            original = getattr(owner, name, None)
            if original is None:  # another tree's code, without this phase
                continue

            @functools.wraps(original)
            def timed(*args: Any, _original: Any = original, _phase: str = phase, **kw: Any):
                began, start = time.time(), time.perf_counter()
                try:
                    return _original(*args, **kw)
                finally:
                    if _phase not in COMMAND or os.getpid() == _parent:
                        _write(directory, _phase, began, time.perf_counter() - start)

            setattr(owner, name, timed)


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps a phase module's functions as soon as it is first imported, so that installing
    the timer imports nothing (``warm --jobs`` forks its workers before importing torch)."""

    def __init__(self, modules: set[str], directory: Path) -> None:
        self.modules = modules
        self.directory = directory

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.modules:
            return None
        self.modules.discard(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, directory = spec.loader, self.directory
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _wrap(module, directory)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_parent = os.getpid()
"""The process that imported this module and installs the timer: the command."""


def install(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    exit_now = os._exit

    def stamped_exit(code: int) -> None:
        if os.getpid() == _parent:
            _write(directory, EXIT, time.time(), 0.0)
        exit_now(code)

    os._exit = stamped_exit
    # Built in, so found by no path finder: loaded here (it costs nothing) to be wrapped now.
    importlib.import_module("atexit")
    modules = {module for places in PHASES.values() for module, _ in places}
    for name in sorted(modules):
        if name in sys.modules:
            _wrap(sys.modules[name], directory)
            modules.discard(name)
    sys.meta_path.insert(0, _WrapOnImport(modules, directory))


def summary(directory: Path, wall_s: float, jobs: int) -> list[tuple[str, float, int]]:
    """(phase, seconds summed over processes, calls), the phases in ``PHASES`` order, then
    "idle": the time workers were not inside any top-level phase."""
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for record in _records(directory):
        seconds[record["phase"]] += record["s"]
        calls[record["phase"]] += 1
    rows = [
        (phase, seconds[phase], calls[phase])
        for phase in PHASES
        if calls[phase] and phase not in COMMAND
    ]
    top = ("load the module", "Slang compile", "cubin from PTX", "cache writes")
    busy = sum(seconds[p] for p in top)
    rows.append(("workers' time outside those phases", max(0.0, wall_s * jobs - busy), 0))
    return rows


def timeline(directory: Path, started: float) -> dict[str, float]:
    """Seconds from ``started`` (epoch) to the first phase entered in any process, to the
    first Slang compile, to the end of the last phase within a task, and to the end of the
    last task (what comes after that is the command's own: results, report, exit)."""
    records = _records(directory)
    if not records:
        return {}
    compiles = [r["start"] for r in records if r["phase"] == "Slang compile"]
    firsts: dict[str, float] = {}
    for r in records:
        if r["phase"] == "Slang compile":
            firsts[r["pid"]] = min(firsts.get(r["pid"], r["start"]), r["start"])
    per_worker = sorted(firsts.values())
    inner = [r for r in records if r["phase"] not in (TASK, *COMMAND)]
    tasks = [r for r in records if r["phase"] == TASK]
    return {
        "first phase": min(r["start"] for r in inner) - started,
        "first compile": (min(compiles) if compiles else float("nan")) - started,
        "a worker's first compile, median": (
            per_worker[len(per_worker) // 2] if per_worker else float("nan")
        )
        - started,
        "the last worker's first compile": (per_worker[-1] if per_worker else float("nan"))
        - started,
        "last phase ends": max(r["start"] + r["s"] for r in inner) - started,
        "last task ends": (max(r["start"] + r["s"] for r in tasks) if tasks else float("nan"))
        - started,
        **{
            name: when - started
            for phase in COMMAND
            if (mine := [r for r in records if r["phase"] == phase])
            for name, when in (
                (f"{phase} begins", min(r["start"] for r in mine)),
                (f"{phase} ends", max(r["start"] + r["s"] for r in mine)),
            )
        },
    }
