"""Slang source -> slangpy module and compute kernel; owns slangpy sessions per include set.

The user's module and the generated kernels reach Slang as the very text the cache keyed, each
at a path that places it for its imports (the module's own directory, the cache's kernel
directory), and never through the include paths. A session's include paths are then only the
user's own and slangpy's library, the same for every module, and so is where slangpy keeps the
compiled IR of that library: compiled once per cache and toolchain, it is loaded as IR by every
later process, for any module in any directory. Vulkan only: CUDA reflects and builds through
``compile``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import slangpy as spy

from ...codegen import ENTRY_POINT
from ...codegen.uniforms import UniformBlock
from ...settings import compile_counts
from ...signatures.module_text import ModuleText
from ...signatures.preimage import imported_names, search_paths, unchanged
from .api import SlangCompileError
from .block_layout import uniform_block
from .twinned import twin_modules

_log = logging.getLogger(__name__)
LIBRARY = "slangpy"


class ModuleCacheGuard(Protocol):
    """What keeps slangpy's module cache whole (and shared): ``check`` before a session reads
    it, ``seal`` after a load succeeded, with what Slang wrote; ``slang_path`` is where Slang
    is told it lies."""

    def check(self) -> None: ...

    def slang_path(self) -> Path: ...

    def seal(self) -> None: ...


@dataclass
class _Session:
    slang: spy.SlangSession
    modules: dict[str, spy.SlangModule] = field(default_factory=dict)


class CompiledKernel:
    """A compute kernel and its uniforms' block packer where they are plain bytes."""

    def __init__(self, kernel: spy.ComputeKernel) -> None:
        self.kernel = kernel
        self.pipeline = kernel.pipeline
        self.group = self.pipeline.thread_group_size.x
        self.block: UniformBlock | None = uniform_block(kernel)


class SlangpyFrontEnd:
    """A user's module as slangpy's session loaded it, with the face reflection reads
    (``compile.FrontEnd``'s): its layout and declarations, and ``load_source`` for a module
    beside it."""

    def __init__(self, module: spy.SlangModule, beside: Callable[[str, str], None]) -> None:
        self.module = module
        self._beside = beside

    @property
    def layout(self) -> spy.ProgramLayout:
        return self.module.layout

    @property
    def module_decl(self) -> spy.DeclReflection:
        return self.module.module_decl

    def load_source(self, name: str, text: str) -> bool:
        """Load module ``name`` from ``text`` into the session that loaded this one; whether
        Slang took it."""
        try:
            self._beside(name, text)
        except SlangCompileError:
            return False
        return True


