"""A CUDA specialization's kernels built through ``compile`` (Slang's C API, then NVRTC), with no
slangpy device and no GPU: the kernels of one build become one CUDA source and one cubin for one
GPU architecture, each kernel an entry point of its own named after it.

slangpy's Slang library is read as IR that ``library_dir`` compiles once per module cache,
toolchain and defines, and keeps in the module cache beside slangpy's own compiled modules,
sealed as they are: a damaged file is removed before a compile reads it, and built again.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..cache_store.keys import canonical
from ..cache_store.location import write_atomic
from ..compile.cuda_source import LIBRARY_FILE, Kernel, cuda_source, slangpy_library
from ..compile.nvrtc import nvrtc
from ..counts import compile_counts
from ..cuda_api import CudaDriverError
from ..module_text import ModuleText
from .cuda_driver import CachedBinary

_log = logging.getLogger(__name__)


class Guard(Protocol):
    """What keeps the module cache whole (``cache_store.module_cache.ModuleCacheGuard``)."""

    def check(self) -> None: ...

    def seal(self) -> None: ...


def library_dir(
    module_cache: Path, guard: Guard, toolchain: dict[str, Any], defines: Mapping[str, str]
) -> Path:
    """The directory holding slangpy's Slang library compiled for ``cuda_source`` with
    ``defines`` under ``toolchain``, compiled and sealed here when it is missing or damaged.
    It lies where slangpy keeps a session's compiled modules (a 40-digit directory, then
    ``0``), so the module cache's seals, size and eviction cover it."""
    digest = hashlib.sha1(
        canonical({"cuda_source": LIBRARY_FILE, "toolchain": toolchain, "defines": defines})
    ).hexdigest()
    directory = module_cache / digest / "0"
    guard.check()
    if not (directory / LIBRARY_FILE).is_file():
        start = time.perf_counter()
        data = slangpy_library(defines)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(directory / LIBRARY_FILE, data)
        guard.seal()
        _log.info("slangpy's Slang library as IR for CUDA: %.3f s", time.perf_counter() - start)
    return directory


def build(
    module: ModuleText,
    sources: Mapping[str, str],
    names: Mapping[str, str],
    kernel_dir: Path,
    include_paths: Sequence[Path],
    defines: Mapping[str, str],
    arch: str,
    library: Path | None,
) -> dict[str, CachedBinary]:
    """The kernels ``sources`` (by label; each named by ``names``, which also names its entry
    point) compiled together for ``arch``: one cubin, each label's entry point and layout."""
    kernels = [
        Kernel(names[label], text, kernel_dir / f"{names[label]}.slang")
        for label, text in sources.items()
    ]
    compile_counts["kernel"] += len(kernels)
    start = time.perf_counter()
    source = cuda_source(module, kernels, include_paths, defines, library=library)
    written = time.perf_counter()
    cubin = nvrtc().compile(source.text, arch, source.half)
    _log.info(
        "CUDA build of %d kernels for %s: Slang %.3f s, NVRTC %.3f s",
        len(kernels),
        arch,
        written - start,
        time.perf_counter() - written,
    )
    binaries = {}
    for label in sources:
        entry = source.entries[names[label]]
        if entry.layout is None:
            raise CudaDriverError("kernel parameters are not plain data; cannot launch directly")
        binaries[label] = CachedBinary(cubin, entry.name, entry.layout, entry.group)
    return binaries
