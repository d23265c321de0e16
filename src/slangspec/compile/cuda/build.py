"""A generated kernel -> a cubin for one GPU architecture, with the name of its ``__global__``
function, its parameter layout and its threads per group: Slang's C API (``cuda_source``), then
NVRTC (``nvrtc``), with no slangpy device and no GPU.

slangpy's Slang library is read as IR that ``library_dir`` puts once per module cache, toolchain
and defines in the module cache beside slangpy's own compiled modules (copied from the files
``prepared`` made at install, else compiled), so that the module cache's seals, size, sharing
and eviction cover it: a damaged copy is removed before a compile reads it, and made again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ...cache_store import canonical, write_atomic
from ...codegen.uniforms import Layout
from ...define import frozen
from ...errors import Error
from ...settings import compile_counts
from ...signatures.module_text import ModuleText
from .cubin import kernel_registers
from .nvrtc import nvrtc
from .prepared import PRELUDE_FILE, Prepared
from .registers import REGISTER_BUDGET, bounded, over_budget
from .source import (
    LIBRARY_FILE,
    CudaSource,
    KernelSource,
    cuda_source,
    slangpy_library,
    split_prelude,
)

_log = logging.getLogger(__name__)


class KernelNotLaunchable(Error, RuntimeError):
    """A kernel whose parameters are not plain bytes, which the driver cannot be handed."""


class Guard(Protocol):
    """What keeps a module cache whole (``cache_store.module_cache.ModuleCacheGuard``)."""

    @property
    def root(self) -> Path: ...

    def check(self) -> None: ...

    def seal(self) -> None: ...


@frozen
class BuiltKernel:
    """A kernel compiled for one architecture: the cubin, its entry point's function name, its
    parameter block's layout and its threads per group."""

    cubin: bytes
    entry: str
    layout: Layout
    group: int


def _directory(guard: Guard, what: Mapping[str, Any]) -> Path:
    """The directory of ``guard``'s module cache for files made as ``what`` says, laid out as
    slangpy lays out a session's compiled modules (a 40-digit directory, then ``0``)."""
    return guard.root / hashlib.sha1(canonical(what)).hexdigest() / "0"


def library_dir(
    guard: Guard,
    toolchain: Mapping[str, Any],
    defines: Mapping[str, str],
    prepared: Prepared | None = None,
) -> Path:
    """The directory in ``guard``'s module cache holding slangpy's Slang library compiled for
    ``cuda_source`` with ``defines`` under ``toolchain``, put there and sealed when missing or
    damaged: copied from ``prepared`` (``toolchain``'s prepared files) where it holds it for
    no defines, else compiled."""
    what = {"cuda_source": LIBRARY_FILE, "toolchain": dict(toolchain), "defines": dict(defines)}
    directory = _directory(guard, what)
    guard.check()
    if not (directory / LIBRARY_FILE).is_file():
        start = time.perf_counter()
        data = prepared.read(LIBRARY_FILE) if prepared is not None and not defines else None
        made = "copied from the prepared one" if data is not None else "compiled"
        if data is None:
            compile_counts["library"] += 1
            data = slangpy_library(defines)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(directory / LIBRARY_FILE, data)
        guard.seal()
        _log.info(
            "slangpy's Slang library as IR for CUDA, %s: %.3f s", made, time.perf_counter() - start
        )
    return directory


def prelude_path(guard: Guard, toolchain: Mapping[str, Any]) -> Path:
    """Where ``guard``'s module cache keeps the CUDA prelude Slang writes under ``toolchain``
    (``build`` keeps it there, for a later process's NVRTC to precompile while Slang works)."""
    what = {"cuda_prelude": PRELUDE_FILE, "toolchain": dict(toolchain)}
    return _directory(guard, what) / PRELUDE_FILE


def stored_prelude(path: Path, prepared: Prepared | None = None) -> str | None:
    """The prelude kept at ``path``, else the one ``prepared`` holds; None when there is none.
    A damaged one does no harm: a compile uses the precompiled prelude only for a source that
    begins with its very text."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        pass
    data = prepared.read(PRELUDE_FILE) if prepared is not None else None
    try:
        return data.decode() if data is not None else None
    except UnicodeDecodeError:
        return None


def _keep_prelude(path: Path, source: str) -> None:
    with contextlib.suppress(ValueError, OSError):
        prelude = split_prelude(source)[0]
        if stored_prelude(path) != prelude:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(path, prelude.encode())


def build(
    module: ModuleText,
    kernels: Sequence[KernelSource],
    include_paths: Sequence[Path],
    defines: Mapping[str, str],
    arch: str,
    library: Path | None,
    content: str = "",
    prelude: Path | None = None,
) -> dict[str, BuiltKernel]:
    """``kernels`` (which import ``module``) compiled together for ``arch`` (``sm_90``): one
    CUDA source, one NVRTC run, one cubin holding each kernel as an entry point named after
    it; by kernel name. ``library`` is as ``library_dir`` gives it, or None for a module that
    does not import slangpy; ``content`` identifies the files the module imports
    (``cuda_source``); Slang's CUDA prelude is kept at ``prelude`` when given."""
    compile_counts["kernel"] += len(kernels)
    start = time.perf_counter()
    source = cuda_source(module, kernels, include_paths, defines, None, library, content)
    written = time.perf_counter()
    if prelude is not None:
        _keep_prelude(prelude, source.text)
    cubin = cubin_of(source, arch, f"{kernels[0].name}.cu")
    _log.info(
        "CUDA build of %s for %s: Slang %.3f s, NVRTC %.3f s",
        ", ".join(k.name for k in kernels),
        arch,
        written - start,
        time.perf_counter() - written,
    )
    built = {}
    for kernel in kernels:
        entry = source.entries[kernel.name]
        if entry.layout is None:
            raise KernelNotLaunchable(
                f"kernel {kernel.name}: its parameters are not plain data; cannot launch directly"
            )
        built[kernel.name] = BuiltKernel(cubin, entry.name, entry.layout, entry.group)
    return built


def cubin_of(source: CudaSource, arch: str, name: str) -> bytes:
    """NVRTC's cubin of ``source``, built again with launch bounds on the kernels that take
    more registers than ``registers.REGISTER_BUDGET``."""
    cubin = nvrtc().compile(source.text, arch, source.half, name=name)
    groups = {entry.name: entry.group for entry in source.entries.values()}
    try:
        heavy = over_budget(kernel_registers(cubin), groups)
    except ValueError:
        return cubin  # NVRTC's own attributes unreadable: the kernels as ptxas gave them
    text = bounded(source.text, heavy) if heavy else None
    if text is None:
        return cubin
    _log.info(
        "%s: over %d registers a thread, built again under launch bounds",
        ", ".join(heavy),
        REGISTER_BUDGET,
    )
    return nvrtc().compile(text, arch, source.half, name=name)
