"""The miss path of a module's specializations, as one unit: lookup -> lease -> specialize ->
codegen -> compile -> keep binary -> record.

On Vulkan slangpy compiles each kernel on its device. On CUDA ``cuda_build`` compiles the kernels
a build needs together, with no slangpy device: a specialization's forward kernel with the
backward kernel of the call's grads, or every kernel warming asks for, in one CUDA source and one
cubin; each kernel is kept as that cubin with its entry point's name and layout, and launched
from it.

Every step says how it was served: "cached" (read from the cache), "built" (built by this
process) or "taken" (built by another process while this one waited on the lease).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar

from ..cache import Cache
from ..cache_store import FORWARD, CacheWarning, Entry, ShaderSnapshots, kernel_lease, key_of
from ..cache_store.entry import binary_added, binary_dropped, kernel_added
from ..cache_store.keys import blob_name, source_name
from ..codegen import kernel_source
from ..counts import compile_counts
from ..cuda_api import CudaDriverError, make_current
from ..devices import DeviceUnavailableError
from ..module_text import ModuleText
from ..specializer import FunctionInfo, SpecializationPlan, device_problem, plan_from_signature
from ..uniforms import Unpackable
from . import cuda_build
from .cuda_driver import CachedBinary, DriverKernel

if TYPE_CHECKING:
    import slangpy as spy

    from ..compiler import CompiledKernel, Compiler

_log = logging.getLogger(__name__)
Outcome = Literal["cached", "built", "taken"]
RETRIES = 2
T = TypeVar("T")
Kernel: TypeAlias = "CompiledKernel | DriverKernel"
Apart: TypeAlias = "tuple[Compiler, list[Path], ModuleText]"
Masks: TypeAlias = Callable[[SpecializationPlan], Sequence[str]]
"""The backward kernels a CUDA build makes with a specialization's forward kernel, by plan."""


def call_masks(plan: SpecializationPlan) -> list[str]:
    """The grad mask of the call a plan is for (every argument that receives a gradient), when
    its backward has a kernel."""
    mask = "".join("1" if a.grad else "0" for a in plan.args)
    return [mask] if mask in plan.backward_masks else []


class SlangUnavailableError(DeviceUnavailableError):
    """Something the cache lacks must be built or reflected, and slangpy cannot be brought up
    to do it."""


@contextlib.contextmanager
def needing_slang(what: str) -> Iterator[None]:
    """Within the block, a failure to import slangpy or open its device says that ``what`` was
    not in the cache."""
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


@dataclass(frozen=True)
class Found:
    """A specialization as the cache holds it once looked up or built: its key and preimage,
    its entry as last read, its plan, the forward kernel when this lookup built it (Vulkan), and
    the binaries it built by label (CUDA)."""

    key: str
    preimage: dict[str, Any]
    entry: Entry
    plan: SpecializationPlan
    forward: Kernel | None
    outcome: Outcome
    binaries: dict[str, CachedBinary] = field(default_factory=dict)


class Buildable(Protocol):
    """What the miss path needs of a module (``module_base.BuildModule`` is one)."""

    name: str
    source: str | None
    defines: dict[str, str]
    include_paths: list[Path]
    text: ModuleText
    content: str
    """A hash of the module's sources, for Slang's session."""
    module_names: list[str]
    device_kind: str
    context: int
    cache: Cache
    shaders: ShaderSnapshots

    @property
    def device(self) -> spy.Device: ...

    @property
    def arch(self) -> str: ...

    @property
    def kernel_toolchain(self) -> dict[str, Any]: ...

    @property
    def compiler(self) -> Compiler: ...

    def function_info(self, name: str) -> FunctionInfo: ...

    def preimage(self, function: str, signature: str) -> dict[str, Any]: ...

    def record(self, function: str, signature: str) -> dict[str, Any]: ...


