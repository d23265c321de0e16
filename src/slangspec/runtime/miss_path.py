"""The miss path of a module's specializations, as one unit: lookup -> lease -> specialize ->
codegen -> compile -> keep binary -> record.

Every step says how it was served: "cached" (read from the cache), "built" (built by this
process) or "taken" (built by another process while this one waited on the lease).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar

from ..cache import Cache
from ..cache_store import (
    FORWARD,
    CacheWarning,
    Entry,
    ModuleCacheGuard,
    ModuleSeals,
    ShaderSnapshots,
    binary_added,
    binary_dropped,
    kernel_added,
    kernel_lease,
    key_of,
    source_name,
)
from ..codegen import ENTRY_POINT, kernel_source
from ..counts import compile_counts
from ..cuda_api import CudaDriverError, make_current
from ..devices import DeviceUnavailableError
from ..frozen import frozen
from ..module_text import ModuleText
from ..specializer import FunctionInfo, SpecializationPlan, device_problem, plan_from_signature
from ..uniforms import Unpackable
from .cuda_driver import CachedBinary, DriverKernel

if TYPE_CHECKING:
    import slangpy as spy

    from ..compile.cuda_build import BuiltKernel
    from ..compile.cuda_source import Kernel as KernelSource
    from ..compile.reflection import FrontEnd
    from ..compile.slang_api import SlangCompileError
    from ..compile.vulkan_compiler import CompiledKernel, Compiler

_log = logging.getLogger(__name__)
Outcome = Literal["cached", "built", "taken"]
RETRIES = 2
T = TypeVar("T")
Kernel: TypeAlias = "CompiledKernel | DriverKernel | Unloaded"
Apart: TypeAlias = "tuple[Path, list[Path], ModuleText]"


@frozen
class Unloaded:
    """A CUDA kernel built and kept, not loaded: what a process that builds for an
    architecture (``SLANGSPEC_CUDA_ARCH``) holds of it."""

    binary: CachedBinary


class SlangUnavailableError(DeviceUnavailableError):
    """Something the cache lacks must be built or reflected, and slangpy cannot be brought up
    to do it."""


@contextlib.contextmanager
def needing_slang(what: str) -> Iterator[None]:
    """Within the block, a failure to import slangpy, open its device or find and load the
    Slang library its install carries says that ``what`` was not in the cache."""
    try:
        yield
    except SlangUnavailableError:
        raise
    except DeviceUnavailableError as exc:
        raise SlangUnavailableError(f"{what} is not in the cache and needs slangpy: {exc}") from exc
    except ImportError as exc:
        raise SlangUnavailableError(
            f"{what} is not in the cache and needs slangpy, which cannot be imported ({exc})"
        ) from exc
    except RuntimeError as exc:
        if not _slang_library_error(exc):
            raise
        raise SlangUnavailableError(
            f"{what} is not in the cache and needs slangpy's Slang library, which cannot be "
            f"used ({exc})"
        ) from exc


def _slang_library_error(exc: RuntimeError) -> bool:
    """Whether ``exc`` says that Slang's library cannot be found or loaded."""
    # Imported here: only a process that builds through Slang's C API has it, and raises it.
    from ..compile.slang_api import SlangLibraryError

    return isinstance(exc, SlangLibraryError)


@frozen
class Found:
    """A specialization as the cache holds it once looked up or built: its key and preimage,
    its entry as last read, its plan, and the forward kernel when this lookup built it."""

    key: str
    preimage: dict[str, Any]
    entry: Entry
    plan: SpecializationPlan
    forward: Kernel | None
    outcome: Outcome


class Buildable(Protocol):
    """What the miss path needs of a module (``module_base.BuildModule`` is one)."""

    name: str
    source: str | None
    defines: dict[str, str]
    include_paths: list[Path]
    text: ModuleText
    content: str
    """A hash of the module's sources, for Slang's session."""
    device_kind: str
    context: int
    cache: Cache
    shaders: ShaderSnapshots

    @property
    def device(self) -> spy.Device: ...

    @property
    def compiler(self) -> Compiler: ...

    @property
    def module_guard(self) -> ModuleCacheGuard: ...

    @property
    def arch(self) -> str: ...

    builds_only: bool

    toolchain: dict[str, Any]

    def function_overloads(self, name: str) -> tuple[FunctionInfo, ...]: ...

    def preimage(self, function: str, signature: str) -> dict[str, Any]: ...

    def record(self, function: str, signature: str) -> dict[str, Any]: ...


