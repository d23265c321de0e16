"""User-facing modules and functions: the JIT path signature -> plan -> source -> kernel -> call,
with the disk cache consulted beside each arrow."""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xxhash

from ..cache_store.location import MODULES, cache_root, part, size_bound, write_atomic
from ..cache_store.policy import enforce_bound
from ..cache_store.preimage import device_identity, key_of, module_closure, preimage
from ..cache_store.store import CacheWarning, Entry, Store
from ..codegen import backward_source, forward_source
from ..compiler import CompiledKernel, Compiler, compile_counts
from ..devices import select_device, torch_device
from ..signature import call_signature
from ..specializer import FunctionInfo, SpecializationPlan, function_info, plan_from_signature
from ..uniforms import Unpackable
from .cuda_driver import CachedBinary, CudaDriverError, DriverKernel, cubin_from_ptx
from .launch import CudaBinding, VulkanBinding
from .specialization import Specialization

_IDENT = re.compile(r"[A-Za-z_]\w*")
_BINDINGS = {"cuda": CudaBinding, "vulkan": VulkanBinding}
_compilers: dict[int, Compiler] = {}

FORWARD = "forward"


class UnknownFunctionError(AttributeError, ValueError):
    """The module has no function of that name."""


class Module:
    """A Slang module whose functions are called with torch tensors: ``m.fn(*args)``."""

    def __init__(
        self,
        name: str,
        directory: Path,
        include_paths: Sequence[Path],
        defines: dict[str, str],
        device: str | None,
        cache_dir: str | os.PathLike[str] | None,
        source: str | None = None,
    ) -> None:
        self.name = name
        self.path = directory / f"{name}.slang"
        self.source = source
        self.root = cache_root(cache_dir)
        self.device_kind, self.device = select_device(device, self.root)
        self.torch_device = torch_device(self.device_kind)
        self.store = Store(self.root)
        self.user_include_paths = list(include_paths)
        self.include_paths = [directory, *include_paths, self.store.kernel_dir]
        self.defines = dict(defines)
        self._compiler = _compilers.get(id(self.device))
        if self._compiler is None:
            self._compiler = _compilers[id(self.device)] = Compiler(self.device, self.root)
        self._binding = _BINDINGS[self.device_kind]
        self._slang_module = None
        self._device_identity: dict[str, str] | None = None
        # Hashed once per module object: a running module keeps the code it loaded.
        self.sources = module_closure(self.path, self.user_include_paths)
        self.content = xxhash.xxh3_64_hexdigest(json.dumps(self.sources).encode())
        self._functions: dict[str, Function] = {}

    def __repr__(self) -> str:
        return f"<slangspec.Module {self.name} on {self.device_kind}>"

    def __getattr__(self, name: str) -> Function:
        if name.startswith("__"):
            raise AttributeError(name)
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = Function(self, name)
        return fn

    def function_info(self, name: str) -> FunctionInfo:
        """Reflect ``name``; front-end compiles the module on first use."""
        if self._slang_module is None:
            self._slang_module = self._compiler.load_module(
                self.name, self.include_paths, self.defines, self.content
            )
        info = function_info(self._slang_module, self.name, name)
        if info is None:
            raise UnknownFunctionError(f"module '{self.name}' has no function '{name}'")
        return info

    def preimage(self, function: str, signature: str) -> dict[str, Any]:
        """The cache-key preimage of one specialization of this module."""
        if self._device_identity is None:
            self._device_identity = device_identity(self.device_kind, self.device)
        return preimage(
            device=self._device_identity,
            module=self.name,
            sources=self.sources,
            defines=self.defines,
            function=function,
            signature=signature,
        )

    def record(self, function: str, signature: str) -> dict[str, Any]:
        """What the warm command needs to rebuild this specialization elsewhere."""
        return {
            "module": self.name,
            "path": None if self.source is not None else str(self.path),
            "source": self.source,
            "include_paths": [str(p) for p in self.user_include_paths],
            "defines": self.defines,
            "function": function,
            "signature": signature,
            "device": self.device_kind,
        }

    def compile_source(self, source: str) -> tuple[str, CompiledKernel]:
        """Store a generated source and compile it."""
        compile_counts["codegen"] += 1
        name = self.store.write_source(source)
        return name, self._compiler.kernel(name, self.include_paths, self.defines, self.content)

    def keep_binary(self, key: str, label: str, kernel: CompiledKernel) -> None:
        """Add a CUDA kernel's cubin to its entry, so later processes skip Slang entirely."""
        if kernel.ptx is None or kernel.block is None:
            return
        self.device.set_cuda_context_current()
        try:
            cubin = cubin_from_ptx(kernel.ptx)
        except CudaDriverError as exc:
            warnings.warn(f"slangspec could not keep a cubin: {exc}", CacheWarning, stacklevel=2)
            return
        binary = {"file": self.store.write_binary(cubin), "layout": kernel.block.layout}
        self.store.add_binary(key, label, {**binary, "group": kernel.group})

    def load_binary(self, key: str, label: str, binary: dict[str, Any]) -> DriverKernel | None:
        """The kernel from its cached cubin; None (the binary dropped, with a warning) when the
        file is missing or damaged or the driver refuses it."""
        data = self.store.read_binary(binary["file"])
        why = "missing or damaged"
        if data is not None:
            # Backward runs on torch's autograd thread, which may have no current context.
            self.device.set_cuda_context_current()
            try:
                return DriverKernel.from_binary(
                    CachedBinary(data, binary["layout"], binary["group"])
                )
            except (CudaDriverError, Unpackable, KeyError, TypeError, ValueError) as exc:
                why = f"unusable ({exc})"
        warnings.warn(
            f"slangspec cached binary {binary['file']} ({label}) is {why}; recompiling",
            CacheWarning,
            stacklevel=2,
        )
        self.store.drop_binary(key, label)
        return None

    def kernel(
        self,
        key: str,
        pre: dict[str, Any],
        plan: SpecializationPlan,
        mask: str | None,
        known: Entry | None,
    ) -> CompiledKernel | DriverKernel:
        """The forward kernel (``mask`` None) or a backward kernel: from the cache's cubin on
        CUDA, else compiled from the cache's source, else generated, compiled and added to the
        entry. ``known`` is the entry as last read."""
        label = mask or FORWARD
        if known is None or label not in known.kernels:
            known = self.store.load(key, pre)
        cached = self._from_cache(key, label, known)
        if cached is not None:
            return cached

        def built() -> bool:
            entry = self.store.load(key, pre)
            return entry is not None and label in entry.kernels

        with self.store.lease(f"{key}:{label}", built):
            entry = self.store.load(key, pre)
            cached = self._from_cache(key, label, entry, quiet=True)
            if cached is not None:
                return cached
            start = time.perf_counter()
            source = forward_source(plan) if mask is None else backward_source(plan, mask)
            name, kernel = self.compile_source(source)
            if entry is not None:
                self.store.add_kernel(key, label, name, time.perf_counter() - start)
                self.keep_binary(key, label, kernel)
                enforce_bound(self.store, size_bound())
            return kernel

    def _from_cache(
        self, key: str, label: str, entry: Entry | None, quiet: bool = False
    ) -> CompiledKernel | DriverKernel | None:
        """The kernel from the entry's cubin (CUDA) or its whole source; None when neither is
        there, with a warning for a damaged source unless ``quiet``."""
        if entry is None:
            return None
        if self.device_kind == "cuda" and label in entry.binaries:
            loaded = self.load_binary(key, label, entry.binaries[label])
            if loaded is not None:
                return loaded
        name = entry.kernels.get(label)
        if name is None:
            return None
        if self.store.source_ok(name):
            return self._compiled(key, label, name)
        if not quiet:
            warnings.warn(
                f"slangspec kernel source {name} is missing or damaged; regenerating",
                CacheWarning,
                stacklevel=3,
            )
        return None

    def _compiled(self, key: str, label: str, name: str) -> CompiledKernel:
        """Compile a stored source, keeping its cubin on CUDA."""
        kernel = self._compiler.kernel(name, self.include_paths, self.defines, self.content)
        self.keep_binary(key, label, kernel)
        return kernel


