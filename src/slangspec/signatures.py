"""Composed signatures of torch values: with ``signature_text.py`` (the forms as text, without
torch), the only place that knows the signature format.

A signature says everything about an argument that can change the specialized kernel, and
nothing that cannot. Forms, by argument kind:

- torch tensor: ``[Dn,Sm,Gk,V...]``. ``n`` is the rank; ``m`` torch's ScalarType number
  (float16=5, float32=6, float64=7, int32=3, int64=4, bool=11, bfloat16=15); ``k`` is 1 iff the
  tensor requires grad *and* grad mode is enabled; the ``V`` run has one character per
  dimension: the extent when it is 1-4, else ``x`` (0 and above 4). Every fixed-width field
  precedes the variable-length ``V`` run, which is always last. Rank 0 is ``[D0,S6,G0,V]``.
  Only strided (dense) tensors have a form: sparse, mkldnn and nested tensors have none.
- numpy array: ``np[Dn,Sm,G0,V...]``, the tensor form of ``torch.from_numpy(array)``.
- Python scalars: ``f`` (float), ``i`` (int), ``b`` (bool). Values never enter signatures.
- a tuple or list of Python numbers (a vector or array, uniform): ``(kn)``, ``k`` the kind its
  elements take together (``b`` when all are bools, else ``f`` when any is a float, else
  ``i``) and ``n`` how many there are: ``(f3)`` is ``(1.0, 2, 3)``.
- ``slangspec.grid(shape)``: ``grid[Dn]`` with ``n`` the number of grid dimensions;
  ``grid[Dn,strided]`` where an offset or a stride is given (their values are uniforms).
- a generator: its name, ``call_id``, ``thread_id``, ``wang_hash`` or ``rand_float``, with
  ``[Dn]`` after it where ``dims`` is given: ``wang_hash[D3]``. Seeds, ranges and warmup counts
  are uniforms, never in the form.
- the call shape ``_result=`` gives a call with generators: ``_result[Dn]``, after the
  arguments, ``n`` the result's dimensions before its element shape.
- dict (a struct's fields): ``{name:form,...}``, each field's own form, names sorted; nested
  dicts nest. ``{a:[D1,S6,G1,Vx],b:f}`` is ``{"b": 0.5, "a": tensor}``. A dict's ``"_type"``
  entry names the struct its fields are of (slangpy's spelling, for an interface parameter):
  ``_type:@Circle``, sorted among the fields.

A call signature is ``"<function> <mode> <arg> <arg> ..."``, space separated: the function's
identity (``module::function``), the call mode (``call``: a kernel call whose forward kernel
and per-grad-mask backward kernels are specialized from the argument signatures) and one
signature per argument. No form contains a space, so the string splits back unambiguously.

A value with no form is a TypeError (or ValueError) naming the function and the argument.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .errors import Error
from .frozen import frozen
from .generators import Generator
from .scalars import NUMBER_OF_DTYPE, SLANG
from .signature_text import (
    TYPE_KEY,
    TYPE_NAME,
    GeneratorForm,
    GridForm,
    NumbersForm,
    ResultForm,
    TensorForm,
    TypeNameForm,
    argument_label,
    compose_call_signature,
    extent_classes,
    format_arg,
)

_NAME_OF_DTYPE: dict[torch.dtype, str] = {getattr(torch, name): name for name in NUMBER_OF_DTYPE}
_PASSED = list(dict.fromkeys(s.dtype for s in SLANG.values()))
_PASSED_DTYPES = f"{', '.join(_PASSED[:-1])} or {_PASSED[-1]}"
"""The dtypes some parameter takes, for messages: "float16, float32, ... or bool"."""


class ArgumentError(Error):
    """An argument of a call that has no signature form, naming the function and argument
    (and its parameter, where the caller knows it)."""

    def __init__(self, function_id: str, index: int, problem: str, param: str | None = None):
        super().__init__(f"{function_id}: {argument_label(index, param)}: {problem}")
        self.function_id = function_id
        self.index = index
        self.problem = problem
        self.param = param

    def naming(self, param: str) -> ArgumentError:
        """The same error, naming the argument's parameter too."""
        return type(self)(self.function_id, self.index, self.problem, param)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.function_id, self.index, self.problem, self.param)


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a kind slangspec does not pass."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument of a passed kind that this value of it cannot be."""


