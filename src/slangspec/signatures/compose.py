"""Composed signatures of torch values: with ``text.py`` (the forms as text, without torch), the
only place that knows the signature format.

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
  ``i``) and ``n`` how many there are: ``(f3)`` is ``(1.0, 2, 3)``. A nested one (rows of
  numbers) has the form of the numpy array of it.
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
- a tuple or list of dicts (structs: an array's elements, or one per call): ``[{name:form,...}]``,
  the form of the one dict it is bound as, each field the dicts' values stacked along a new
  first dimension: ``[{x:np[D1,S3,G0,V4]}]`` is ``[{"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]``.

A call signature is ``"<function> <mode> <arg> <arg> ..."``, space separated: the function's
identity (``module::function``), the call mode (``call``: a kernel call whose forward kernel
and per-grad-mask backward kernels are specialized from the argument signatures) and one
signature per argument. No form contains a space, so the string splits back unambiguously.

A value with no form is a TypeError (or ValueError) naming the function and the argument.
Which form a value takes is its row's in the table of Python values (``values``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import Error
from .text import argument_label, compose_call_signature
from .value_tensor import TENSOR_FORMS, flagged_tensor_signature
from .values import ROW_OF, row_of


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


def tensor_signature(t: torch.Tensor) -> str:
    """``[Dn,Sm,Gk,V...]`` of a torch tensor; memoized because it sits on the hot path."""
    return flagged_tensor_signature(t, t.requires_grad and torch.is_grad_enabled())


def signature(value: Any) -> str:
    """The composed signature of one argument value, in the forms the module docstring lists."""
    if isinstance(value, torch.Tensor):  # the hot path's: the tensor row's memo, first
        return tensor_signature(value)
    row = ROW_OF.get(type(value)) or row_of(value)
    return row.form(value, torch.is_grad_enabled())


def call_signature(function_id: str, args: Sequence[Any]) -> str:
    """The call signature of calling ``function_id`` with ``args``; an ArgumentError naming
    the first argument that has no form."""
    grad_on = torch.is_grad_enabled()
    try:
        forms = []
        for value in args:
            if isinstance(value, torch.Tensor):
                # The tensor row's memo, read here once per tensor: the hot path's own cost,
                # which looking the row up would add to.
                grad = grad_on and value.requires_grad
                try:
                    form = TENSOR_FORMS.get((value.shape, value.dtype, grad, value.layout))
                except TypeError:
                    form = None
                forms.append(form or flagged_tensor_signature(value, grad))
            else:
                row = ROW_OF.get(type(value)) or row_of(value)
                forms.append(row.call_form(value, grad_on))
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
    problem = row_of(value).problem(value)
    if problem is not None:
        return problem
    try:
        signature(value)
    except (TypeError, ValueError) as exc:
        return exc
    except RuntimeError as exc:  # torch cannot describe the tensor
        return TypeError(f"cannot pass this tensor ({exc}); expected a strided (dense) tensor")
    return None