class Function:
    """One Slang function of a module, specialized and compiled per call signature."""

    def __init__(self, module: Module, name: str) -> None:
        self.module = module
        self.name = name
        self.id = f"{module.name}::{name}"
        self._info: FunctionInfo | None = None
        self._specs: dict[str, Specialization] = {}

    def __repr__(self) -> str:
        return f"<slangspec.Function {self.id}>"

    @property
    def info(self) -> FunctionInfo:
        if self._info is None:
            self._info = self.module.function_info(self.name)
        return self._info

    def signature(self, *args: Any) -> str:
        """The call signature of calling this function with ``args``."""
        return call_signature(self.id, args)

    def plan(self, *args: Any) -> SpecializationPlan:
        """The specialization plan for ``args``, without compiling anything."""
        return self.plan_for_signature(self.signature(*args))

    def plan_for_signature(self, signature: str) -> SpecializationPlan:
        """The specialization plan for a call-signature string, with no tensors at hand."""
        return plan_from_signature(self.info, signature)

    def cache_key(self, signature: str) -> str:
        """The disk-cache key of this function's specialization for ``signature``."""
        return key_of(self.module.preimage(self.name, signature))

    def _build(self, key: str, pre: dict[str, Any], signature: str):
        """Resolve, generate and compile the forward kernel of a missed specialization."""
        m = self.module
        m.store.count_miss()
        start = time.perf_counter()
        compile_counts["specialize"] += 1
        plan = self.plan_for_signature(signature)
        name, kernel = m.compile_source(forward_source(plan))
        meta = {"compile_s": time.perf_counter() - start}
        entry = m.store.insert(key, pre, plan.to_json(), {FORWARD: name}, meta)
        m.keep_binary(key, FORWARD, kernel)
        m.store.record(m.record(self.name, signature))
        enforce_bound(m.store, size_bound())
        return entry, plan, kernel

    def warm(self, signature: str, masks: Iterable[str] | None = None) -> str:
        """Build this specialization's forward kernel and the backward kernels of ``masks``
        (default: every mask its plan can need) into the cache, without tensors. Returns
        "cached" when everything was already there, else "built"."""
        before = compile_counts["codegen"]
        spec = self._specs.get(signature) or self._specialize(signature)
        for mask in spec.plan.backward_masks if masks is None else masks:
            spec.backward_kernel(mask)
        return "built" if compile_counts["codegen"] > before else "cached"

    def missing(self, signature: str, masks: Iterable[str] | None = None) -> list[str]:
        """What the cache lacks for this specialization ("forward" and masks), compiling
        nothing; every mask the plan can need when ``masks`` is None."""
        m = self.module
        pre = m.preimage(self.name, signature)
        entry = m.store.load(key_of(pre), pre)
        if entry is None:
            return [FORWARD, *(masks or ())]
        if masks is None:
            masks = SpecializationPlan.from_json(entry.plan_json).backward_masks
        wanted = [FORWARD, *masks]
        return [
            label
            for label in wanted
            if label not in entry.kernels or not m.store.source_ok(entry.kernels[label])
        ]

    def _specialize(self, signature: str) -> Specialization:
        m = self.module
        pre = m.preimage(self.name, signature)
        key = key_of(pre)
        entry = m.store.load(key, pre)
        forward = plan = None
        if entry is None:
            with m.store.lease(key, lambda: m.store.load(key, pre) is not None):
                entry = m.store.load(key, pre)
                if entry is None:
                    entry, plan, forward = self._build(key, pre, signature)
        if plan is None:
            m.store.touch(key)
            plan = SpecializationPlan.from_json(entry.plan_json)

        def kernels(mask: str | None) -> CompiledKernel | DriverKernel:
            if mask is None and forward is not None:
                return forward
            return m.kernel(key, pre, plan, mask, entry)

        spec = Specialization(plan, kernels, m._binding, m.device)
        self._specs[signature] = spec
        return spec

    def __call__(self, *args: Any) -> torch.Tensor | None:
        signature = call_signature(self.id, args)
        spec = self._specs.get(signature) or self._specialize(signature)
        if "np[" in signature:
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
            device = device or self.module.torch_device
            args = tuple(
                torch.from_numpy(a).to(device) if isinstance(a, np.ndarray) else a for a in args
            )
        return spec(args)


def load(
    path: str | os.PathLike[str],
    *,
    device: str | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
    defines: dict[str, str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Module:
    """Load the Slang module at ``path``; its imports resolve beside it and in ``include_paths``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no Slang module at {p}")
    if p.suffix != ".slang" or not _IDENT.fullmatch(p.stem):
        raise ValueError(f"{p}: expected a '<identifier>.slang' file name")
    includes = [Path(i).resolve() for i in include_paths]
    return Module(p.stem, p.resolve().parent, includes, defines or {}, device, cache_dir)


def load_source(
    name: str,
    source: str,
    *,
    device: str | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
    defines: dict[str, str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Module:
    """Load a Slang module from a source string, named ``name`` for imports and errors."""
    if not _IDENT.fullmatch(name):
        raise ValueError(f"module name {name!r} must be an identifier")
    root = cache_root(cache_dir)
    directory = part(root, MODULES) / xxhash.xxh3_64_hexdigest(source.encode())
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{name}.slang"
    if not path.is_file() or path.read_text() != source:
        write_atomic(path, source.encode())
    includes = [Path(i).resolve() for i in include_paths]
    return Module(name, directory, includes, defines or {}, device, root, source)