@frozen
class grid:
    """A per-call index source: the call runs once per point of ``shape``, and the point's
    value in dimension ``d`` is ``offset[d] + index[d] * stride[d]`` (offset 0, stride 1 unless
    given, one entry per dimension)."""

    shape: tuple[int, ...]
    offset: tuple[int, ...]
    stride: tuple[int, ...]

    def __init__(
        self,
        shape: int | Sequence[int],
        offset: Sequence[int] | None = None,
        stride: Sequence[int] | None = None,
    ) -> None:
        # A size torch traces symbolically (SymInt) stands for an int.
        dims = (shape,) if isinstance(shape, int | torch.SymInt) else _entries(shape)
        if not dims or not all(
            isinstance(d, int | torch.SymInt) and not isinstance(d, bool) and d >= 0 for d in dims
        ):
            raise ValueError(
                f"grid shape must be a non-negative int or a sequence of one or more, got {shape!r}"
            )
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "offset", _grid_entries("offset", offset, len(dims), 0))
        object.__setattr__(self, "stride", _grid_entries("stride", stride, len(dims), 1))

    @property
    def strided(self) -> bool:
        """Whether its values are not the plain call index: an offset or a stride is given."""
        n = len(self.shape)
        return self.offset != (0,) * n or self.stride != (1,) * n

    def words(self) -> list[int]:
        """The offsets, then the strides, as the uniform words of a strided grid hold them."""
        return [v % 2**32 for v in (*self.offset, *self.stride)]


def _entries(given: Any) -> tuple[Any, ...]:
    """The entries of a sequence (a tuple, list, ``torch.Size``); none for anything else (a
    string is no sequence of ints)."""
    if isinstance(given, str | bytes) or not isinstance(given, Sequence | torch.Size):
        return ()
    return tuple(given)


def _grid_entries(name: str, given: Sequence[int] | None, n: int, default: int) -> tuple[int, ...]:
    if given is None:
        return (default,) * n
    entries = (given,) if isinstance(given, int) else _entries(given)
    if len(entries) != n or not all(
        isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31 for v in entries
    ):
        raise ValueError(
            f"grid {name} must be {n} int{'s' if n > 1 else ''} (one per dimension of the "
            f"shape) from {-(2**31)} to {2**31 - 1}, got {given!r}"
        )
    return entries


_tensor_cache: dict[tuple[torch.Size, torch.dtype, bool, torch.layout], str] = {}


def tensor_signature(t: torch.Tensor) -> str:
    """``[Dn,Sm,Gk,V...]`` of a torch tensor; memoized because it sits on the hot path."""
    return flagged_tensor_signature(t, t.requires_grad and torch.is_grad_enabled())


def flagged_tensor_signature(t: torch.Tensor, grad: bool) -> str:
    """``[Dn,Sm,Gk,V...]`` of a torch tensor with grad bit ``grad``: as a traced call, which
    knows which of its tensors took part in autograd, names them. The layout is in the memo's
    key so that only strided tensors, checked on a miss, ever hit."""
    key = (t.shape, t.dtype, grad, t.layout)
    try:
        sig = _tensor_cache.get(key)
    except TypeError:  # sizes torch is tracing symbolically do not hash
        return _tensor_form(t, grad)
    if sig is None:
        sig = _tensor_form(t, grad)
        if len(_tensor_cache) < 4096:
            _tensor_cache[key] = sig
    return sig


def _tensor_form(t: torch.Tensor, grad: bool) -> str:
    if t.layout != torch.strided:
        layout = str(t.layout).removeprefix("torch.").strip("_")
        raise TypeError(f"cannot pass a {layout} tensor; expected a strided (dense) tensor")
    name = _NAME_OF_DTYPE.get(t.dtype)
    if name is None:
        dtype = str(t.dtype).removeprefix("torch.")
        article = "an" if dtype.startswith("int") else "a"
        raise TypeError(f"cannot pass {article} {dtype} tensor; expected a {_PASSED_DTYPES} tensor")
    return format_arg(TensorForm(t.dim(), name, grad, extent_classes(t.shape)))


@functools.cache
def _grid_form(dims: int, strided: bool) -> str:
    return format_arg(GridForm(dims, strided))


@functools.cache
def _generator_form(kind: str, dims: int) -> str:
    return format_arg(GeneratorForm(kind, None if dims == -1 else dims))


