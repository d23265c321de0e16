"""User-facing modules and functions: the JIT path signature -> plan -> source -> kernel -> call."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xxhash

from ..cache_store.location import cache_root, write_atomic
from ..codegen import backward_source, forward_source
from ..compiler import Compiler
from ..devices import select_device, torch_device
from ..signature import call_signature
from ..specializer import FunctionInfo, SpecializationPlan, function_info, plan_from_signature
from .launch import CudaBinding, VulkanBinding
from .specialization import Specialization

_IDENT = re.compile(r"[A-Za-z_]\w*")
_BINDINGS = {"cuda": CudaBinding, "vulkan": VulkanBinding}
_compilers: dict[str, Compiler] = {}


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
    ) -> None:
        self.name = name
        self.device_kind, self.device = select_device(device)
        self.torch_device = torch_device(self.device_kind)
        self.root = cache_root(cache_dir)
        self.kernel_dir = self.root / "kernels"
        self.kernel_dir.mkdir(mode=0o700, exist_ok=True)
        self.include_paths = [directory, *include_paths, self.kernel_dir]
        self.defines = dict(defines)
        self._compiler = _compilers.get(self.device_kind)
        if self._compiler is None:
            self._compiler = _compilers[self.device_kind] = Compiler(self.device)
        self._binding = _BINDINGS[self.device_kind]
        self._slang_module = None
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
                self.name, self.include_paths, self.defines
            )
        info = function_info(self._slang_module, self.name, name)
        if info is None:
            raise UnknownFunctionError(f"module '{self.name}' has no function '{name}'")
        return info

    def kernel(self, plan: SpecializationPlan, mask: str | None):
        """Generate and compile the forward kernel (``mask`` None) or a backward kernel."""
        source = forward_source(plan) if mask is None else backward_source(plan, mask)
        name = "k_" + xxhash.xxh3_64_hexdigest(source.encode())
        path = self.kernel_dir / f"{name}.slang"
        if not path.exists():
            write_atomic(path, source.encode())
        return self._compiler.kernel(name, self.include_paths, self.defines)


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

    def _specialize(self, signature: str) -> Specialization:
        plan = self.plan_for_signature(signature)
        spec = Specialization(
            plan,
            lambda mask: self.module.kernel(plan, mask),
            self.module._binding,
            self.module.device,
        )
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
    directory = root / "modules" / xxhash.xxh3_64_hexdigest(source.encode())
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{name}.slang"
    if not path.exists():
        write_atomic(path, source.encode())
    includes = [Path(i).resolve() for i in include_paths]
    return Module(name, directory, includes, defines or {}, device, root)
