"""User-facing modules and functions: ``m.fn(*args)`` specializes on the call signature and runs
the specialization's kernels; the cache and the miss path sit behind ``Builder``, what the
builder sees of a module in ``build.py``.

slangpy is imported only where something must be compiled or reflected (``Module.device``,
``Module.compiler``, ``Module._reflect``), and on Vulkan, where it also dispatches: a CUDA process
whose kernels and function descriptions are all cached never imports it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, Unpack

import numpy as np
import torch

from ..cache_store import FORWARD
from ..devices import torch_device
from ..signature_text import has_numpy
from ..signatures import ArgumentError, call_signature
from ..specializer import SpecializationPlan
from .launch import Binding, CudaBinding
from .miss_path import Kernel
from .module_base import (
    BuildFunction,
    BuildModule,
    LoadOptions,
    load_module,
    load_module_source,
)
from .specialization import Specialization


def _constant_while_traced(method: Callable[..., str]) -> Callable[..., str]:
    """torch._dynamo.assume_constant_result's mark, set without importing torch._dynamo (1.5 s
    for a process that never compiles): a graph holds what the method returned, not the cache
    look-ups behind it."""
    method._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return method


class Module(BuildModule):
    """A Slang module whose functions are called with torch tensors: ``m.fn(*args)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As ``BuildModule``, and then the binding of torch tensors on its device."""
        super().__init__(*args, **kwargs)
        self.torch_device = torch_device(self.device_kind)
        self.binding: Binding
        if self.device_kind == "cuda":
            self.binding = CudaBinding(self.torch_device, self.context)
        else:
            from .vulkan_binding import VulkanBinding

            self.binding = VulkanBinding(self.device)
        self._traced_functions: dict[str, Function] = {}

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


class Function(BuildFunction):
    """One Slang function of a module, specialized and compiled per call signature."""

    module: Module

    def __init__(self, module: Module, name: str) -> None:
        super().__init__(module, name)
        self._specs: dict[str, Specialization] = {}
        self.operator_name: str | None = None

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

    @property
    def torch_device(self) -> torch.device:
        """Where this function's results go when no argument is a torch tensor."""
        return self.module.torch_device

    def specialization(self, signature: str) -> Specialization:
        """This function's specialization for a call signature, built on a miss."""
        return self._specs.get(signature) or self._specialize(signature)

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


Module.function_type = Function


def load(path: str | os.PathLike[str], **options: Unpack[LoadOptions]) -> Module:
    """Load the Slang module at ``path``; its imports resolve beside it and in ``include_paths``.
    Keywords (``LoadOptions``): ``device``, ``include_paths``, ``defines``, ``cache_dir`` and
    ``remote`` (else ``SLANGSPEC_REMOTE``), a shared Redis tier behind the local cache."""
    return load_module(Module, path, **options)


def load_source(name: str, source: str, **options: Unpack[LoadOptions]) -> Module:
    """Load a Slang module from a source string, named ``name`` for imports and errors; the
    keywords are ``load``'s."""
    return load_module_source(Module, name, source, **options)
