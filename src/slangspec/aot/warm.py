"""Ahead-of-time warming: manifests and records of specializations, built into the cache.

A manifest is TOML::

    [[module]]
    path = "shaders/poly.slang"          # relative to the manifest
    include_paths = ["shaders/lib"]      # optional, relative to the manifest
    defines = { SCALE = "2" }            # optional

    [[module.function]]
    name = "poly"
    masks = "all"                        # "all" (default), "none", or a list like ["10", "01"]
    specializations = [
        ["f32[1] grad", "f32[N] nograd"],             # one argument spec per parameter
        { x = "f32[N] nograd", a = "f32[1] grad" },   # or by parameter name
        "poly::poly call [D1,S6,G1,V1] [D1,S6,G0,Vx]", # or a whole call signature
    ]

Argument specs::

    tensor  dtype[dims] [grad|nograd]   dtype: f16 f32 f64 bf16 i32 i64 bool; dims: integers or
                                        names (a name is an extent larger than 4); nograd default
    grid    grid[n] [strided]           an n-dimensional slangspec.grid (strided: given an
                                        offset or a stride, whatever their values)
    generator call_id | thread_id | wang_hash | rand_float, each [n] where given dims=n
    result  _result[n]                  after the arguments: the n-dimensional call shape that
                                        _result= gives a call with generators
    scalar  float | int | bool          a Python scalar
    struct  { origin = "f32[N, 3] grad", dir = "f32[N, 3]" }   a dict, field by field (in
            a command line: {origin: f32[N, 3] grad, dir: f32[N, 3]}); a "_type" field
            names the struct, as a call's dict does: { _type = "Circle", radius = "f32[N]" }
    raw     [D2,S6,G1,Vx3]              an argument signature as slangspec.signature prints it

Each kind of value reads its own spelling: its row of the table of Python values
(``signatures.values``).
"""

from __future__ import annotations

import concurrent.futures as futures
import logging
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..cache_store import FORWARD, lease_seconds
from ..define import frozen
from ..errors import Error
from ..runtime.cache import Cache
from ..runtime.devices import device_kind
from ..settings import setting
from ..signatures.function_ref import FunctionNameError, canonical_name
from ..signatures.module_text import checked_defines
from ..signatures.text import call_arguments, compose_call_signature, parse_call_signature
from ..signatures.values import SPEC_WORDING, bind_names
from ..signatures.values import spec_signature as arg_signature
from . import pool as warm_pool

if TYPE_CHECKING:
    from ..runtime.module_base import BuildFunction, BuildModule

_log = logging.getLogger(__name__)
WarmStatus = Literal["built", "cached", "missing", "present", "failed", "deferred"]
"""What became of one item; "deferred" (another machine is building one of its kernels) is only
ever passing: the kernel is taken up again once everything else was."""


class ManifestError(Error, ValueError):
    """A manifest that cannot be used; the message names the file, line and column."""


@frozen
class WarmItem:
    """One specialization to build: where its module is, which function, which signature."""

    name: str  # module name
    path: str | None  # the module file, or None when ``source`` holds it
    source: str | None
    include_paths: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]
    function: str
    signature: str
    masks: tuple[str, ...] | None  # None: every mask the plan can need
    where: str = ""  # file:line:column it came from

    @property
    def label(self) -> str:
        return f"{self.name}::{self.function} {call_arguments(self.signature)}".rstrip()


@frozen
class WarmResult:
    item: WarmItem
    status: WarmStatus
    detail: str = ""


def _position(text: str, needle: str) -> str:
    index = text.find(needle)
    if index < 0:
        return ""
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"{line}:{column}"