class Builder:
    """Looks up, and on a miss builds, one module's specializations and their kernels."""

    def __init__(self, module: Buildable) -> None:
        self.module = module
        self.cache = module.cache
        self._fresh: dict[tuple[str, str], Kernel] = {}
        """Kernels built with a forward kernel, by (key, label), until the call asks for them."""

    def specialization(self, function: str, signature: str, backward: bool = True) -> Found:
        """The entry and plan of ``function`` for ``signature``, built here on a miss (on
        CUDA with the backward of every tensor that requires grad, unless ``backward`` is
        False: a warm task for the forward kernel alone, whose backward kernels are tasks of
        their own)."""
        pre = self.module.preimage(function, signature)
        key = key_of(pre)
        entry = self.cache.serve(key, pre)
        outcome: Outcome = "cached"
        if entry is None:
            with self.cache.leases.hold(key, lambda: self.cache.serve(key, pre) is not None):
                entry = self.cache.serve(key, pre)
                if entry is None:
                    what = f"{signature}: its forward kernel"
                    with needing_slang(what):
                        return self._build(function, signature, key, pre, backward)
                outcome = "taken"
                _log.info("%s: built by another process while this one waited", signature)
        try:
            plan = SpecializationPlan.from_json(entry.plan_json)
        except (ValueError, TypeError, KeyError) as exc:
            # Only a tier that cannot prove its entries (a remote one without a secret) hands
            # out such a row: built here, it is replaced there too.
            warnings.warn(
                f"slangspec cache entry {key[:12]}: its plan does not decode ({exc}); rebuilding",
                CacheWarning,
                stacklevel=3,
            )
            with self.cache.leases.hold(key, lambda: False), needing_slang(signature):
                return self._build(function, signature, key, pre, backward)
        self.cache.touch(key)
        if outcome == "cached":
            _log.debug("hit %s (key %s)", signature, key[:12])
        return Found(key, pre, entry, plan, None, outcome)

    def _build(
        self, function: str, signature: str, key: str, pre: dict[str, Any], backward: bool
    ) -> Found:
        """Resolve, generate and compile the forward kernel of a missed specialization."""
        m = self.module
        self.cache.count_miss()
        _log.info("miss %s (key %s): building it", signature, key[:12])
        start = time.perf_counter()
        compile_counts["specialize"] += 1
        overloads = m.function_overloads(function)
        described = time.perf_counter()
        plan = plan_from_signature(overloads, signature)
        refused = device_problem(plan, m.device_kind)
        if refused is not None:
            raise TypeError(refused)
        resolved = time.perf_counter()
        labels = [FORWARD]
        if m.device_kind == "cuda" and backward and plan.backward_masks:
            # The call's tensors require grad: its backward (all of them, the last mask) is
            # built with its forward, one Slang link and one NVRTC run for both.
            labels.append(plan.backward_masks[-1])
        sources = {label: kernel_source(plan, label) for label in labels}
        generated = time.perf_counter()
        built = self._compile(sources)
        done = time.perf_counter()
        also = "" if len(labels) == 1 else f", with its backward kernel for grads {labels[1]}"
        _log.info(
            "built %s: forward kernel in %.3f s%s (function description %.3f s, resolution "
            "%.4f s, code generation %.4f s, Slang compile and load %.3f s)",
            signature,
            done - start,
            also,
            described - start,
            resolved - described,
            generated - resolved,
            done - generated,
        )
        meta = {"compile_s": done - start}
        names = {label: name for label, (name, _) in built.items()}
        # The cubins go in with the row: a process waiting on this build's lease stops at the
        # row, and one without them would build its kernels again.
        binaries = {
            label: binary
            for label, (_, kernel) in built.items()
            if (binary := self._binary(kernel)) is not None
        }
        entry = self.cache.insert(key, pre, plan.to_json(), names, meta, binaries)
        for label, (_, kernel) in built.items():
            if label != FORWARD:
                self._fresh[key, label] = kernel
        self.cache.publish(key)
        self.cache.record(m.record(function, signature))
        self.cache.enforce_bound()
        return Found(key, pre, entry, plan, built[FORWARD][1], "built")

    def kernel(self, found: Found, label: str) -> tuple[Kernel, Outcome]:
        """The kernel ``label`` names ("forward" or a grad mask): from the entry's cubin on
        CUDA, else compiled from the entry's source, else generated, compiled and added to the
        entry."""
        key, pre = found.key, found.preimage
        fresh = self._fresh.pop((key, label), None)
        if fresh is not None:
            return fresh, "built"
        entry: Entry | None = found.entry
        if label not in found.entry.kernels:
            entry = self.cache.serve(key, pre, label)
        cached = self._from_cache(key, label, entry)
        if cached is not None:
            return cached, "cached"

        def built() -> bool:
            latest = self.cache.serve(key, pre, label)
            name = None if latest is None else latest.kernels.get(label)
            return name is not None and self.cache.read_blob(name) is not None

        with self.cache.leases.hold(kernel_lease(key, label), built):
            entry = self.cache.serve(key, pre, label)
            cached = self._from_cache(key, label, entry, quiet=True)
            if cached is not None:
                return cached, "taken"
            start = time.perf_counter()
            piece = "forward kernel" if label == FORWARD else f"backward kernel for grads {label}"
            what = f"{found.plan.signature}: its {piece}"
            with needing_slang(what):
                source = kernel_source(found.plan, label)
                generated = time.perf_counter()
                name, kernel = self._compile({label: source})[label]
            done = time.perf_counter()
            _log.info(
                "built %s: %s in %.3f s (code generation %.4f s, Slang compile and load %.3f s)",
                found.plan.signature,
                piece,
                done - start,
                generated - start,
                done - generated,
            )
            if entry is not None:
                seconds = time.perf_counter() - start
                self.cache.amend(key, kernel_added(label, name, seconds, self._binary(kernel)))
                self.cache.publish(key)
                self.cache.enforce_bound()
            return kernel, "built"

    def holds(self, entry: Entry, label: str) -> bool:
        """Whether ``entry`` holds kernel ``label`` as a later process loads it: its cubin on
        CUDA, else its source, intact (as a farther tier's entry is, whole, when it is read)."""
        if self.module.device_kind == "cuda":
            binary = entry.binaries.get(label)
            if entry.far:
                return binary is not None
            return binary is not None and self.cache.read_blob(binary["file"]) is not None
        name = entry.kernels.get(label)
        if entry.far:
            return name is not None
        return name is not None and self.cache.read_blob(name) is not None

    def _compile(self, sources: dict[str, str]) -> dict[str, tuple[str, Kernel]]:
        """Store generated sources (by label) and compile them together (see ``_retried``):
        each label's source name and kernel."""
        compile_counts["codegen"] += len(sources)
        names = {label: source_name(source) for label, source in sources.items()}
        named = {names[label]: source for label, source in sources.items()}

        def by_label(kernels: dict[str, Kernel]) -> dict[str, tuple[str, Kernel]]:
            return {label: (name, kernels[name]) for label, name in names.items()}

        def attempt() -> dict[str, tuple[str, Kernel]]:
            for source in sources.values():
                self.cache.write_blob("source", source)
            self._module_written()
            return by_label(self._compiled(named))

        def apart() -> dict[str, tuple[str, Kernel]]:
            with self._apart() as apart:
                kernels = self._compiled(named, apart)
            # Kept if they can be; a later process regenerates them from the plan if not.
            with contextlib.suppress(OSError):
                for source in sources.values():
                    self.cache.write_blob("source", source)
            return by_label(kernels)

        def lost() -> bool:
            return any(self.cache.read_blob(name) is None for name in named)

        return self._retried(attempt, lost, apart)

    def front_end(self) -> spy.SlangModule | FrontEnd:
        """The user's module through the Slang front-end, for reflection (see ``_retried``):
        on CUDA through Slang's C API (no slangpy device), else through slangpy's session."""
        m = self.module

        def apart() -> spy.SlangModule | FrontEnd:
            with self._apart() as (private, include_paths, text):
                if m.device_kind == "cuda":
                    return self._cuda_front_end((private, include_paths, text))
                from ..compile.vulkan_compiler import Compiler

                compiler = Compiler(m.device, private / "slang", private)
                return compiler.load_module(text, include_paths, m.defines, m.content)

        def attempt() -> spy.SlangModule | FrontEnd:
            self._module_written()
            if m.device_kind == "cuda":
                return self._cuda_front_end(None)
            return m.compiler.load_module(m.text, m.include_paths, m.defines, m.content)

        module = self._retried(attempt, lambda: False, apart)
        self.cache.files.note_module_cache()
        return module

    def _cuda_front_end(self, apart: Apart | None) -> FrontEnd:
        from ..compile.cuda_source import front_end

        guard, paths, text, _ = self._cuda_places(apart)
        self._start_nvrtc(guard)  # while Slang works: a build follows
        library = self._cuda_library(guard, text)
        compile_counts["front_end"] += 1
        start = time.perf_counter()
        module = front_end(text, paths, self.module.defines, None, library, self.module.content)
        _log.info("Slang front-end of module %s: %.3f s", text.name, time.perf_counter() - start)
        return module

    def _cuda_places(
        self, apart: Apart | None
    ) -> tuple[ModuleCacheGuard, list[Path], ModuleText, Path]:
        """The module cache, include paths, module text and kernel directory of a CUDA build:
        the cache's, or ``apart`` from it (a private module cache, kept by nothing)."""
        m = self.module
        if apart is None:
            return m.module_guard, m.include_paths, m.text, self.cache.files.kernel_dir
        private, paths, text = apart
        return ModuleCacheGuard(ModuleSeals(private / "slang"), None, ""), paths, text, private

    def _start_nvrtc(self, guard: ModuleCacheGuard) -> None:
        """Start NVRTC on a thread of its own, precompiling the CUDA prelude ``guard``'s module
        cache kept from an earlier build if it has one."""
        from ..compile.cuda_build import prelude_path, stored_prelude
        from ..compile.nvrtc import warm_up

        path = prelude_path(guard, self.module.toolchain)
        warm_up(self.module.arch, stored_prelude(path, self.module.prepared()))

    def _cuda_library(self, guard: ModuleCacheGuard, text: ModuleText) -> Path | None:
        """slangpy's Slang library as IR in ``guard``'s module cache, for a module that imports
        it; None for one that does not."""
        from ..compile.cuda_build import library_dir
        from ..compile.cuda_source import LIBRARY
        from ..preimage import imported_names

        if LIBRARY not in imported_names(text.text):
            return None
        m = self.module
        return library_dir(guard, m.toolchain, m.defines, m.prepared())

    def _module_written(self) -> None:
        """A module given as a source string, written where Slang finds it, again when a
        ``cache clear`` in any process removed it."""
        if self.module.source is not None:
            self.cache.files.write_module(self.module.name, self.module.source)

    def _retried(
        self, attempt: Callable[[], T], lost: Callable[[], bool], apart: Callable[[], T]
    ) -> T:
        """``attempt()``; when it fails while a concurrent ``cache clear`` or eviction removes
        files under it (the cache's layout changed, or ``lost()`` says so), again in a fresh
        Slang session, up to ``RETRIES`` times; then, or at once when nothing changed (what it
        read from the cache may be half-written or stale), once ``apart()`` from the cache
        root, whose failure is the build's. Slang refusing the user's own sources
        (``_users_error``) is the build's failure at once: no retry would read them otherwise."""
        tries = 0
        while True:
            tries += 1
            layout = self.cache.files.layout_id()
            try:
                return attempt()
            except Exception as exc:
                self._forget_session()
                refused = self._users_error(exc)
                if refused is not None:
                    raise refused from None
                changed = lost() or self.cache.files.layout_id() != layout
                if not changed or tries > RETRIES:
                    return apart()

    def _users_error(self, exc: Exception) -> SlangCompileError | None:
        """``exc`` naming the module as the user did (``_named``) where it is Slang refusing
        the user's own sources: its first error one in their text (``in_the_text``), placed in
        the module's text, or in a file of the module's directory or include paths outside the
        cache root; else None."""
        from ..compile.slang_api import SlangCompileError

        if not isinstance(exc, SlangCompileError) or exc.place is None or not exc.in_the_text:
            return None
        m = self.module
        place = Path(exc.place)
        if place != m.text.path:
            homes = [*m.include_paths, *([] if m.source is not None else [m.text.path.parent])]
            place = place.resolve()
            if place.is_relative_to(self.cache.root.resolve()) or not any(
                place.is_relative_to(home.resolve()) for home in homes
            ):
                return None
        return self._named(exc, m.text.path)

    def _named(self, exc: SlangCompileError, path: Path) -> SlangCompileError:
        """``exc``, the module's file ``path`` named as the user named the module: a file given
        to ``load`` is its own path, a module given to ``load_source`` (written in the cache,
        or apart from it) ``<name>.slang``."""
        m = self.module
        return exc if m.source is None else exc.naming(path, f"{m.name}.slang")

    @contextlib.contextmanager
    def _apart(self) -> Iterator[Apart]:
        """A private directory, include paths and module text that read and write nothing under
        the cache root: the Slang module cache (``slang`` in it), the kernel directory and the
        place of a module given as a source string are the private directory."""
        from ..compile.slang_api import SlangCompileError

        m = self.module
        root = self.cache.root.resolve()
        with tempfile.TemporaryDirectory(prefix="slangspec-apart-") as directory:
            private = Path(directory)
            outside = [p for p in m.include_paths if not p.resolve().is_relative_to(root)]
            text = m.text
            if m.source is not None:
                text = ModuleText(m.name, private / f"{m.name}.slang", m.source)
            try:
                yield private, outside, text
            except SlangCompileError as exc:
                raise self._named(exc, text.path) from None

    def _forget_session(self) -> None:
        """Drop the module's Slang session after a failed build: it keeps what it loaded."""
        m = self.module
        if m.device_kind == "cuda":
            from ..compile.cuda_source import forget
            from ..compile.slang_api import global_session

            global_session().run(forget, m.text, m.content)
        else:
            m.compiler.forget_session(m.include_paths, m.defines, m.content)

    def _compiled(self, sources: dict[str, str], apart: Apart | None = None) -> dict[str, Kernel]:
        """Compile the kernels ``sources`` holds (by name) for the module's device, or ``apart``
        from the cache (which then notes nothing of them): by name."""
        m = self.module
        if m.device_kind == "cuda":
            return self._cuda_built(sources, apart)
        from ..compile.vulkan_compiler import Compiler

        if apart is None:
            compiler, paths, text = m.compiler, m.include_paths, m.text
        else:
            private, paths, text = apart
            compiler = Compiler(m.device, private / "slang", private)
        kernels: dict[str, Kernel] = {}
        with m.shaders.lock:
            for name, source in sources.items():
                kernels[name] = compiler.kernel(name, source, text, paths, m.defines, m.content)
            m.shaders.publish(m.device.shader_cache_stats.miss_count)
        if not apart:
            # slangpy may write a module's compiled IR after loading it returns: count it again.
            self.cache.files.note_module_cache()
        return kernels

    def _cuda_built(self, sources: dict[str, str], apart: Apart | None) -> dict[str, Kernel]:
        """Build the kernels ``sources`` holds (by name) for the GPU's architecture in one
        compile (Slang's C API, then NVRTC: no slangpy device), loaded into torch's context."""
        from ..compile.cuda_build import build, prelude_path
        from ..compile.cuda_source import Kernel as KernelSource

        m = self.module
        guard, paths, text, kernel_dir = self._cuda_places(apart)
        library = self._cuda_library(guard, text)
        kernels = [KernelSource(n, src, kernel_dir / f"{n}.slang") for n, src in sources.items()]
        prelude = prelude_path(guard, m.toolchain)
        built = None if apart else self._served_build(text, kernels, paths, library)
        if built is None:
            self._start_nvrtc(guard)
            built = build(text, kernels, paths, m.defines, m.arch, library, m.content, prelude)
        if not apart:
            self.cache.files.note_module_cache()
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
        from ..compile.server_client import ask
        from ..compile.server_messages import ModuleSource, Request, identity

        if self.cache.read_only:
            return None
        m = self.module
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
        return ask(self.cache.root, request, m.arch)

    def described_by_server(self, function: str) -> tuple[FunctionInfo, ...] | None:
        """Each overload of ``function`` as the user's compile server reflects it; None when
        this process reflects it itself (``server_client.ask``); the server's
        ``SlangCompileError`` where it is the user's (``_users_error``)."""
        from ..compile.slang_api import SlangCompileError

        guard, paths, text, _ = self._cuda_places(None)
        library = self._cuda_library(guard, text)
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
        from ..compile.cubin import cubin_problem
        from ..compile.cuda_build import BuiltKernel
        from ..compile.server_client import give_up
        from ..compile.server_messages import KernelText
        from ..compile.slang_api import SlangCompileError

        texts = tuple(KernelText(k.name, k.source) for k in kernels)
        arch = self.module.arch
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
            problem = cubin_problem(b.cubin, self.module.arch, b.entry)
            if problem is not None:
                give_up(self.cache.root, f"its cubin of {name} is refused: {problem}")
                return None
        compile_counts["served"] += len(built)
        return built

    def _launchable(self, built: BuiltKernel) -> DriverKernel | Unloaded:
        """The kernel loaded into torch's context; only kept where this process builds for
        an architecture and runs nothing (``SLANGSPEC_CUDA_ARCH``)."""
        binary = CachedBinary(built.cubin, built.layout, built.group, built.entry)
        if self.module.builds_only:
            return Unloaded(binary)
        make_current(self.module.context)
        return DriverKernel.from_binary(binary)

    def _from_cache(
        self, key: str, label: str, entry: Entry | None, quiet: bool = False
    ) -> Kernel | None:
        """The kernel from the entry's cubin (CUDA) or its whole source; None when neither is
        there, with a warning for a damaged source unless ``quiet``."""
        if entry is None:
            return None
        if self.module.device_kind == "cuda" and label in entry.binaries:
            loaded = self.load_binary(key, label, entry.binaries[label])
            if loaded is not None:
                return loaded
        name = entry.kernels.get(label)
        if name is None:
            return None
        stored = self.cache.read_blob(name)
        if stored is not None:
            try:
                kernel = self._compiled({name: stored.decode()})[name]
            except Exception:
                self._forget_session()
                return None  # built again from the plan, where a failure that stays is raised
            self._keep_binary(key, label, kernel)
            self.cache.enforce_bound()  # the compile kept Slang's caches and a cubin
            return kernel
        if not quiet and self.cache.names(key, name):
            warnings.warn(
                f"slangspec kernel source {name} is missing or damaged; regenerating",
                CacheWarning,
                stacklevel=3,
            )
        return None

    def _keep_binary(self, key: str, label: str, kernel: Kernel) -> None:
        """Add a CUDA kernel's cubin to its entry, so later processes skip Slang entirely."""
        binary = self._binary(kernel)
        if binary is not None:
            self.cache.amend(key, binary_added(label, binary))

    def _binary(self, kernel: Kernel) -> dict[str, Any] | None:
        """A CUDA kernel's cubin, written, as its entry lists it; None for any other kernel."""
        if not isinstance(kernel, (DriverKernel, Unloaded)):
            return None
        built = kernel.binary
        return {
            "file": self.cache.write_blob("binary", built.cubin),
            "layout": built.layout,
            "group": built.group,
            "entry": built.entry,
        }

    def load_binary(
        self, key: str, label: str, binary: dict[str, Any]
    ) -> DriverKernel | Unloaded | None:
        """The kernel from its cached cubin (not loaded where this process runs nothing);
        None (the binary dropped, with a warning) when the file is missing or damaged or the
        driver refuses it."""
        data = self.cache.read_blob(binary["file"])
        why = "missing or damaged"
        if data is None and not self.cache.names(key, binary["file"]):
            return None  # evicted by another process since this one read the entry
        if data is not None:
            try:
                entry = binary.get("entry", ENTRY_POINT)
                cached = CachedBinary(data, binary["layout"], binary["group"], entry)
                if self.module.builds_only:
                    return Unloaded(cached)  # kept already, and this process runs nothing
                # Backward runs on torch's autograd thread, which may have no current context.
                make_current(self.module.context)
                return DriverKernel.from_binary(cached)
            except (CudaDriverError, Unpackable, KeyError, TypeError, ValueError) as exc:
                why = f"unusable ({exc})"
        warnings.warn(
            f"slangspec cached binary {binary['file']} ({label}) is {why}; recompiling",
            CacheWarning,
            stacklevel=3,
        )
        self.cache.amend(key, binary_dropped(label))
        return None
