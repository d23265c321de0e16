"""Python values: the one table of the kinds of Python value a call passes, a row each.

A row (``value_row.ValueRow``) says everything the code asks of one Python type: its
signature form (``signatures.signature``), how it is packed into the lists torch's operators
take and unpacked from them (``runtime.traced``), how a warm manifest spells it
(``spec_signature``), and what a call binds of it (its tensors, a numpy array as a torch
tensor, whether its form carries a grad). The rows live in the ``value_*`` modules, each
registered at its module's foot, and importing this module registers them all: adding a kind
of Python value is adding a row (and its module to the imports here).
``specializer/kinds.py`` is the table of the Slang side, the parameters these values bind to.

And ``bind_names``, the one binder of values given by parameter name, for calls, manifests
and ``specialize explain`` alike. Free of torch and numpy, as the rows are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..define import frozen
from . import (  # noqa: F401
    value_generator,
    value_grid,
    value_numbers,
    value_slangpy_vector,
    value_struct,
    value_tensor,
)
from .value_row import ROW_OF as ROW_OF
from .value_row import Packing as Packing
from .value_row import Unpacking as Unpacking
from .value_row import ValueRow as ValueRow
from .value_row import flagged as flagged
from .value_row import flagged_forms as flagged_forms
from .value_row import form_grad as form_grad
from .value_row import generates as generates
from .value_row import register as register
from .value_row import row_of as row_of
from .value_row import row_of_class as row_of_class
from .value_row import spec_signature as spec_signature
from .value_row import tensors_of as tensors_of
from .value_row import to_torch as to_torch
from .value_row import unregister as unregister


@frozen
class Wording:
    """How ``bind_names`` words its errors, and which exception they are: the fields format
    with ``fid``, ``count`` (parameters), ``names`` (theirs), ``given`` (positional values),
    ``name`` (the one in question) and ``missing`` (those without a value)."""

    error: type[Exception]
    too_many: str
    unknown: str
    twice: str
    missing: str


CALL_WORDING = Wording(
    TypeError,
    "{fid}: takes {count} arguments ({names}), got {given} positional ones",
    "{fid}: got an unexpected keyword argument {name!r}; its parameters are {names}",
    "{fid}: got multiple values for argument {name!r}",
    "{fid}: missing argument {missing}",
)
"""A call's, as Python words a call's."""
SPEC_WORDING = Wording(
    ValueError,
    "{fid} takes {count} arguments, got {given}",
    "{fid} has no parameter {name!r}; its parameters are {names}",
    "{fid}: parameter {name!r} is given twice",
    "{fid}: no spec for parameter {missing}",
)
"""A manifest's or ``specialize explain``'s argument specs'."""
_MISSING = object()


def bind_names(
    fid: str,
    names: Sequence[str],
    positional: Sequence[Any],
    named: dict[str, Any],
    wording: Wording = CALL_WORDING,
) -> tuple[Any, ...]:
    """Values given by position and by parameter name (of function ``fid``, whose parameters
    are ``names``), in parameter order, as Python binds a call; ``wording.error`` naming the
    parameter that is unknown, given twice or missing."""

    def fail(message: str, **more: Any) -> Exception:
        words = {"fid": fid, "count": len(names), "names": ", ".join(names)}
        return wording.error(message.format(**words, given=len(positional), **more))

    if len(positional) > len(names):
        raise fail(wording.too_many)
    bound: list[Any] = [*positional, *[_MISSING] * (len(names) - len(positional))]
    for name, value in named.items():
        if name not in names:
            raise fail(wording.unknown, name=name)
        k = names.index(name)
        if k < len(positional):
            raise fail(wording.twice, name=name)
        bound[k] = value
    missing = [n for n, v in zip(names, bound, strict=True) if v is _MISSING]
    if missing:
        raise fail(wording.missing, missing=", ".join(map(repr, missing)))
    return tuple(bound)
