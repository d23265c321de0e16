"""User-facing modules and functions: ``m.fn(*args)`` specializes on the call signature and runs
the specialization's kernels; the cache and the miss path sit behind ``Builder`` (``miss_path``),
what the builder sees of a module in ``module_base``, and how its device kind builds and runs
kernels behind its ``Backend`` (``cuda_backend``, ``vulkan_backend``) and ``Binding``
(``launch``).

slangpy is imported only on Vulkan, where it compiles, reflects and dispatches
(``vulkan_backend``, ``vulkan_binding``): a CUDA process reflects and builds through Slang's C
API (``compile``) and launches through the driver, and one whose kernels and function
descriptions are all cached starts no Slang at all.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, Unpack

import numpy as np
import torch

from ..cache_store import FORWARD
from ..errors import SlangspecWarning
from ..signatures import ArgumentError, call_signature, result_shape
from ..signatures.text import (
    ArgForm,
    DictForm,
    argument_label,
    binds_converted,
    parse_call_signature,
)
from ..signatures.values import bind_names, form_grad, generates, tensors_of, to_torch
from ..specializer import SpecializationPlan
from ..specializer.generic_values import (
    GenericValues,
    declared_generics,
    declares_values,
    generic_values,
)
from ..specializer.info import FunctionInfo
from ..specializer.kinds import VALUE_KINDS
from ..specializer.messages import ShapeClassError
from .backend import Kernel
from .devices import DeviceUnavailableError
from .launch import Binding
from .mapped import MappedFunction, ParamLayout, generic_arguments, param_layout
from .module_base import (
    BuildFunction,
    BuildModule,
    LoadOptions,
    function_name,
    load_module,
    load_module_source,
)
from .specialization import Specialization
from .writable import sharing, unwritable

_T = TypeVar("_T")


def _constant_while_traced(method: Callable[..., _T]) -> Callable[..., _T]:
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
        if self.builds_only:
            raise DeviceUnavailableError(
                f"SLANGSPEC_CUDA_ARCH={self.arch}: this process builds CUDA kernels for that "
                "architecture and runs none (specialize warm --arch sets it); unset it to "
                "call kernels"
            )
        self.torch_device = self.backend.torch_device()
        self.binding: Binding = self.backend.binding(self.torch_device)
        self._traced_functions: dict[str, Function] = {}

    def __getitem__(self, name: str) -> Function:
        fn = self._functions.get(name)
        if fn is not None:
            return fn  # type: ignore[return-value]
        if torch.compiler.is_compiling():
            # Looking a function up reads the cache; a graph can hold only its outcome.
            return TracedFunction(self, function_name(self.name, name))  # type: ignore[return-value]
        return super().__getitem__(name)  # type: ignore[return-value]

    @_constant_while_traced
    def _operator_for(self, name: str) -> str:
        """The operator name of function ``name``, for a graph torch is compiling (which
        guards on ``_functions``, so this leaves it alone)."""
        from . import traced

        fn = self._functions.get(name) or self._traced_functions.get(name)
        if fn is None:
            fn = self._traced_functions[name] = self._function(name)
        return traced.operator_name(fn)

    @_constant_while_traced
    def _generic_values_for(self, name: str) -> tuple[str, tuple[Any, ...]] | None:
        """``generic_values`` of function ``name`` as plain data, for a graph torch is
        compiling."""
        self._operator_for(name)
        fn = self._functions.get(name) or self._traced_functions[name]
        values = fn.generic_values()
        return None if values is None else (values.name, values.sources)

    @_constant_while_traced
    def _layout_for(self, name: str) -> ParamLayout:
        """``param_layout`` of function ``name``'s parameters, for a graph torch is compiling."""
        self._operator_for(name)
        fn = self._functions.get(name) or self._traced_functions[name]
        return fn.agreed("their parameters", param_layout)

    @_constant_while_traced
    def _names_for(self, name: str, count: int) -> tuple[str, ...]:
        """``parameter_names`` of function ``name`` for a call of ``count`` arguments, for a
        graph torch is compiling."""
        self._operator_for(name)
        fn = self._functions.get(name) or self._traced_functions[name]
        return tuple(fn.parameter_names(count))

    @_constant_while_traced
    def _result_dims_for(self, name: str) -> int:
        """``_result_dims`` of function ``name``, for a graph torch is compiling."""
        self._operator_for(name)
        fn = self._functions.get(name) or self._traced_functions[name]
        return fn.agreed("their results' shapes", _result_dims)


