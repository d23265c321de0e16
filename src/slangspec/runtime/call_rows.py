"""What a ``Specialization`` binds, worked out once from its plan: one row per leaf or output of
each kind its hot path binds alike, each a named value read by attribute (no per-call work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..codegen import parameter_names as names
from ..define import frozen
from ..signatures.scalars import SLANG
from ..specializer.kinds import KIND
from ..specializer.plan import ArgPlan, SpecializationPlan


@frozen
class Uniform:
    """A leaf bound as one value for the whole call: its kernel parameter and what converts
    the argument to the value bound."""

    leaf: int
    name: str
    value: Callable[[Any], Any]


@frozen
class Elementwise:
    """A leaf read one element per call point, at its tensor's strides."""

    leaf: int
    call_dims: int
    elem: tuple[int, ...]
    elem_dims: int
    name: str
    strides: str  # the kernel parameter of its strides
    gradient: str  # the kernel parameter a backward kernel writes its gradient into
    accumulated: bool  # ``SpecializationPlan.accumulates``: added there, at strides of its own
    gradient_strides: str


@frozen
class WholeTensor:
    """A whole tensor the kernels read, as a tensor struct."""

    leaf: int
    written: bool  # the kernel writes it too, in place
    parts: tuple[str, ...]  # the parts of its tensor struct in forward kernels ((): one)
    grad_parts: tuple[str, ...]  # and in a backward kernel that computes its gradient
    name: str


@frozen
class WrittenTensor:
    """A differentiable tensor the kernel writes into a copy of itself, output ``output`` of
    the call."""

    output: int
    leaf: int
    parts: tuple[str, ...]  # the parts of its tensor struct in forward kernels
    backward_parts: tuple[str, ...]  # and in backward kernels
    name: str


@frozen
class Output:
    """An output the call allocates: of the call shape then ``elem``."""

    dtype: torch.dtype
    elem: tuple[int, ...]
    name: str


@frozen
class Cotangent:
    """The cotangent of output ``output``, which a backward kernel reads per call point."""

    output: int
    name: str
    strides: str


@frozen
class ElementShape:
    """A tensor leaf whose element shape the signature cannot vouch for (an extent past 4)."""

    leaf: int
    elem: tuple[int, ...]
    slang_type: str


def uniforms(plan: SpecializationPlan) -> tuple[Uniform, ...]:
    return tuple(
        Uniform(i, names.leaf(i), uniform_value(a))
        for i, a in enumerate(plan.args)
        if a.row.leaf == "uniform"
    )


def elementwise(plan: SpecializationPlan) -> tuple[Elementwise, ...]:
    return tuple(
        Elementwise(
            i,
            a.call_dims,
            a.elem,
            len(a.elem),
            names.leaf(i),
            names.leaf_strides(i),
            names.gradient(i),
            plan.accumulates(a),
            names.gradient_strides(i),
        )
        for i, a in enumerate(plan.args)
        if a.row.leaf == "elementwise"
    )


def whole_tensors(plan: SpecializationPlan) -> tuple[WholeTensor, ...]:
    rows = [a.row for a in plan.args]
    return tuple(
        WholeTensor(i, r.writes == "itself", r.parts, _parts(r.grad_binding), names.leaf(i))
        for i, r in enumerate(rows)
        if r.leaf == "tensor" and r.reads
    )


def written_tensors(plan: SpecializationPlan) -> tuple[WrittenTensor, ...]:
    written = []
    for k, o in enumerate(plan.outputs):
        if plan.is_whole(o):
            r = plan.args[o.leaf].row
            parts, backward_parts = r.parts, _parts(r.backward_binding)
            written.append(WrittenTensor(k, o.leaf, parts, backward_parts, names.leaf(o.leaf)))
    return tuple(written)


def outputs(plan: SpecializationPlan) -> tuple[Output, ...]:
    return tuple(
        Output(getattr(torch, o.dtype), o.elem, names.output(k)) for k, o in enumerate(plan.outputs)
    )


def cotangents(plan: SpecializationPlan) -> tuple[Cotangent, ...]:
    return tuple(
        Cotangent(k, names.cotangent(k), names.cotangent_strides(k))
        for k, o in enumerate(plan.outputs)
        if o.differentiable and not plan.is_whole(o)
    )


def element_shapes(plan: SpecializationPlan) -> tuple[ElementShape, ...]:
    return tuple(
        ElementShape(i, a.elem, a.slang_type)
        for i, a in enumerate(plan.args)
        if a.row.tensor and any(e > 4 for e in a.elem)
    )


def shaping(plan: SpecializationPlan) -> tuple[list[tuple[int, int]], list[int]]:
    """The leaves that make a call's shape: those whose tensor's leading dimensions take part,
    each with how many, and those whose whole shape does (grids)."""
    leading = [(i, a.call_dims) for i, a in enumerate(plan.args) if a.row.shapes == "leading"]
    whole = [i for i, a in enumerate(plan.args) if a.row.shapes == "whole"]
    return [(i, dims) for i, dims in leading if dims], whole


def _parts(binding: str) -> tuple[str, ...]:
    """The parts of the tensor struct ``binding`` names ("": none)."""
    return KIND[binding].parts if binding else ()


def uniform_value(a: ArgPlan) -> Callable[[Any], Any]:
    """What a kernel binds for the uniform leaf ``a``: a Python scalar converted to its type, or
    a tuple of numbers, each converted, as the list its array of scalars takes (a vector's
    given one number takes it in every component)."""
    convert = SLANG[a.scalar].py_type
    if not a.elem:
        return convert
    count = a.elem[0]

    def components(numbers: Any) -> list[Any]:
        if isinstance(numbers, int | float):
            return [convert(numbers)] * count
        return [convert(x) for x in numbers]

    return components
