"""Slang source -> slangpy module and compute kernel; owns slangpy sessions per include set.

Sessions keep slangpy's module cache in the directory they are given, so a module compiled once
is loaded as IR by later processes instead of going through the Slang front-end again. On CUDA
each kernel is also captured as the PTX Slang generated for it, for the cache to keep as a
binary.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import slangpy as spy

from .block_layout import uniform_block
from .codegen import ENTRY_POINT
from .counts import compile_counts
from .uniforms import UniformBlock

_log = logging.getLogger(__name__)


class CompiledKernel:
    """A compute kernel, its uniforms' block packer where they are plain bytes, and on CUDA the
    PTX it was built from."""

    def __init__(self, kernel: spy.ComputeKernel, ptx: bytes | None = None) -> None:
        self.kernel = kernel
        self.pipeline = kernel.pipeline
        self.group = self.pipeline.thread_group_size.x
        self.block: UniformBlock | None = uniform_block(kernel)
        self.ptx = ptx


class Compiler:
    """Compiles on one device; one Slang session per (include paths, defines) set.

    ``module_cache`` is where slangpy keeps compiled IR. The PTX of a CUDA build is dumped to a
    directory of its own in the system's temporary directory, out of reach of a ``cache clear``.
    """

    def __init__(self, device: spy.Device, module_cache: Path) -> None:
        self.device = device
        self.module_cache = module_cache
        self._capture = device.info.type == spy.DeviceType.cuda
        self._sessions: dict[tuple, spy.SlangSession] = {}
        self._lock = threading.Lock()

    def session(
        self, include_paths: Sequence[Path], defines: dict[str, str], content: str = ""
    ) -> spy.SlangSession:
        """The session that resolves imports through ``include_paths`` with ``defines`` set.

        ``content`` identifies the Slang sources seen through those paths: a session keeps every
        module it loaded, so edited sources need a session of their own.
        """
        key = (tuple(str(p) for p in include_paths), tuple(sorted(defines.items())), content)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                options = {"include_paths": [*key[0], spy.SHADER_PATH], "defines": dict(defines)}
                # The directory may have been removed since (a cache clear in another process).
                self.module_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
                session = self.device.create_slang_session(
                    compiler_options=options, cache_path=self.module_cache
                )
                self._sessions[key] = session
            return session

    def forget_session(
        self, include_paths: Sequence[Path], defines: dict[str, str], content: str = ""
    ) -> None:
        """Drop a session, so the next build loads every module afresh: a session keeps what it
        loaded, also a module whose files were removed while it read them."""
        key = (tuple(str(p) for p in include_paths), tuple(sorted(defines.items())), content)
        with self._lock:
            self._sessions.pop(key, None)

    def load_module(
        self, name: str, include_paths: Sequence[Path], defines: dict[str, str], content: str
    ) -> spy.SlangModule:
        """Front-end compile of the user's module, for reflection."""
        compile_counts["front_end"] += 1
        self.device.set_cuda_context_current()
        start = time.perf_counter()
        module = self.session(include_paths, defines, content).load_module(name)
        _log.info("Slang front-end of module %s: %.3f s", name, time.perf_counter() - start)
        return module

    def kernel(
        self, name: str, include_paths: Sequence[Path], defines: dict[str, str], content: str
    ) -> CompiledKernel:
        """Compile the generated module ``name`` (found on ``include_paths``) to a kernel."""
        compile_counts["kernel"] += 1
        self.device.set_cuda_context_current()
        session = self.session(include_paths, defines, content)
        if not self._capture:
            program = session.load_program(name, [ENTRY_POINT])
            return CompiledKernel(self.device.create_compute_kernel(program))
        dumps = tempfile.TemporaryDirectory(prefix="slangspec-ptx-", ignore_cleanup_errors=True)
        with dumps as dump:
            options = {"dump_intermediates": True, "dump_intermediates_prefix": f"{dump}/{name}-"}
            program = session.load_program(name, [ENTRY_POINT], link_options=options)
            # Building the pipeline generates the target code, and with it the dump.
            kernel = self.device.create_compute_kernel(program)
            kernel.pipeline  # noqa: B018
            ptx = [p.read_bytes() for p in sorted(Path(dump).glob("*.ptx"))]
        return CompiledKernel(kernel, ptx[-1] if ptx else None)