class TracedFunction:
    """``m.name`` while torch traces code that had not looked the function up: calls become
    the function's operator, with what they need of the function held by the graph as
    constants."""

    def __init__(self, module: Module, name: str) -> None:
        self.module = module
        self.name = name
        self.id = f"{module.name}::{name}"

    def __call__(self, /, *args: Any, **keywords: Any) -> Any:
        from . import traced

        result = keywords.pop("_result", None)
        if keywords:
            names = list(self.module._names_for(self.name, len(args) + len(keywords)))
            args = bind_names(self.id, names, args, keywords)
        values = self.module._generic_values_for(self.name)
        if values is not None:
            named = GenericValues(*values).named(args).partition("::")[2]
            target = TracedFunction(self.module, named)
            return target(*args) if result is None else target(*args, _result=result)
        args = _shaped(args, result, functools.partial(self.module._result_dims_for, self.name))
        out = traced.traced_call(self.module._operator_for(self.name), *args)
        return out if result is None else _returned(self.id, out, result)

    def map(self, /, *dims: Sequence[int], **named: Sequence[int]) -> MappedFunction:
        """As ``Function.map``."""
        return MappedFunction(self, self.id, self.module._layout_for(self.name), dims, named)


class _SlangDoc:
    """A docstring that is the class's on the class and, on a function, its Slang signature
    (``help(m.fn)`` and ``m.fn.__doc__``)."""

    def __init__(self, doc: str) -> None:
        self.doc = doc

    def __get__(self, fn: Function | None, owner: type) -> str:
        if fn is None:
            return self.doc
        try:
            return fn.slang_doc()
        except Exception:  # a function that cannot be described: the class's docstring
            return self.doc