class result_shape:
    """The call shape a ``_result=`` tensor gives a call whose generators have no shape of their
    own: its dimensions before the result's element shape."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.shape = tuple(shape)


def signature(value: Any) -> str:
    """The composed signature of one argument value, in the forms the module docstring lists."""
    if isinstance(value, torch.Tensor):
        return tensor_signature(value)
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, grid):
        return _grid_form(len(value.shape), value.strided)
    if isinstance(value, Generator):
        return _generator_form(value.kind, value.dims)
    if isinstance(value, result_shape):
        return format_arg(ResultForm(len(value.shape)))
    if isinstance(value, np.ndarray):
        with torch.no_grad():
            return "np" + tensor_signature(torch.from_numpy(value))
    if isinstance(value, dict):
        return _dict_signature(value)
    if isinstance(value, tuple | list):
        return format_arg(NumbersForm(numbers_kind(value), len(value)))
    raise TypeError(
        f"cannot pass a value of type {type(value).__name__}; expected a torch tensor, numpy "
        "array, Python float/int/bool, a tuple or list of those (a vector or array), "
        "slangspec.grid, call_id(), thread_id(), wang_hash(), rand_float() or a dict of those "
        "(a struct)"
    )


def numbers_kind(value: tuple[Any, ...] | list[Any]) -> str:
    """The kind the numbers of a tuple or list take together, as ``signature`` writes it;
    TypeError for one that holds anything but Python numbers, or mixes bools with others."""
    what = type(value).__name__
    if not value:
        raise TypeError(f"cannot pass an empty {what}; expected the numbers of a vector or array")
    kinds = set()
    for x in value:
        if isinstance(x, tuple | list):
            raise TypeError(
                f"cannot pass a nested {what}; expected a flat {what} of numbers, one per "
                "element of a vector or array (pass a tensor for anything deeper)"
            )
        if not isinstance(x, bool | int | float):
            raise TypeError(
                f"cannot pass a {what} holding a value of type {type(x).__name__}; expected "
                "Python floats, ints or bools"
            )
        kinds.add("b" if isinstance(x, bool) else "f" if isinstance(x, float) else "i")
    if "b" in kinds and len(kinds) > 1:
        raise TypeError(f"cannot pass a {what} mixing bools and numbers; expected one or the other")
    return "f" if "f" in kinds else kinds.pop()


def _dict_signature(value: dict[Any, Any]) -> str:
    if not value:
        raise TypeError("cannot pass an empty dict; expected a dict of a struct's fields")
    bad = [k for k in value if not (isinstance(k, str) and k.isidentifier())]
    if bad:
        raise TypeError(f"cannot pass a dict keyed by {bad[0]!r}; expected field names")
    parts = []
    for k in sorted(value):
        try:
            form = type_name_form(value[k]) if k == TYPE_KEY else signature(value[k])
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"field {k!r}: {exc}") from None
        parts.append(f"{k}:{form}")
    return "{" + ",".join(parts) + "}"


@functools.cache
def _type_name_form(name: str) -> str:
    if not TYPE_NAME.fullmatch(name):
        raise ValueError(
            f"cannot name the struct {name!r}; expected a struct's name, an identifier with "
            "its namespaces (ns::Circle)"
        )
    return format_arg(TypeNameForm(name))


def type_name_form(value: Any) -> str:
    """The form of a dict's ``"_type"`` entry, the struct it names; TypeError or ValueError
    for what does not name one."""
    if not isinstance(value, str):
        raise TypeError(
            f"cannot name a struct with a value of type {type(value).__name__}; expected the "
            "struct's name as a str"
        )
    return _type_name_form(value)


_field_orders: dict[tuple[Any, ...], tuple[str, ...]] = {}
"""The sorted fields of each key sequence a dict argument came with, once checked."""


def _dict_form(value: dict[Any, Any], grad_on: bool) -> str:
    """``_dict_signature`` on the hot path: keys checked once per key sequence, tensors through
    the same memo as arguments'."""
    keys = tuple(value)
    order = _field_orders.get(keys)
    if order is None:
        _dict_signature(value)  # raises for what it cannot describe
        if len(_field_orders) > 1024:
            _field_orders.clear()
        order = _field_orders[keys] = tuple(sorted(keys))
    parts = []
    for k in order:
        v = value[k]
        if isinstance(v, torch.Tensor):
            parts.append(f"{k}:{flagged_tensor_signature(v, grad_on and v.requires_grad)}")
        elif k == TYPE_KEY:
            parts.append(f"{k}:{type_name_form(v)}")
        elif type(v) is dict:
            parts.append(f"{k}:{_dict_form(v, grad_on)}")
        else:
            parts.append(f"{k}:{signature(v)}")
    return "{" + ",".join(parts) + "}"


def call_signature(function_id: str, args: Sequence[Any]) -> str:
    """The call signature of calling ``function_id`` with ``args``; an ArgumentError naming
    the first argument that has no form."""
    grad_on = torch.is_grad_enabled()
    try:
        forms = []
        for value in args:
            if isinstance(value, torch.Tensor):
                # tensor_signature's memo, read here once per tensor: the hot path's own cost.
                grad = grad_on and value.requires_grad
                try:
                    form = _tensor_cache.get((value.shape, value.dtype, grad, value.layout))
                except TypeError:
                    form = None
                forms.append(form or flagged_tensor_signature(value, grad))
            elif type(value) is dict:
                forms.append(_dict_form(value, grad_on))
            else:
                forms.append(signature(value))
        return compose_call_signature(function_id, forms)
    except Exception:
        # Off the hot path: only a failed call looks for the argument to blame.
        for index, value in enumerate(args):
            problem = _problem(value)
            if problem is not None:
                kind = ArgumentTypeError if isinstance(problem, TypeError) else ArgumentValueError
                raise kind(function_id, index, str(problem)) from None
        raise


def _problem(value: Any) -> Exception | None:
    """Why ``value`` has no signature form, as the error ``signature`` raises; None if it has."""
    if isinstance(value, torch.Tensor) and value.is_nested:
        return TypeError("cannot pass a nested tensor; expected a strided (dense) tensor")
    try:
        signature(value)
    except (TypeError, ValueError) as exc:
        return exc
    except RuntimeError as exc:  # torch cannot describe the tensor
        return TypeError(f"cannot pass this tensor ({exc}); expected a strided (dense) tensor")
    return None