def parse_manifest(path: str | Path) -> list[WarmItem]:
    """Every specialization a manifest lists; ManifestError names file, line and column."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: {exc}") from None

    def fail(message: str, needle: str | None = None) -> ManifestError:
        where = _position(text, needle) if needle else ""
        return ManifestError(f"{path}:{where + ': ' if where else ' '}{message}")

    modules = data.get("module")
    if not isinstance(modules, list) or not modules:
        raise fail("expected at least one [[module]] table")
    base = path.parent
    items = []
    for module in modules:
        mpath = module.get("path")
        if not isinstance(mpath, str):
            raise fail("every [[module]] needs a 'path' string", "[[module]]")
        file = (base / mpath).resolve()
        if not file.is_file():
            raise fail(f"module path {mpath!r} does not exist", mpath)
        includes = module.get("include_paths", [])
        defines = module.get("defines", {})
        if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
            raise fail("'include_paths' must be a list of strings", "include_paths")
        if not isinstance(defines, dict) or not all(isinstance(v, str) for v in defines.values()):
            raise fail("'defines' must be a table of strings", "defines")
        try:
            checked_defines(defines)
        except ValueError as exc:
            raise fail(str(exc), "defines") from None
        functions = module.get("function")
        if not isinstance(functions, list) or not functions:
            raise fail(f"module {mpath!r} lists no [[module.function]]", mpath)
        for fn in functions:
            name = fn.get("name")
            if not isinstance(name, str):
                raise fail("every [[module.function]] needs a 'name' string", "[[module.function]]")
            try:
                name = canonical_name(name)
            except FunctionNameError as exc:
                raise fail(str(exc), "name") from None
            masks = _masks(fn.get("masks", "all"), fail)
            specs = fn.get("specializations")
            if not isinstance(specs, list) or not specs:
                raise fail(f"function {name!r} lists no specializations", f'"{name}"')
            function_id = f"{file.stem}::{name}"
            # The function's item; each specialization is it with a signature and a place.
            item = WarmItem(
                file.stem,
                str(file),
                None,
                tuple(str((base / i).resolve()) for i in includes),
                tuple(sorted(defines.items())),
                name,
                "",
                masks,
            )
            for spec in specs:
                signature, needle = _signature(function_id, spec, fail, item)
                where = f"{path}:{_position(text, needle)}"
                items.append(replace(item, signature=signature, where=where))
    return items


def _masks(value: Any, fail: Callable[..., ManifestError]) -> tuple[str, ...] | None:
    if value == "all":
        return None
    if value == "none":
        return ()
    if isinstance(value, list) and all(
        isinstance(m, str) and re.fullmatch("[01]+", m) for m in value
    ):
        return tuple(value)
    raise fail(f'masks {value!r}: expected "all", "none" or a list of masks like "10"', "masks")


def _signature(function_id: str, spec: Any, fail: Callable[..., ManifestError], item: WarmItem):
    if isinstance(spec, dict):
        # By parameter name: the function's description (cached, else reflected) orders them.
        needle = next(iter(spec), function_id)
        try:
            fn = module_for(item, None, None, read_only=True)[item.function]
            names = fn.parameter_names(len(spec))
        except Exception as exc:  # the module does not load, or lacks the function
            message = _failure(exc)
            raise fail(f"cannot name {function_id}'s parameters: {message}", needle) from None
        try:
            spec = list(bind_names(function_id, names, [], spec, SPEC_WORDING))
        except ValueError as exc:
            raise fail(str(exc), needle) from None
    if isinstance(spec, str):
        try:
            call = parse_call_signature(spec)
        except ValueError as exc:
            raise fail(str(exc), spec) from None
        if call.function_id != function_id:
            raise fail(f"call signature is for {call.function_id}, not {function_id}", spec)
        return spec, spec
    if isinstance(spec, list) and all(isinstance(a, str | dict) for a in spec):
        try:
            args = [arg_signature(a) for a in spec]
        except ValueError as exc:
            needle = next(
                (a for a in spec if str(exc).startswith(f"argument spec {a!r}")),
                spec[0] if spec and isinstance(spec[0], str) else function_id,
            )
            raise fail(str(exc), needle) from None
        first = next((a for a in spec if isinstance(a, str)), function_id)
        return compose_call_signature(function_id, args), first
    raise fail(
        f"specialization {spec!r}: expected a list of argument specs, a table of them by "
        "parameter name, or a call signature"
    )


def items_from_records(records: Iterable[dict[str, Any]]) -> list[WarmItem]:
    """Replayable items from what the JIT recorded."""
    items = []
    for r in records:
        items.append(
            WarmItem(
                r["module"],
                r["path"],
                r["source"],
                tuple(r["include_paths"]),
                tuple(sorted(r["defines"].items())),
                r["function"],
                r["signature"],
                None,
                "recorded",
            )
        )
    return sorted(set(items), key=lambda i: (i.name, i.function, i.signature))


# -- building --------------------------------------------------------------------------------------

_modules: dict[tuple, BuildModule] = {}


def module_for(
    item: WarmItem, device: str | None, cache: str | Cache | None, read_only: bool = False
) -> BuildModule:
    """The module an item names, as the builder sees it (no torch), one per process, options
    and architecture built for (``--arch`` names several, one after the other, in one process
    where it builds without workers), run from ``cache`` (a cache, or the directory of one;
    with ``read_only``, a view of it that writes nothing)."""
    from ..runtime.module_base import BuildModule, LoadOptions, load_module, load_module_source

    where = (str(cache.root), cache.read_only) if isinstance(cache, Cache) else (cache, read_only)
    arch = setting("SLANGSPEC_CUDA_ARCH")
    key = (item.name, item.path, item.source, item.include_paths, item.defines, device, where, arch)
    m = _modules.get(key)
    if m is None:
        if not isinstance(cache, Cache):
            cache = Cache.for_running(cache, read_only=read_only)
        options: LoadOptions = {
            "device": device,
            "include_paths": item.include_paths,
            "defines": dict(item.defines),
        }
        if item.source is not None:
            m = load_module_source(BuildModule, item.name, item.source, cache=cache, **options)
        else:
            m = load_module(BuildModule, item.path, cache=cache, **options)
        m.waits_for_reflection = False
        _modules[key] = m
    return m


def check_one(item: WarmItem, device: str | None, cache_dir: str | None) -> WarmResult:
    """Whether the cache holds everything ``item`` names ("present") or what it lacks
    ("missing"), compiling nothing; failures are results, not raises."""
    try:
        fn = module_for(item, device, cache_dir, read_only=True)[item.function]
        missing = fn.missing(item.signature, item.masks)
        return WarmResult(item, "missing" if missing else "present", ", ".join(missing))
    except Exception as exc:  # reported per item; the run goes on
        return _failed(item, exc)


def warm_task(
    item: WarmItem, mask: str | None, device: str | None, cache_dir: str | None, defer: bool
) -> tuple[WarmResult, tuple[str, ...]]:
    """One kernel of ``item``: its forward kernel when ``mask`` is None, which also returns the
    grad masks whose backward kernels are left to build; else that mask's backward kernel.
    With ``defer``, a kernel that another process sharing the remote tier is warming (it
    claimed it first) or compiling (it holds its compile lease) is left for later
    ("deferred"). Failures are results, not raises."""
    try:
        fn = module_for(item, device, cache_dir)[item.function]
        label = FORWARD if mask is None else mask
        if not defer:
            return _kernel_task(item, fn, mask)
        with fn.claimed(item.signature, label) as ours:
            if not ours or fn.leased_elsewhere(item.signature, label):
                return WarmResult(item, "deferred", "another process is building it"), ()
            return _kernel_task(item, fn, mask)
    except Exception as exc:  # reported per item; the run goes on
        return _failed(item, exc), ()


def _failed(item: WarmItem, exc: Exception) -> WarmResult:
    """``item`` failed with ``exc``: said in one line (``_failure``), and whole in the log."""
    _log.info("%s failed: %s: %s", item.label, type(exc).__name__, exc)
    return WarmResult(item, "failed", _failure(exc))


def _failure(exc: Exception) -> str:
    """Why a build failed, in one line: Slang's first error where Slang refused the sources
    (its file, line and column, and message), else the exception's first line."""
    from ..compile import SlangCompileError

    if isinstance(exc, SlangCompileError):
        return f"{type(exc).__name__}: {exc.first_error}"
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _kernel_task(
    item: WarmItem, fn: BuildFunction, mask: str | None
) -> tuple[WarmResult, tuple[str, ...]]:
    if mask is not None:
        return WarmResult(item, fn.warm(item.signature, [mask])), ()
    status = fn.warm(item.signature, [])
    masks = item.masks
    if masks is None:
        masks = fn.plan_for_signature(item.signature).backward_masks
    return WarmResult(item, status), tuple(masks)


