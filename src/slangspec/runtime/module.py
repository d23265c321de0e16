"""User-facing modules and functions: ``m.fn(*args)`` specializes on the call signature and runs
the specialization's kernels; the cache and the miss path sit behind ``Builder``.

slangpy is imported only where something must be compiled or reflected (``Module.device``,
``Module.compiler``, ``Module._reflect``), and on Vulkan, where it also dispatches: a CUDA process
whose kernels and function descriptions are all cached never imports it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
import xxhash

from ..cache import Cache
from ..cache_store import FORWARD, kernel_lease, key_of
from ..cuda_api import make_current, primary_context
from ..devices import device_identity, device_kind, open_device, torch_device
from ..preimage import module_closure, preimage
from ..signature_text import has_numpy
from ..signatures import ArgumentError, call_signature
from ..specializer import FunctionInfo, SpecializationPlan, plan_from_signature
from ..toolchain import toolchain
from .builder import Builder, Kernel, needing_slang
from .launch import Binding, CudaBinding
from .specialization import Specialization

if TYPE_CHECKING:
    import slangpy as spy

    from ..compiler import Compiler

_IDENT = re.compile(r"[A-Za-z_]\w*")
_compilers: dict[tuple[int, str], Compiler] = {}


def _constant_while_traced(method: Callable[..., str]) -> Callable[..., str]:
    """torch._dynamo.assume_constant_result's mark, set without importing torch._dynamo (1.5 s
    for a process that never compiles): a graph holds what the method returned, not the cache
    look-ups behind it."""
    method._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return method


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
        cache: Cache,
        source: str | None = None,
    ) -> None:
        self.name = name
        self.path = directory / f"{name}.slang"
        self.source = source
        self.cache = cache
        self.shaders = cache.shader_cache()
        self.device_kind = device_kind(device)
        self.torch_device = torch_device(self.device_kind)
        self._device: spy.Device | None = None
        self.context = 0
        """torch's CUDA context, which cached kernels are loaded into and launched in."""
        self.binding: Binding
        if self.device_kind == "cuda":
            self.context = primary_context(self.torch_device.index)
            self.binding = CudaBinding(self.torch_device, self.context)
        else:
            from .vulkan_binding import VulkanBinding

            self.binding = VulkanBinding(self.device)
        self.user_include_paths = list(include_paths)
        self.include_paths = [directory, *include_paths, cache.kernel_dir]
        self.defines = dict(defines)
        self._compiler: Compiler | None = None
        self._slang_module = None
        self._device_identity: dict[str, str] | None = None
        self.toolchain = toolchain(cache)
        # Hashed once per module object: a running module keeps the code it loaded.
        self.sources = module_closure(self.path, self.user_include_paths)
        self.content = xxhash.xxh3_64_hexdigest(json.dumps(self.sources).encode())
        self.module_names = [Path(file).stem for file in self.sources]
        """The Slang modules this module is compiled from: its own and its imports."""
        self.functions_key = key_of(
            {
                "functions_of": name,
                "toolchain": self.toolchain,
                "sources": self.sources,
                "defines": self.defines,
            }
        )
        """Keys what the cache remembers of which functions this module's content has."""
        self.waits_for_reflection = True
        """Whether a CUDA process that finds another machine reflecting this module waits for
        what it notes instead of starting Slang itself; warming turns it off, since its
        workers start Slang to compile anyway and would only start later."""
        self.builder = Builder(self)
        self._functions: dict[str, Function] = {}
        self._traced_functions: dict[str, Function] = {}

    def __repr__(self) -> str:
        return f"<slangspec.Module {self.name} on {self.device_kind}>"

    @property
    def device(self) -> spy.Device:
        """slangpy's device, opened on first use: on CUDA only when something must be compiled,
        sharing torch's context."""
        if self._device is None:
            if self.device_kind == "cuda":
                make_current(self.context)
            self._device = open_device(self.device_kind, self.shaders)
        return self._device

    @property
    def compiler(self) -> Compiler:
        """The compiler on ``device``, shared by every module of that device and cache."""
        if self._compiler is None:
            from ..compiler import Compiler

            key = (id(self.device), str(self.cache.module_cache))
            compiler = _compilers.get(key)
            if compiler is None:
                compiler = _compilers[key] = Compiler(self.device, self.cache.module_cache)
            self._compiler = compiler
        return self._compiler

    def __getattr__(self, name: str) -> Function:
        if name.startswith("__"):
            raise AttributeError(name)
        fn = self._functions.get(name)
        if fn is None:
            if torch.compiler.is_compiling():
                # Looking a function up reads the cache; a graph can hold only its outcome.
                from . import traced

                return functools.partial(traced.traced_call, self._operator_for(name))
            fn = self._functions[name] = self._function(name)
        return fn

    @_constant_while_traced
    def _operator_for(self, name: str) -> str:
        """The operator name of function ``name``, for a graph torch is compiling (which
        guards on ``_functions``, so this leaves it alone)."""
        from . import traced

        fn = self._functions.get(name) or self._traced_functions.get(name)
        if fn is None:
            fn = self._traced_functions[name] = self._function(name)
        return traced.operator_name(fn)

    def _function(self, name: str) -> Function:
        with needing_slang(f"module '{self.name}': whether it has a function '{name}'"):
            known = self._known(name)
        if known is False:
            raise UnknownFunctionError(f"module '{self.name}' has no function '{name}'")
        return Function(self, name)

    def _known(self, name: str) -> bool | FunctionInfo:
        """What the cache remembers of function ``name`` for this very module content (else
        what reflection finds, remembered): False when the module lacks it, its description
        when it has one, True when it has one that cannot be described (an overload set)."""
        known = self._remembered(name)
        if known is None:
            # CUDA machines sharing a remote tier reflect a module once, as they build a key
            # once: one served cubins never starts Slang. Elsewhere, and in a warming worker,
            # Slang starts anyway, and waiting would only delay it.
            lease: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            if self.device_kind == "cuda" and self.waits_for_reflection:
                name_of_lease = f"functions:{self.functions_key}:{name}"
                lease = self.cache.remote_lease(
                    name_of_lease, lambda: self._remembered(name) is not None
                )
            with lease:
                known = self._remembered(name)
                if known is None:
                    known = self._reflect(name)
                    remembered = known.to_json() if isinstance(known, FunctionInfo) else known
                    self.cache.note_function(self.functions_key, name, remembered)
        return known

    def _remembered(self, name: str) -> bool | FunctionInfo | None:
        """What the cache remembers of function ``name``; None when nothing usable."""
        known = self.cache.functions(self.functions_key, name).get(name)
        if isinstance(known, dict):
            try:
                return FunctionInfo.from_json(known)
            except (TypeError, KeyError, ValueError):
                return None
        return known

    def _reflect(self, name: str) -> bool | FunctionInfo:
        from ..specializer.reflect import function_info, has_function

        front_end = self._front_end()
        if not has_function(front_end, name):
            return False
        try:
            return function_info(front_end, self.name, name) or False
        except TypeError:
            return True  # an overload set: function_info explains it where it is called

    def _front_end(self) -> spy.SlangModule:
        if self._slang_module is None:
            self._slang_module = self.builder.front_end()
        return self._slang_module

    def function_info(self, name: str) -> FunctionInfo:
        """The description of function ``name``: from the cache, else reflected (the Slang
        front-end compiles the module on first use)."""
        known = self._known(name)
        if isinstance(known, FunctionInfo):
            return known
        if known is False:
            raise UnknownFunctionError(f"module '{self.name}' has no function '{name}'")
        from ..specializer.reflect import function_info

        info = function_info(self._front_end(), self.name, name)
        assert info is not None, "the module has the function"
        return info

    def preimage(self, function: str, signature: str) -> dict[str, Any]:
        """The cache-key preimage of one specialization of this module."""
        if self._device_identity is None:
            vulkan = self.device if self.device_kind == "vulkan" else None
            self._device_identity = device_identity(self.device_kind, vulkan)
        return preimage(
            toolchain=self.toolchain,
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


class Function:
    """One Slang function of a module, specialized and compiled per call signature."""

    def __init__(self, module: Module, name: str) -> None:
        self.module = module
        self.name = name
        self.id = f"{module.name}::{name}"
        self._info: FunctionInfo | None = None
        self._specs: dict[str, Specialization] = {}
        self.operator_name: str | None = None

    def __repr__(self) -> str:
        return f"<slangspec.Function {self.id}>"

    @property
    def info(self) -> FunctionInfo:
        if self._info is None:
            with needing_slang(f"{self.id}: its description"):
                self._info = self.module.function_info(self.name)
        return self._info

    def signature(self, *args: Any) -> str:
        """The call signature of calling this function with ``args``."""
        try:
            return call_signature(self.id, args)
        except ArgumentError as exc:
            raise self._naming(exc) from None

    def _naming(self, exc: ArgumentError) -> ArgumentError:
        """``exc`` naming the argument's parameter too, when this function can be reflected."""
        try:
            params = self.info.params
        except Exception:  # e.g. no such function: the error names the argument by index only
            return exc
        return exc.naming(params[exc.index].name) if exc.index < len(params) else exc

    def plan(self, *args: Any) -> SpecializationPlan:
        """The specialization plan for ``args``, without compiling anything."""
        return self.plan_for_signature(self.signature(*args))

    def plan_for_signature(self, signature: str) -> SpecializationPlan:
        """The specialization plan for a call-signature string, with no tensors at hand."""
        return plan_from_signature(self.info, signature)

    def cache_key(self, signature: str) -> str:
        """The disk-cache key of this function's specialization for ``signature``."""
        return key_of(self.module.preimage(self.name, signature))

    def warm(
        self, signature: str, masks: Iterable[str] | None = None
    ) -> Literal["built", "cached"]:
        """Build this specialization's forward kernel and the backward kernels of ``masks``
        (default: every mask its plan can need) into the cache, without tensors. Returns
        "built" when this process built anything, else "cached"."""
        builder = self.module.builder
        found = builder.specialization(self.name, signature)
        outcomes = {found.outcome}
        labels = [] if found.forward is not None else [FORWARD]
        labels += found.plan.backward_masks if masks is None else masks
        outcomes.update(builder.kernel(found, label)[1] for label in labels)
        return "built" if "built" in outcomes else "cached"

    def leased_elsewhere(self, signature: str, label: str = FORWARD) -> bool:
        """Whether a process holds the remote compile lease of this specialization's kernel
        ``label`` ("forward" or a grad mask) now."""
        return self.module.cache.leased_remotely(kernel_lease(self.cache_key(signature), label))

    def claimed(
        self, signature: str, label: str = FORWARD
    ) -> contextlib.AbstractContextManager[bool]:
        """Claim the warming of this specialization's kernel ``label`` on the remote tier,
        without waiting (see ``Cache.claim``): True within the block unless another process
        has claimed it."""
        return self.module.cache.claim("warm:" + kernel_lease(self.cache_key(signature), label))

    def missing(self, signature: str, masks: Iterable[str] | None = None) -> list[str]:
        """What the cache lacks for this specialization ("forward" and masks), compiling
        nothing; every mask the plan can need when ``masks`` is None."""
        cache = self.module.cache
        pre = self.module.preimage(self.name, signature)
        entry = cache.lookup(key_of(pre), pre)
        if entry is None:
            return [FORWARD, *(masks or ())]
        if masks is None:
            masks = SpecializationPlan.from_json(entry.plan_json).backward_masks
        return [
            label
            for label in [FORWARD, *masks]
            if label not in entry.kernels or not cache.source_ok(entry.kernels[label])
        ]

    def _specialize(self, signature: str) -> Specialization:
        builder = self.module.builder
        found = builder.specialization(self.name, signature)

        def kernels(mask: str | None) -> Kernel:
            if mask is None and found.forward is not None:
                return found.forward
            return builder.kernel(found, mask or FORWARD)[0]

        spec = Specialization(found.plan, kernels, self.module.binding)
        self._specs[signature] = spec
        return spec

    def __call__(self, *args: Any) -> torch.Tensor | None:
        if torch.compiler.is_compiling():
            return self._traced(args)
        try:
            signature = call_signature(self.id, args)
        except ArgumentError as exc:
            raise self._naming(exc) from None
        spec = self._specs.get(signature) or self._specialize(signature)
        if has_numpy(signature):
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
            device = device or self.module.torch_device
            args = tuple(
                torch.from_numpy(a).to(device) if isinstance(a, np.ndarray) else a for a in args
            )
        return spec(args)

    def _traced(self, args: tuple[Any, ...]) -> torch.Tensor | None:
        """This call as a torch operator, for a graph torch is compiling."""
        from . import traced

        return traced.traced_call(self._operator(), *args)

    @_constant_while_traced
    def _operator(self) -> str:
        from . import traced

        return traced.operator_name(self)


def load(
    path: str | os.PathLike[str],
    *,
    device: str | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
    defines: dict[str, str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    remote: str | None = None,
) -> Module:
    """Load the Slang module at ``path``; its imports resolve beside it and in ``include_paths``.
    ``remote`` (else ``SLANGSPEC_REMOTE``) names a shared Redis tier behind the local cache."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no Slang module at {p}")
    if p.suffix != ".slang" or not _IDENT.fullmatch(p.stem):
        raise ValueError(f"{p}: expected a '<identifier>.slang' file name")
    includes = [Path(i).resolve() for i in include_paths]
    cache = Cache.for_running(cache_dir, remote)
    return Module(p.stem, p.resolve().parent, includes, defines or {}, device, cache)


def load_source(
    name: str,
    source: str,
    *,
    device: str | None = None,
    include_paths: Sequence[str | os.PathLike[str]] = (),
    defines: dict[str, str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    remote: str | None = None,
) -> Module:
    """Load a Slang module from a source string, named ``name`` for imports and errors."""
    if not _IDENT.fullmatch(name):
        raise ValueError(f"module name {name!r} must be an identifier")
    cache = Cache.for_running(cache_dir, remote)
    path = cache.write_module(name, source)
    includes = [Path(i).resolve() for i in include_paths]
    return Module(name, path.parent, includes, defines or {}, device, cache, source)