class Function(BuildFunction):
    __doc__ = _SlangDoc(
        "One Slang function of a module, specialized and compiled per call signature."
    )

    module: Module

    def __init__(self, module: Module, name: str) -> None:
        super().__init__(module, name)
        self._specs: dict[str, Specialization] = {}
        self.operator_name: str | None = None
        self._warned_no_grad = False
        declared = declared_generics(module.text.text, name) if "<" not in name else {}
        self._declared = declared if declares_values(declared) else None
        """A generic function's parameters, where a call's arguments give its values."""
        self._values: GenericValues | None = None

    def slang_doc(self) -> str:
        """What the function is in Slang, and how Python calls it."""
        overloads = self.overloads
        what = "function" if len(overloads) == 1 else f"function of {len(overloads)} overloads"
        declared = "".join(f"    {o.declaration}\n" for o in overloads)
        return (
            f"{self.id}, the Slang {what}\n\n{declared}\n"
            + ("" if len(overloads) == 1 else "Each call runs the one its arguments fit. ")
            + "Call it with torch tensors (vectorized over their leading dimensions), Python "
            "scalars, slangspec.grid, generators (slangspec.call_id(), ...) and dicts for "
            "structs, by position or by parameter name; "
            "_result= a tensor to write the result into, or the result's form (numpy.ndarray, "
            "'numpy', dict, torch.Tensor). out/inout parameters take tensors "
            "written in place. See 'What can be called' in slangspec's documentation "
            "(docs/calling.md)."
        )

    @property
    def __signature__(self) -> inspect.Signature:
        """The Python call's: every parameter by position or name, then ``_result``."""
        result = inspect.Parameter("_result", inspect.Parameter.KEYWORD_ONLY, default=None)
        try:
            names = self.parameter_names()
        except TypeError:  # overloads naming their parameters apart: by position only
            return inspect.Signature(
                [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL), result]
            )
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([*(inspect.Parameter(n, kind) for n in names), result])

    def signature(self, *args: Any, **keywords: Any) -> str:
        """The call signature of calling this function with ``args`` and ``keywords``, bound as
        the call binds them (parameters by name, and ``_result=``)."""
        if self._declared is not None and (named := self._by_values(args, keywords)) is not None:
            target, args, result = named
            if result is None:
                return target.signature(*args)
            return target.signature(*args, _result=result)
        if keywords:
            args, result, _ = self._by_name(args, keywords)
            args = _shaped(args, result, self._result_elem_dims)
        try:
            return call_signature(self.id, args)
        except ArgumentError as exc:
            raise self._naming(exc, len(args)) from None

    def _naming(self, exc: ArgumentError, count: int) -> ArgumentError:
        """``exc`` naming the argument's parameter too, when this function can be reflected
        (and its overloads of ``count`` parameters name it alike)."""
        try:
            names = self.parameter_names(count)
        except Exception:  # e.g. no such function: the error names the argument by index only
            return exc
        return exc.naming(names[exc.index]) if exc.index < len(names) else exc

    def plan(self, *args: Any, **keywords: Any) -> SpecializationPlan:
        """The specialization plan for ``args`` and ``keywords``, without compiling anything."""
        return self.plan_for_signature(self.signature(*args, **keywords))

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
        if not self._warned_no_grad:
            self._warn_no_grad(found.plan, signature)
        return spec

    def _warn_no_grad(self, plan: SpecializationPlan, signature: str) -> None:
        """Warn, once per function, where a tensor that requires grad gets no gradient from
        this call: any, where the function is not differentiable; a field of a struct that is
        not ``IDifferentiable``, or a parameter of a tensor type without gradients (``ITensor``,
        ``Tensor``), where it is."""
        forms = parse_call_signature(signature).args
        names = [p.name for p in plan.params]
        if not plan.differentiable:
            trained = [i for i, form in enumerate(forms) if form_grad(form)]
            why = f"{self.id} is not [Differentiable]"
            fix = "mark the function [Differentiable], or pass a detached tensor"
        else:
            trained = sorted(
                {
                    a.index
                    for a in plan.args
                    if a.path
                    and not a.grad
                    and not plan.params[a.index].differentiable
                    and form_grad(_leaf_form(forms[a.index], a.path))
                }
            )
            # Through an interface parameter, the interface must be IDifferentiable too.
            held = {
                p.interface or p.slang_type: "interface" if p.interface else "struct"
                for p in (plan.params[i] for i in trained)
            }
            structs = " and ".join(held)
            named = " and ".join(f"{kind} {name}" for name, kind in held.items())
            why = f"{self.id}: {named} is not IDifferentiable (or its parameter is no_diff)"
            fix = f"make {structs} conform to IDifferentiable, or pass detached tensors"
            if not trained:
                trained = [
                    a.index
                    for a in plan.args
                    if not a.path
                    and a.row.tensor
                    and a.row.reads
                    and not a.row.writes
                    and not a.row.differentiable
                    and form_grad(forms[a.index])
                ]
                types = " and ".join(dict.fromkeys(plan.params[i].slang_type for i in trained))
                why = f"{self.id}: {types} is a tensor type without gradients"
                fix = "declare the parameter IDiffTensor (or DiffTensor), or pass a detached tensor"
        if not trained:
            return
        self._warned_no_grad = True
        which = ", ".join(argument_label(i, names[i]) for i in trained)
        warnings.warn(
            f"{why}, so {which} requiring grad gets no gradient from it: {fix}",
            SlangspecWarning,
            stacklevel=4,
        )

    def __call__(self, /, *args: Any, **keywords: Any) -> Any:
        """Call the function: arguments by position or by parameter name; ``_result=`` a
        tensor to write the result into (and return)."""
        if self._declared is not None:
            return self._call_by_values(args, keywords)
        if keywords:
            return self._call_with_keywords(args, keywords)
        if torch.compiler.is_compiling():
            return self._traced(args)
        try:
            signature = call_signature(self.id, args)
        except ArgumentError as exc:
            raise self._naming(exc, len(args)) from None
        try:
            spec = self._specs.get(signature) or self._specialize(signature)
        except ShapeClassError as exc:
            value = args[exc.index]
            for key in exc.path:
                value = value[key]
            raise exc.with_shape(tuple(value.shape)) from None
        if binds_converted(signature):
            args = to_torch(args, self.module.torch_device)
        if spec.leaves is not None:
            args = spec.leaves(args)
        return spec(args)

    def generic_values(self) -> GenericValues | None:
        """Where a call's arguments give this generic function its value parameters; None
        for a function they do not name (not generic, or not readable off a call)."""
        if self._values is None and self._declared is not None:
            overloads = self.overloads
            if len(overloads) == 1:
                self._values = generic_values(overloads[0], self._declared)
            if self._values is None:  # not readable off a call: the plan says why
                self._declared = None
        return self._values

    def _by_values(
        self, args: tuple[Any, ...], keywords: dict[str, Any]
    ) -> tuple[Function, tuple[Any, ...], Any] | None:
        """The function this generic one's arguments name with its generic arguments (``get<3>``
        for a ``vector<float, N>`` of a tensor ending in 3), the arguments bound by position,
        and ``_result=``; None where they name none."""
        values = self.generic_values()
        if values is None:
            return None
        named = {k: v for k, v in keywords.items() if k != "_result"}
        if named:
            args = bind_names(self.id, self.parameter_names(), args, named)
        target = self.module[values.named(args).partition("::")[2]]
        return target, args, keywords.get("_result")

    def _call_by_values(self, args: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
        """The call, made to the function this generic one's arguments name (``_by_values``)."""
        named = self._by_values(args, keywords)
        if named is None:
            return self(*args, **keywords)
        target, args, result = named
        return target(*args) if result is None else target(*args, _result=result)

    def _by_name(
        self, args: tuple[Any, ...], keywords: dict[str, Any]
    ) -> tuple[tuple[Any, ...], Any, list[str]]:
        """The arguments bound by position, those given by parameter name among them, then
        ``_result=`` (taken out of ``keywords``) and the parameters' names."""
        result = keywords.pop("_result", None)
        names = self.parameter_names(len(args) + len(keywords))
        if keywords:
            args = bind_names(self.id, names, args, keywords)
        return args, result, names

    def _result_elem_dims(self) -> int:
        """How many trailing dimensions of a ``_result=`` its element takes (``_shaped``)."""
        return self.agreed("their results' shapes", _result_dims)

    def _call_with_keywords(self, args: tuple[Any, ...], keywords: dict[str, Any]) -> Any:
        args, result, names = self._by_name(args, keywords)
        out = self(*_shaped(args, result, self._result_elem_dims))
        return out if result is None else _returned(self.id, out, result, names, args)

    def return_type(self, kind: Any) -> Callable[..., Any]:
        """slangpy's ``fn.return_type(kind)``: this function with ``_result=kind`` on every
        call (``torch.Tensor``, ``dict``, ``numpy.ndarray`` or ``"numpy"``)."""
        return functools.partial(self, _result=kind)

    def map(self, /, *dims: Sequence[int], **named: Sequence[int]) -> MappedFunction:
        """This function with arguments' dimensions placed in the call shape explicitly, as
        slangpy's ``Function.map``: ``f.map((0,), (1,))(a, b)`` runs every pair of ``a``'s and
        ``b``'s elements, an ``(N, M)`` result; ``f.map((1, 0))(t)`` runs over ``t`` transposed.
        Entry ``i`` of an argument's mapping is the call dimension its dimension ``i`` becomes;
        arguments not mapped broadcast as usual."""
        layout = self.agreed("their parameters", param_layout)
        given = None
        if any(isinstance(m, str) for m in (*dims, *named.values())):
            given = generic_arguments(self.id, layout, self._generic_names(), dims, named)
        if given is not None:
            target = self.module[f"{self.name}<{', '.join(given)}>"]
            return target.map(*dims, **named)
        return MappedFunction(self, self.id, layout, dims, named)

    def _generic_names(self) -> tuple[str, ...]:
        """The function's generic parameters, in the order it declares them."""
        values = self.generic_values()
        if values is not None:
            return tuple(generic for generic, *_ in values.sources)
        return tuple(g.name for g in self.agreed("their generics", lambda i: i.generics))

    def _traced(self, args: tuple[Any, ...]) -> torch.Tensor | None:
        """This call as a torch operator, for a graph torch is compiling."""
        from . import traced

        return traced.traced_call(self._operator(), *args)

    @_constant_while_traced
    def _operator(self) -> str:
        from . import traced

        return traced.operator_name(self)


Module.function_type = Function


def _result_dims(info: FunctionInfo) -> int:
    """How many trailing dimensions of a ``_result=`` tensor its element takes."""
    return len(info.returns.shape) if info.returns.kind in VALUE_KINDS else 0


def _shaped(args: tuple[Any, ...], result: Any, elem_dims: Callable[[], int]) -> tuple[Any, ...]:
    """``args``, and after them the call shape of ``result`` (its dimensions before its
    ``elem_dims()`` element ones), where an argument is a generator: generators have no shape,
    so ``_result=`` gives the call its shape, as in slangpy."""
    if not isinstance(result, torch.Tensor | np.ndarray) or not any(generates(a) for a in args):
        return args
    dims = elem_dims()
    if result.ndim < dims:
        return args
    return (*args, result_shape(result.shape[: result.ndim - dims]))


_RESULT_KINDS = (
    "a tensor or numpy array to write the result into, torch.Tensor, dict, numpy.ndarray or 'numpy'"
)


def _described(value: Any) -> str:
    """``value`` for a message: an array by its kind, dtype and shape, not its elements."""
    if isinstance(value, np.ndarray | torch.Tensor):
        return f"a {type(value).__name__} of {value.dtype} and shape {tuple(value.shape)}"
    return repr(value) if len(repr(value)) <= 80 else type(value).__name__


def _returned(
    fid: str, out: Any, result: Any, names: Sequence[str] = (), args: Sequence[Any] = ()
) -> Any:
    """``out`` as ``_result`` asks: written into it when it is a tensor, else in the form it
    names (``torch.Tensor`` and ``dict``: as returned; ``numpy.ndarray`` or ``"numpy"``: as
    numpy arrays, a dict of them for a struct)."""
    if isinstance(result, torch.Tensor):
        return _write_result(fid, out, result, names, args)
    if isinstance(result, np.ndarray):
        return _write_numpy(fid, out, result)
    numpy = result is np.ndarray or (isinstance(result, str) and result == "numpy")
    if not (numpy or result is torch.Tensor or result is dict):
        raise TypeError(f"{fid}: _result: expected {_RESULT_KINDS}, got {_described(result)}")
    if out is None:
        raise TypeError(f"{fid}: _result: the function returns nothing")
    if result is dict and not isinstance(out, dict):
        raise TypeError(f"{fid}: _result: the function returns a tensor, not a struct (a dict)")
    if numpy and torch.compiler.is_compiling():
        raise TypeError(f"{fid}: _result: numpy results are for calls torch does not compile")
    return _as_numpy(out) if numpy else out


def _write_numpy(fid: str, out: Any, result: np.ndarray) -> np.ndarray:
    """``out`` copied into the numpy array ``result``, which is returned (as slangpy's
    ``_result=`` an array does)."""
    if torch.compiler.is_compiling():
        raise TypeError(f"{fid}: _result: numpy results are for calls torch does not compile")
    if not isinstance(out, torch.Tensor):
        what = "nothing" if out is None else "a struct (a dict)"
        raise TypeError(f"{fid}: _result: the function returns {what}, not an array")
    values = out.detach().cpu().numpy()
    if result.shape != values.shape or result.dtype != values.dtype:
        raise ValueError(
            f"{fid}: _result: expected a numpy array of {values.dtype} and shape "
            f"{values.shape}, got {_described(result)}"
        )
    if not result.flags.writeable:
        raise ValueError(f"{fid}: _result: the numpy array is read-only")
    result[...] = values
    return result


def _as_numpy(out: torch.Tensor | dict[str, Any]) -> np.ndarray | dict[str, Any]:
    if isinstance(out, dict):
        return {name: _as_numpy(value) for name, value in out.items()}
    return out.detach().cpu().numpy()


def _write_result(
    fid: str, out: Any, result: Any, names: Sequence[str] = (), args: Sequence[Any] = ()
) -> torch.Tensor:
    """``out`` copied into ``result`` (through autograd), which is returned; ``args``, the
    call's (of parameters ``names``), are what its autograd node keeps, which ``result`` must
    not share memory with."""
    if not isinstance(result, torch.Tensor):
        raise TypeError(
            f"{fid}: _result: expected a torch tensor to write the result into, got "
            f"{type(result).__name__}"
        )
    if not isinstance(out, torch.Tensor):
        what = "nothing" if out is None else "a struct (a dict)"
        raise TypeError(f"{fid}: _result: the function returns {what}, not a tensor")
    if result.shape != out.shape or result.dtype != out.dtype:
        raise ValueError(
            f"{fid}: _result: expected a {str(out.dtype).removeprefix('torch.')} tensor "
            f"of shape {tuple(out.shape)}, got a {str(result.dtype).removeprefix('torch.')} "
            f"tensor of shape {tuple(result.shape)}"
        )
    if result.device != out.device:
        raise ValueError(
            f"{fid}: _result: expected a tensor on {out.device}, got one on {result.device}"
        )
    problem = unwritable(result)
    if problem is None and out.requires_grad and not torch.compiler.is_compiling():
        kept = [
            (argument_label(k, names[k]), t) for k, a in enumerate(args) for t in tensors_of([a])
        ]
        problem = sharing(result, kept)
    if problem is not None:
        raise ValueError(f"{fid}: _result: {problem}")
    result.copy_(out)
    return result


def _leaf_form(form: ArgForm, path: tuple[str, ...]) -> ArgForm:
    """The form of the field at ``path`` within a dict's form."""
    for name in path:
        assert isinstance(form, DictForm), "a field's path follows the dicts of its form"
        form = dict(form.fields)[name]
    return form


def load(path: str | os.PathLike[str], **options: Unpack[LoadOptions]) -> Module:
    """Load the Slang module at ``path``; its imports resolve beside it and in ``include_paths``.
    Keywords (``LoadOptions``): ``device``, ``include_paths``, ``defines``, ``cache_dir``,
    ``shipped`` (kernels a package ships) and ``remote`` (else ``SLANGSPEC_REMOTE``), a shared
    Redis tier behind the local cache."""
    return load_module(Module, path, **options)


def load_source(name: str, source: str, **options: Unpack[LoadOptions]) -> Module:
    """Load a Slang module from a source string, named ``name`` for imports and errors; the
    keywords are ``load``'s."""
    return load_module_source(Module, name, source, **options)