def _combined(item: WarmItem, results: list[WarmResult]) -> WarmResult:
    """An item's result from those of its kernels: the first failure, else "built" when any
    kernel was built here, else "cached"."""
    failed = [r for r in results if r.status == "failed"]
    if failed:
        return failed[0]
    return WarmResult(item, "built" if any(r.status == "built" for r in results) else "cached")


def _executor(jobs: int, device: str | None) -> futures.Executor:
    if jobs <= 1:
        # One worker thread of this process: tasks run in the order they are queued.
        return futures.ThreadPoolExecutor(max_workers=1)
    return warm_pool.start(jobs, device)


def warm(
    items: Sequence[WarmItem],
    *,
    device: str | None = None,
    cache_dir: str | None = None,
    jobs: int = 1,
    dry_run: bool = False,
    progress: Callable[[WarmResult], None] = lambda _: None,
    pool: futures.Executor | None = None,
    stall_s: float | None = None,
) -> list[WarmResult]:
    """Build every item into the cache (``jobs`` workers, or those of ``pool``, which
    ``warm_pool.start`` made); results in item order.

    Worker processes that all go ``stall_s`` seconds without using the CPU (default: the
    compile lease bound, ``SLANGSPEC_CACHE_LEASE``, and a minute more) are stuck: they are
    killed, and every kernel still outstanding fails, so that the run ends.

    Work is scheduled kernel by kernel: every item's forward kernel first (it resolves the
    plan the backward kernels need), then each backward kernel as its forward lands, so that
    workers stay busy to the end. A kernel that another machine sharing the remote tier is
    building is taken up again after the rest, by when it is most likely there to be fetched.

    Returns without waiting for the worker processes to exit (``warm_pool.released``).
    """
    with warm_pool.released(pool if pool is not None else _executor(jobs, device)) as pool:
        # Chosen once, here: workers told their device kind never import torch to choose it.
        device = device_kind(setting("SLANGSPEC_DEVICE", device, "device"))
        if dry_run:
            checks = [pool.submit(check_one, item, device, cache_dir) for item in items]
            results = [f.result() for f in checks]
            for r in results:
                progress(r)
            return results
        kernels: dict[int, list[WarmResult]] = {i: [] for i in range(len(items))}
        done: dict[int, WarmResult] = {}
        pending = {
            pool.submit(warm_task, item, None, device, cache_dir, True): (i, None)
            for i, item in enumerate(items)
        }
        watch = warm_pool.stall_watch(pool, lease_seconds() + 60 if stall_s is None else stall_s)

        def stop(why: str) -> None:
            """Every kernel still outstanding fails, with ``why``."""
            for i, _ in pending.values():
                kernels[i].append(WarmResult(items[i], "failed", why))
            for i in sorted({i for i, _ in pending.values()}):
                done[i] = _combined(items[i], kernels[i])
                progress(done[i])

        poll = None if watch is None else min(1.0, watch.bound)
        while pending:
            ready, _ = futures.wait(pending, timeout=poll, return_when=futures.FIRST_COMPLETED)
            if watch is not None and not ready:
                if watch.stuck():
                    watch.pool.kill_workers()
                    stop(f"no worker used the CPU for {watch.bound:g} s: stuck, so stopped")
                    break
                continue
            if watch is not None:
                watch.progressed()
            errors = (f.exception() for f in ready)
            broken = [e for e in errors if isinstance(e, futures.BrokenExecutor)]
            if broken:
                stop(f"a worker process ended abruptly ({broken[0]})")
                break
            # Deferred kernels last: queued behind the tasks the other results add.
            for f in sorted(ready, key=lambda f: f.result()[0].status == "deferred"):
                i, mask = pending.pop(f)
                result, masks = f.result()
                if result.status == "deferred":
                    # Queued behind every task not yet started: taken up after the rest.
                    task = pool.submit(warm_task, items[i], mask, device, cache_dir, False)
                    pending[task] = (i, mask)
                    continue
                kernels[i].append(result)
                for mask in masks:
                    task = pool.submit(warm_task, items[i], mask, device, cache_dir, True)
                    pending[task] = (i, mask)
                if all(j != i for j, _ in pending.values()):
                    done[i] = _combined(items[i], kernels[i])
                    progress(done[i])
    return [done[i] for i in range(len(items))]
