"""The plan of one leaf, and what resolution asks of a parameter's type."""

from __future__ import annotations

from typing import Any, cast

from ..signatures.scalars import SLANG, SLANG_FLOATS
from ..signatures.text import TensorForm
from .info import TypeInfo
from .kinds import ArgKind, Kind, LeafBinding
from .messages import a_dtype, shape_text
from .plan import ArgPlan, OutputPlan


def output(
    name: str,
    source: int,
    path: tuple[str, ...],
    leaf: int,
    slang_type: str,
    scalar: str,
    elem: tuple[int, ...],
    diff: bool,
) -> OutputPlan:
    """An output of a value of ``slang_type``; differentiable where ``diff`` and its scalar is
    a float."""
    dtype = SLANG[scalar].dtype
    return OutputPlan(
        name, source, path, leaf, slang_type, scalar, dtype, elem, diff and scalar in SLANG_FLOATS
    )


def element_plan(
    t: TypeInfo, base: dict[str, Any], form: TensorForm, row: Kind, **fields: Any
) -> ArgPlan:
    """The plan of a leaf of type ``t`` and kind ``row`` fed by the tensor ``form``, one element
    of ``t`` per call point: its trailing dimensions are ``t``'s element shape."""
    return arg_plan(
        t,
        base,
        row,
        dtype=form.dtype,
        elem=t.shape,
        rank=form.rank,
        call_dims=form.rank - len(t.shape),
        **fields,
    )


def lanes_of(t: TypeInfo, lanes: tuple[int, ...]) -> TypeInfo:
    """The type a tensor feeding field ``t`` of an array of structs (of extents ``lanes``)
    holds one of per call point: an array of ``t`` over ``lanes``, outermost first."""
    suffix = "".join(f"[{n}]" for n in reversed(lanes))
    return TypeInfo("array", f"{t.name}{suffix}", t.scalar, (*lanes, *t.shape))


def arg_plan(t: TypeInfo, base: dict[str, Any], row: Kind, **fields: Any) -> ArgPlan:
    """The plan of a leaf of type ``t`` and kind ``row``; the fields not given are absent (0,
    False, "")."""
    kind, binding = cast(ArgKind, row.leaf), cast(LeafBinding, row.binding)
    return ArgPlan(**base, kind=kind, slang_type=t.name, scalar=t.scalar, binding=binding, **fields)


def vector_width(t: TypeInfo) -> int:
    """How many components a scalar (1) or vector parameter has; 0 for other types."""
    return 1 if t.kind == "scalar" else t.shape[0] if t.kind == "vector" else 0


def index_width(t: TypeInfo) -> int:
    """How many components an index parameter has: a scalar's, a vector's, or a
    one-dimensional array's; 0 for other types."""
    if t.kind == "array" and len(t.shape) == 1:
        return t.shape[0]
    return vector_width(t)


def takes_numbers(t: TypeInfo) -> bool:
    """Whether a tuple of Python numbers can be a value of ``t``: a vector, or an array of
    scalars."""
    return t.kind in ("vector", "array") and len(t.shape) == 1


def expected_value(t: TypeInfo) -> str:
    tensor = f"{a_dtype(SLANG[t.scalar].dtype)} tensor"
    if t.kind != "scalar":
        trailing = shape_text(t.shape)
        numbers = f" or a tuple of {t.shape[0]} numbers" if takes_numbers(t) else ""
        return f"{tensor} whose trailing dimensions are {trailing}{numbers} for {t.name}"
    if t.scalar in ("int", "uint"):
        return f"{tensor}, a Python int or a 1-D grid for {t.name}"
    return f"{tensor} or a Python scalar for {t.name}"