class Compiler:
    """Compiles on one device; one Slang session per (include paths, defines, content) set.

    ``module_cache`` is where slangpy keeps compiled IR, kept (and placed for Slang) by
    ``guard`` when given;
    ``kernel_dir`` is where generated kernels are stored, and where Slang is told they lie.
    """

    def __init__(
        self,
        device: spy.Device,
        module_cache: Path,
        kernel_dir: Path,
        guard: ModuleCacheGuard | None = None,
    ) -> None:
        self.device = device
        self.module_cache = module_cache
        self.kernel_dir = kernel_dir
        self.guard = guard
        self._sessions: dict[tuple, _Session] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(include_paths: Sequence[Path], defines: dict[str, str], content: str) -> tuple:
        return (tuple(str(p) for p in include_paths), tuple(sorted(defines.items())), content)

    def _session(
        self, include_paths: Sequence[Path], defines: dict[str, str], content: str
    ) -> _Session:
        """The session that resolves imports through ``include_paths`` with ``defines`` set.

        ``content`` identifies the Slang sources the module is built from: a session keeps
        every module it loaded, so edited sources need a session of their own.
        """
        key = self._key(include_paths, defines, content)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                options = {"include_paths": [*key[0], spy.SHADER_PATH], "defines": dict(defines)}
                # The directory may have been removed since (a cache clear in another process).
                self.module_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
                cache_path = self.module_cache
                if self.guard is not None:
                    self.guard.check()
                    cache_path = self.guard.slang_path()
                slang = self.device.create_slang_session(
                    compiler_options=options, cache_path=cache_path
                )
                session = self._sessions[key] = _Session(slang)
            return session

    def forget_session(
        self,
        module: ModuleText,
        include_paths: Sequence[Path],
        defines: dict[str, str],
        content: str,
    ) -> None:
        """Drop ``module``'s session, so the next build loads every module afresh: a session
        keeps what it loaded, also a module whose files were removed while it read them."""
        paths, _ = search_paths(module, include_paths)
        with self._lock:
            self._sessions.pop(self._key(paths, defines, content), None)

    def front_end(
        self,
        module: ModuleText,
        include_paths: Sequence[Path],
        defines: dict[str, str],
        content: str,
    ) -> SlangpyFrontEnd:
        """The user's module through the Slang front-end, once per session, as reflection reads
        it, with that session to load modules beside it."""
        self.device.set_cuda_context_current()
        paths, from_file = search_paths(module, include_paths)
        session = self._session(paths, defines, content)
        loaded = self._loaded(session, module, from_file)
        return SlangpyFrontEnd(loaded, lambda name, text: self._beside(session, module, name, text))

    def _beside(self, session: _Session, module: ModuleText, name: str, text: str) -> None:
        """Load module ``name`` of ``text`` (a twin's module, which imports ``module``) into
        ``session``, once, at a path beside ``module``'s."""
        if name in session.modules:
            return
        path = str(module.path.with_name(f"{name}.slang"))
        try:
            session.modules[name] = session.slang.load_module_from_source(name, text, path)
        except spy.SlangCompileError as exc:
            raise SlangCompileError(str(exc)) from None

    def _loaded(
        self, session: _Session, module: ModuleText, from_file: bool = False
    ) -> spy.SlangModule:
        loaded = session.modules.get(module.name)
        if loaded is not None:
            return loaded
        if LIBRARY in imported_names(module.text):
            self._library(session)
        compile_counts["front_end"] += 1
        start = time.perf_counter()
        module.path.parent.mkdir(parents=True, exist_ok=True)
        # slangpy sets a line of its own before a module given as source: without the
        # directive, every line a diagnostic names would be one too far.
        text = "#line 1\n" + module.text
        try:
            if from_file:
                loaded = session.slang.load_module(module.name)
                unchanged(module)
            else:
                loaded = session.slang.load_module_from_source(module.name, text, str(module.path))
        except spy.SlangCompileError as exc:
            # Its text is slangpy's error's, whole: chained, a traceback would show it twice.
            raise SlangCompileError(str(exc)) from None
        _log.info("Slang front-end of module %s: %.3f s", module.name, time.perf_counter() - start)
        session.modules[module.name] = loaded
        self._sealed()
        return loaded

    def _library(self, session: _Session) -> None:
        """slangpy's Slang library, loaded on its own so that its time is its own: compiled IR
        from the module cache, or the front-end the first time a cache meets this toolchain."""
        if LIBRARY in session.modules:
            return
        start = time.perf_counter()
        session.modules[LIBRARY] = session.slang.load_module(LIBRARY)
        _log.info("slangpy's Slang library: %.3f s", time.perf_counter() - start)

    def _sealed(self) -> None:
        """Seal what Slang wrote to the module cache for loads that succeeded."""
        if self.guard is not None:
            self.guard.seal()

    def kernel(
        self,
        name: str,
        source: str,
        module: ModuleText,
        include_paths: Sequence[Path],
        defines: dict[str, str],
        content: str,
    ) -> CompiledKernel:
        """Compile the generated kernel ``name`` (of ``source``, which imports ``module``)."""
        self.device.set_cuda_context_current()
        paths, from_file = search_paths(module, include_paths)
        session = self._session(paths, defines, content)
        self._loaded(session, module, from_file)
        compile_counts["kernel"] += 1
        slang = session.slang
        for twin, text in twin_modules(module, [source]).items():
            self._beside(session, module, twin, text)
        self.kernel_dir.mkdir(parents=True, exist_ok=True)
        generated = slang.load_module_from_source(
            name, source, str(self.kernel_dir / f"{name}.slang")
        )
        entry = [generated.entry_point(ENTRY_POINT)]
        # slangpy may write a loaded module's IR after its load returned (seen: while the next
        # load runs), so what the module's load could not seal yet is sealed here.
        self._sealed()
        program = slang.link_program([generated], entry)
        return CompiledKernel(self.device.create_compute_kernel(program))
