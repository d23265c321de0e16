"""Building CUDA kernels: a module reflected and its kernels built through Slang's C API and
NVRTC (no slangpy device), or by the user's compile server where one answers; kept as cubins
with their parameter layouts, and loaded into torch's context through the driver."""

from __future__ import annotations

import base64
import binascii
import logging
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..cache_store import CacheWarning, Entry, ModuleCacheGuard, ModuleSeals, binary_dropped
from ..codegen import ENTRY_POINT
from ..codegen.uniforms import Unpackable
from ..settings import compile_counts, setting
from ..signatures.module_text import ModuleText
from ..specializer import FunctionInfo
from .backend import Apart, Kernel, SlangBackend, Sources
from .cuda_api import CudaDriverError, make_current, primary_context
from .cuda_driver import CachedBinary, DriverKernel, Unloaded
from .devices import cuda_arch, cuda_ordinal, cuda_torch_device

if TYPE_CHECKING:
    import torch

    from ..compile import BuiltKernel, FrontEnd, KernelSource, Prepared
    from .launch import CudaBinding

_log = logging.getLogger(__name__)


class CudaBackend(SlangBackend):
    """A module's CUDA build, for the GPU torch uses or, where ``SLANGSPEC_CUDA_ARCH`` is set,
    for that architecture without running anything."""

    reflects_once = True
    joins_backward = True

    def __init__(self, module: Sources) -> None:
        super().__init__(module)
        self.cuda_ordinal = 0
        self.context = 0
        """torch's CUDA context, which kernels are loaded into and launched in; none (0) where
        ``SLANGSPEC_CUDA_ARCH`` asks for kernels built for an architecture, not run."""
        self.builds_only = setting("SLANGSPEC_CUDA_ARCH") is not None
        if not self.builds_only:
            self.cuda_ordinal = cuda_ordinal()
            self.context = primary_context(self.cuda_ordinal)
        self._identity: dict[str, str] | None = None

    def identity(self) -> dict[str, str]:
        """The architecture kernels are built for (``cuda_arch``), which is all a cubin depends
        on of the GPU: kernels built for ``sm_90`` on a machine without a GPU key as an H200
        process's do."""
        if self._identity is None:
            arch = cuda_arch(self.cuda_ordinal, setting("SLANGSPEC_CUDA_ARCH"))
            self._identity = {"kind": "cuda", "arch": arch}
        return self._identity

    def torch_device(self) -> torch.device:
        return cuda_torch_device()

    @property
    def arch(self) -> str:
        """The GPU architecture kernels are built for (``sm_90``): ``SLANGSPEC_CUDA_ARCH``
        where set, else the device's, as the driver reports it."""
        return self.identity()["arch"]

    def binding(self, torch_device: torch.device) -> CudaBinding:
        from .launch import CudaBinding

        return CudaBinding(torch_device, self.context)

    def prepared(self) -> Prepared | None:
        """The files ``specialize prepare`` made for this toolchain, which builds read instead
        of making them; None when none were."""
        from ..compile import DEFAULT_ROOT, prepared

        root = setting("SLANGSPEC_PREPARED_DIR")
        return prepared(Path(root) if root else DEFAULT_ROOT, self.module.toolchain)

    def holds(self, entry: Entry, label: str) -> bool:
        """Whether ``entry`` holds kernel ``label``'s cubin intact (as a farther tier's entry
        is, whole, when it is read)."""
        binary = entry.binaries.get(label)
        if entry.far:
            return binary is not None
        return binary is not None and self.module.cache.read_blob(binary["file"]) is not None

    def _front_end(self, apart: Apart | None) -> FrontEnd:
        from ..compile import front_end

        guard, paths, text, _ = self._places(apart)
        self._start_nvrtc(guard)  # while Slang works: a build follows
        library = self._library(guard, text)
        compile_counts["front_end"] += 1
        start = time.perf_counter()
        module = front_end(text, paths, self.module.defines, None, library, self.module.content)
        _log.info("Slang front-end of module %s: %.3f s", text.name, time.perf_counter() - start)
        return module

    def _places(self, apart: Apart | None) -> tuple[ModuleCacheGuard, list[Path], ModuleText, Path]:
        """The module cache, include paths, module text and kernel directory of a build: the
        cache's, or ``apart`` from it (a private module cache, kept by nothing)."""
        m = self.module
        if apart is None:
            return self.module_guard, m.include_paths, m.text, m.cache.files.kernel_dir
        private, paths, text = apart
        return ModuleCacheGuard(ModuleSeals(private / "slang"), None, ""), paths, text, private

    def _start_nvrtc(self, guard: ModuleCacheGuard) -> None:
        """Start NVRTC on a thread of its own, precompiling the CUDA prelude ``guard``'s module
        cache kept from an earlier build if it has one."""
        from ..compile import prelude_path, stored_prelude, warm_up

        path = prelude_path(guard, self.module.toolchain)
        warm_up(self.arch, stored_prelude(path, self.prepared()))

    def _library(self, guard: ModuleCacheGuard, text: ModuleText) -> Path | None:
        """slangpy's Slang library as IR in ``guard``'s module cache, for a module that imports
        it; None for one that does not."""
        from ..compile import LIBRARY, library_dir
        from ..signatures.preimage import imported_names

        if LIBRARY not in imported_names(text.text):
            return None
        m = self.module
        return library_dir(guard, m.toolchain, m.defines, self.prepared())

    def forget_session(self) -> None:
        from ..compile import forget, global_session

        global_session().run(forget, self.module.text, self.module.content)

    def compiled(self, sources: dict[str, str], apart: Apart | None = None) -> dict[str, Kernel]:
        """Build the kernels ``sources`` holds (by name) for the GPU's architecture in one
        compile (Slang's C API, then NVRTC: no slangpy device), loaded into torch's context."""
        from ..compile import KernelSource, build, prelude_path

        m = self.module
        guard, paths, text, kernel_dir = self._places(apart)
        library = self._library(guard, text)
        kernels = [KernelSource(n, src, kernel_dir / f"{n}.slang") for n, src in sources.items()]
        prelude = prelude_path(guard, m.toolchain)
        built = None if apart else self._served_build(text, kernels, paths, library)
        if built is None:
            self._start_nvrtc(guard)
            built = build(text, kernels, paths, m.defines, self.arch, library, m.content, prelude)
        if not apart:
            m.cache.files.note_module_cache()
        return {name: self._launchable(b) for name, b in built.items()}

    def _ask_server(
        self,
        op: Literal["describe", "build"],
        text: ModuleText,
        paths: list[Path],
        library: Path | None,
        **asked: Any,
    ) -> dict[str, Any] | None:
        """What the user's compile server answers to ``op`` on the module (``server_client.ask``);
        None where this process compiles itself. A cache that writes nothing never asks: the
        server keeps what it writes under the cache root."""
        from ..compile import ModuleSource, Request, identity, server_client

        m = self.module
        if m.cache.read_only:
            return None
        module = ModuleSource(
            text.name,
            str(text.path.absolute()),
            text.text,
            tuple(str(p.absolute()) for p in paths),
            dict(m.defines),
            library is not None,
            m.content,
        )
        request = Request(op, identity(m.toolchain), module, **asked)
        return server_client.ask(m.cache.root, request, self.arch)

    def described(self, function: str) -> tuple[FunctionInfo, ...] | None:
        """Each overload of ``function`` as the user's compile server reflects it; None when
        this process reflects it itself (``server_client.ask``); the server's
        ``SlangCompileError`` where it is the user's (``_users_error``)."""
        from ..compile import SlangCompileError

        guard, paths, text, _ = self._places(None)
        library = self._library(guard, text)
        self._module_written()
        try:
            reply = self._ask_server("describe", text, paths, library, function=function)
        except SlangCompileError as exc:
            refused = self._users_error(exc)
            if refused is None:
                return None
            raise refused from None
        if reply is None:
            return None
        try:
            overloads = reply["overloads"]
            found = () if overloads is False else tuple(map(FunctionInfo.from_json, overloads))
        except (TypeError, KeyError, ValueError):
            return None
        compile_counts["served"] += 1
        return found

    def _served_build(
        self, text: ModuleText, kernels: list[KernelSource], paths: list[Path], library: Path | None
    ) -> dict[str, BuiltKernel] | None:
        """``kernels`` built by the user's compile server; None when this process builds them
        itself (``server_client.ask``); the server's ``SlangCompileError`` where it is the
        user's (``_users_error``)."""
        from ..compile import (
            BuiltKernel,
            KernelText,
            SlangCompileError,
            cubin_problem,
            server_client,
        )

        texts = tuple(KernelText(k.name, k.source) for k in kernels)
        arch = self.arch
        try:
            reply = self._ask_server("build", text, paths, library, kernels=texts, arch=arch)
        except SlangCompileError as exc:
            if self._users_error(exc) is None:
                return None
            raise  # named where the build fails (``_retried``)
        if reply is None:
            return None
        try:
            built = {
                k.name: BuiltKernel(
                    base64.b64decode(b["cubin"], validate=True), b["entry"], b["layout"], b["group"]
                )
                for k in kernels
                for b in (reply["kernels"][k.name],)
            }
        except (TypeError, KeyError, ValueError, binascii.Error):
            return None
        for name, b in built.items():
            problem = cubin_problem(b.cubin, self.arch, b.entry)
            if problem is not None:
                server_client.give_up(
                    self.module.cache.root, f"its cubin of {name} is refused: {problem}"
                )
                return None
        compile_counts["served"] += len(built)
        return built

    def _launchable(self, built: BuiltKernel) -> DriverKernel | Unloaded:
        """The kernel loaded into torch's context; only kept where this process builds for
        an architecture and runs nothing (``SLANGSPEC_CUDA_ARCH``)."""
        binary = CachedBinary(built.cubin, built.layout, built.group, built.entry)
        if self.builds_only:
            return Unloaded(binary)
        make_current(self.context)
        return DriverKernel.from_binary(binary)

    def binary(self, kernel: Kernel) -> dict[str, Any] | None:
        """The kernel's cubin, written, as its entry lists it."""
        if not isinstance(kernel, (DriverKernel, Unloaded)):
            return None
        built = kernel.binary
        return {
            "file": self.module.cache.write_blob("binary", built.cubin),
            "layout": built.layout,
            "group": built.group,
            "entry": built.entry,
        }

    def load(self, key: str, label: str, entry: Entry) -> DriverKernel | Unloaded | None:
        """The kernel from its cached cubin (not loaded where this process runs nothing);
        None where the entry has none, or (the binary dropped, with a warning) when the file
        is missing or damaged or the driver refuses it."""
        if label not in entry.binaries:
            return None
        cache = self.module.cache
        binary = entry.binaries[label]
        data = cache.read_blob(binary["file"])
        why = "missing or damaged"
        if data is None and not cache.names(key, binary["file"]):
            return None  # evicted by another process since this one read the entry
        if data is not None:
            try:
                point = binary.get("entry", ENTRY_POINT)
                cached = CachedBinary(data, binary["layout"], binary["group"], point)
                if self.builds_only:
                    return Unloaded(cached)  # kept already, and this process runs nothing
                # Backward runs on torch's autograd thread, which may have no current context.
                make_current(self.context)
                return DriverKernel.from_binary(cached)
            except (CudaDriverError, Unpackable, KeyError, TypeError, ValueError) as exc:
                why = f"unusable ({exc})"
        warnings.warn(
            f"slangspec cached binary {binary['file']} ({label}) is {why}; recompiling",
            CacheWarning,
            stacklevel=3,
        )
        cache.amend(key, binary_dropped(label))
        return None