class Builder:
    """Looks up, and on a miss builds, one module's specializations and their kernels."""

    def __init__(self, module: Buildable) -> None:
        self.module = module
        self.cache = module.cache

    def specialization(self, function: str, signature: str, masks: Masks = call_masks) -> Found:
        """The entry and plan of ``function`` for ``signature``, built here on a miss (on CUDA
        with the backward kernels of ``masks``)."""
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
                        return self._build(function, signature, key, pre, masks)
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
                return self._build(function, signature, key, pre, masks)
        self.cache.touch(key)
        if outcome == "cached":
            _log.debug("hit %s (key %s)", signature, key[:12])
        return Found(key, pre, entry, plan, None, outcome)

    def _build(
        self, function: str, signature: str, key: str, pre: dict[str, Any], masks: Masks
    ) -> Found:
        """Resolve, generate and compile the forward kernel of a missed specialization (on CUDA
        with the backward kernels of ``masks``)."""
        m = self.module
        self.cache.count_miss()
        _log.info("miss %s (key %s): building it", signature, key[:12])
        start = time.perf_counter()
        compile_counts["specialize"] += 1
        info = m.function_info(function)
        described = time.perf_counter()
        plan = plan_from_signature(info, signature)
        refused = device_problem(plan, m.device_kind)
        if refused is not None:
            raise TypeError(refused)
        resolved = time.perf_counter()
        if m.device_kind == "cuda":
            return self._build_cuda(function, signature, key, pre, plan, masks, start)
        source = kernel_source(plan, FORWARD)
        generated = time.perf_counter()
        name, kernel = self._compile(source)
        done = time.perf_counter()
        _log.info(
            "built %s: forward kernel in %.3f s (function description %.3f s, resolution "
            "%.4f s, code generation %.4f s, Slang compile and load %.3f s)",
            signature,
            done - start,
            described - start,
            resolved - described,
            generated - resolved,
            done - generated,
        )
        meta = {"compile_s": done - start}
        entry = self.cache.insert(key, pre, plan.to_json(), {FORWARD: name}, meta)
        self.cache.publish(key)
        self.cache.record(m.record(function, signature))
        self.cache.enforce_bound()
        return Found(key, pre, entry, plan, kernel, "built")

    def _build_cuda(
        self,
        function: str,
        signature: str,
        key: str,
        pre: dict[str, Any],
        plan: SpecializationPlan,
        masks: Masks,
        start: float,
    ) -> Found:
        """Build a missed CUDA specialization's forward kernel and the backward kernels of
        ``masks`` in one compile, and keep the entry with their sources and binaries."""
        m = self.module
        labels = [FORWARD, *masks(plan)]
        sources, binaries = self._cuda_compiled(plan, labels)
        _log.info(
            "built %s: %s in %.3f s", signature, ", ".join(labels), time.perf_counter() - start
        )
        names = {label: source_name(text) for label, text in sources.items()}
        meta = {"compile_s": time.perf_counter() - start}
        entry = self.cache.insert(key, pre, plan.to_json(), names, meta)
        kept = self._keep_binaries(key, binaries)
        self.cache.publish(key)
        self.cache.record(m.record(function, signature))
        self.cache.enforce_bound()
        entry = Entry(key, {**entry.row, "binaries": kept})
        return Found(key, pre, entry, plan, None, "built", binaries)

    def _cuda_compiled(
        self, plan: SpecializationPlan, labels: Sequence[str]
    ) -> tuple[dict[str, str], dict[str, CachedBinary]]:
        """The sources of kernels ``labels`` of ``plan``, generated and written to the cache
        (where they can be), and their binaries from one CUDA build for the module's
        architecture."""
        m = self.module
        compile_counts["codegen"] += len(labels)
        sources = {label: kernel_source(plan, label) for label in labels}
        names = {label: source_name(text) for label, text in sources.items()}
        with contextlib.suppress(OSError):  # not kept: a later process generates it again
            for text in sources.values():
                self.cache.write_blob("source", text)
        self._module_written()
        library = None
        try:
            library = cuda_build.library_dir(
                self.cache.files.module_cache,
                self.cache.module_cache_guard(m.toolchain),
                m.kernel_toolchain,
                m.defines,
            )
        except OSError as exc:  # read from its source by each build instead
            _log.warning("slangpy's Slang library could not be kept compiled: %s", exc)
        binaries = cuda_build.build(
            m.text,
            sources,
            names,
            self.cache.files.kernel_dir,
            m.include_paths,
            m.defines,
            m.arch,
            library,
        )
        return sources, binaries

    def _keep_binaries(
        self, key: str, binaries: dict[str, CachedBinary]
    ) -> dict[str, dict[str, Any]]:
        """Write the cubin of ``binaries`` and add each label's binary to the entry ``key``;
        the binaries as the entry holds them."""
        kept = {}
        for label, b in binaries.items():
            name = blob_name("binary", b.cubin)
            with contextlib.suppress(OSError):  # not kept: a later process builds it again
                self.cache.write_blob("binary", b.cubin)
            kept[label] = {"file": name, "entry": b.entry, "layout": b.layout, "group": b.group}
            self.cache.amend(key, binary_added(label, kept[label]))
        return kept

    def cuda_kernels(
        self, found: Found, labels: Sequence[str]
    ) -> tuple[Outcome, dict[str, CachedBinary]]:
        """Build the CUDA kernels ``labels`` of a specialization that its entry lacks, in one
        compile, and add them to the entry: "built" and their binaries, or "taken" and none
        when another process built them meanwhile."""
        key, pre = found.key, found.preimage

        def lacking() -> list[str]:
            latest = self.cache.serve(key, pre)
            if latest is None:
                return list(labels)
            return [label for label in labels if not self.holds(latest, label)]

        with self.cache.leases.hold(kernel_lease(key, labels[0]), lambda: not lacking()):
            wanted = lacking()
            if not wanted:
                return "taken", {}
            start = time.perf_counter()
            with needing_slang(f"{found.plan.signature}: its kernels {', '.join(wanted)}"):
                sources, binaries = self._cuda_compiled(found.plan, wanted)
            seconds = time.perf_counter() - start
            _log.info("built %s: %s in %.3f s", found.plan.signature, ", ".join(wanted), seconds)
            for label, text in sources.items():
                self.cache.amend(key, kernel_added(label, source_name(text), seconds / len(wanted)))
            self._keep_binaries(key, binaries)
            self.cache.publish(key)
            self.cache.enforce_bound()
            return "built", binaries

    def _cuda_kernel(self, found: Found, label: str) -> tuple[Kernel, Outcome]:
        """A CUDA kernel: built with its specialization, else from the entry's binary, else
        built and added to the entry."""
        built = found.binaries.get(label)
        if built is not None:
            make_current(self.module.context)
            return DriverKernel.from_binary(built), "built"
        key, pre = found.key, found.preimage
        entry = found.entry if label in found.entry.binaries else self.cache.serve(key, pre)
        cached = self._from_cache(key, label, entry)
        if cached is not None:
            return cached, "cached"
        for _ in range(RETRIES):
            outcome, binaries = self.cuda_kernels(found, [label])
            if label in binaries:
                make_current(self.module.context)
                return DriverKernel.from_binary(binaries[label]), outcome
            # Taken: built by another process. Its binary, unless it does not load (then
            # dropped from the entry, so that the next round builds it here).
            cached = self._from_cache(key, label, self.cache.serve(key, pre), quiet=True)
            if cached is not None:
                return cached, outcome
        raise CudaDriverError(f"{found.plan.signature}: kernel {label} was built but not loaded")

    def kernel(self, found: Found, label: str) -> tuple[Kernel, Outcome]:
        """The kernel ``label`` names ("forward" or a grad mask): from the entry's cubin on
        CUDA, else compiled from the entry's source, else generated, compiled and added to the
        entry."""
        if self.module.device_kind == "cuda":
            return self._cuda_kernel(found, label)
        key, pre = found.key, found.preimage
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
                name, kernel = self._compile(source)
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
                self.cache.amend(key, kernel_added(label, name, time.perf_counter() - start))
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

    def _compile(self, source: str) -> tuple[str, CompiledKernel]:
        """Store a generated source and compile it (see ``_retried``)."""
        compile_counts["codegen"] += 1

        def attempt() -> tuple[str, CompiledKernel]:
            name = self.cache.write_blob("source", source)
            self._module_written()
            return name, self._compiled(name, source)

        def apart() -> tuple[str, CompiledKernel]:
            name = source_name(source)
            with self._apart() as apart:
                kernel = self._compiled(name, source, apart)
            # Kept if it can be; a later process regenerates it from the plan if not.
            with contextlib.suppress(OSError):
                self.cache.write_blob("source", source)
            return name, kernel

        return self._retried(
            attempt, lambda: self.cache.read_blob(source_name(source)) is None, apart
        )

    def front_end(self) -> spy.SlangModule:
        """The user's module through the Slang front-end, for reflection (see ``_retried``)."""
        m = self.module

        def apart() -> spy.SlangModule:
            with self._apart() as (compiler, include_paths, text):
                return compiler.load_module(text, include_paths, m.defines, m.content)

        def attempt() -> spy.SlangModule:
            self._module_written()
            return m.compiler.load_module(m.text, m.include_paths, m.defines, m.content)

        module = self._retried(attempt, lambda: False, apart)
        self.cache.files.note_compiled(m.module_names)
        return module

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
        root, whose failure is the build's."""
        tries = 0
        while True:
            tries += 1
            layout = self.cache.files.layout_id()
            try:
                return attempt()
            except Exception:
                self._forget_session()
                changed = lost() or self.cache.files.layout_id() != layout
                if not changed or tries > RETRIES:
                    return apart()

    @contextlib.contextmanager
    def _apart(self) -> Iterator[Apart]:
        """A compiler, include paths and module text that read and write nothing under the
        cache root: the Slang module cache, the kernel directory and the place of a module
        given as a source string are a private directory."""
        from ..compiler import Compiler

        m = self.module
        root = self.cache.root.resolve()
        with tempfile.TemporaryDirectory(prefix="slangspec-apart-") as directory:
            private = Path(directory)
            outside = [p for p in m.include_paths if not p.resolve().is_relative_to(root)]
            text = m.text
            if m.source is not None:
                text = ModuleText(m.name, private / f"{m.name}.slang", m.source)
            yield Compiler(m.device, private / "slang", private), outside, text

    def _forget_session(self) -> None:
        """Drop the module's Slang session after a failed build: it keeps what it loaded."""
        m = self.module
        m.compiler.forget_session(m.include_paths, m.defines, m.content)

    def _compiled(
        self,
        name: str,
        source: str,
        apart: Apart | None = None,
    ) -> CompiledKernel:
        """Compile the kernel ``name`` of ``source`` with the module's compiler, or ``apart``
        from the cache (which then notes nothing of it)."""
        m = self.module
        compiler, paths, text = apart or (m.compiler, m.include_paths, m.text)
        with m.shaders.lock:
            kernel = compiler.kernel(name, source, text, paths, m.defines, m.content)
            m.shaders.publish(m.device.shader_cache_stats.miss_count)
        if not apart:
            # slangpy may write a module's compiled IR after loading it returns: count it again.
            self.cache.files.note_compiled(m.module_names)
        return kernel

    def _from_cache(
        self, key: str, label: str, entry: Entry | None, quiet: bool = False
    ) -> Kernel | None:
        """The kernel from the entry's cubin (CUDA) or its whole source (Vulkan); None when it
        is not there, with a warning for a damaged source unless ``quiet``."""
        if entry is None:
            return None
        if self.module.device_kind == "cuda":
            binary = entry.binaries.get(label)
            return None if binary is None else self.load_binary(key, label, binary)
        name = entry.kernels.get(label)
        if name is None:
            return None
        stored = self.cache.read_blob(name)
        if stored is not None:
            try:
                kernel = self._compiled(name, stored.decode())
            except Exception:
                self._forget_session()
                return None  # built again from the plan, where a failure that stays is raised
            return kernel
        if not quiet and self.cache.names(key, name):
            warnings.warn(
                f"slangspec kernel source {name} is missing or damaged; regenerating",
                CacheWarning,
                stacklevel=3,
            )
        return None

    def load_binary(self, key: str, label: str, binary: dict[str, Any]) -> DriverKernel | None:
        """The kernel from its cached cubin; None (the binary dropped, with a warning) when the
        file is missing or damaged or the driver refuses it."""
        data = self.cache.read_blob(binary["file"])
        why = "missing or damaged"
        if data is None and not self.cache.names(key, binary["file"]):
            return None  # evicted by another process since this one read the entry
        if data is not None:
            # Backward runs on torch's autograd thread, which may have no current context.
            make_current(self.module.context)
            try:
                return DriverKernel.from_binary(
                    CachedBinary(data, binary["entry"], binary["layout"], binary["group"])
                )
            except (CudaDriverError, Unpackable, KeyError, TypeError, ValueError) as exc:
                why = f"unusable ({exc})"
        warnings.warn(
            f"slangspec cached binary {binary['file']} ({label}) is {why}; recompiling",
            CacheWarning,
            stacklevel=3,
        )
        self.cache.amend(key, binary_dropped(label))
        return None
