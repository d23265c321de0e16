"""The plan of a call signature: ``SpecializationPlan``, plain serializable data.

The plan depends only on the call signature, so it can be built, cached and warmed from a
signature string alone (``resolve`` builds it). A change to its fields or their meaning bumps
``formats.PLAN_FORMAT``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict

from ..define import frozen
from ..signatures.function_ref import parse_function_ref
from ..signatures.scalars import SLANG
from ..signatures.text import argument_label
from .info import Direction, FunctionInfo, TypeInfo
from .kinds import LEAF_KIND, ArgKind, Kind, LeafBinding, declared_kind

KERNEL_LOCAL = re.compile(r"_\w*|[adghpsvw][0-9]+(_\w+)?")
"""The names a generated kernel gives its parameters and locals (``a0``, ``a0_st``, ``v1_o``,
``g2_copy``, ``h0_3``, ``_d``, ``_idx``): a function named so is called through ``_CONCRETE``,
as the kernel's own ``v2`` would hide a function ``v2``; codegen names a type so by an alias."""

RESULT = -1
"""The ``source`` of an output that is the function's result."""


@frozen(kw_only=True)
class ArgPlan:
    """How one leaf of the arguments binds: a whole argument, or one field of a struct argument
    (fed by a dict), at ``path`` within parameter ``index``."""

    param: str  # the parameter's name, with the field path of a struct's leaf: "p.b"
    index: int  # the parameter's position
    path: tuple[str, ...] = ()
    arrays: tuple[tuple[int, ...], ...] = ()
    """Per step of ``path``, the extents of the arrays of structs the step is taken in, () where
    there are none: ``((4,),)`` for field ``center`` of a ``Sphere[4]``, where every sphere's
    ``center`` is the leaf's (its ``elem`` starts with those extents where it is a tensor's)."""
    kind: ArgKind
    slang_type: str
    scalar: str  # Slang element scalar type
    dtype: str = ""  # torch dtype name, "" for uniforms and grids
    elem: tuple[int, ...] = ()  # element shape consumed from the trailing dimensions
    rank: int = 0  # rank of the tensor, or grid dimensions
    call_dims: int = 0  # dimensions contributed to the call shape
    broadcast: bool = False  # calls share its elements (``sharing``): its gradient is a sum
    differentiable: bool = False  # differentiable: a DifferentialPair in backward kernels
    grad: bool = False  # receives a gradient in this call (differentiable and requires grad)
    binding: LeafBinding
    direction: Direction = "in"

    @property
    def row(self) -> Kind:
        """The kind of argument the leaf is: its row of ``kinds.KINDS``."""
        return LEAF_KIND[self.kind, self.binding]


@frozen
class ParamPlan:
    """One parameter: its leaves are ``SpecializationPlan.args[first:first + count]``."""

    name: str
    slang_type: str
    direction: Direction
    struct: bool  # fed by a dict, one leaf per field
    differentiable: bool  # passed as a differential pair (or its differential) in backward
    first: int
    count: int
    interface: str = ""  # the interface it is declared as ("" for none): slang_type is a struct
    view: bool = False
    """An array (or a struct of arrays) the kernel passes to the function's twin as a view
    that reads one element at a time and adds each read's gradient in place
    (``FunctionInfo.viewed``)."""


@frozen
class OutputPlan:
    """One tensor the call produces: the result (``source`` RESULT), an ``out``/``inout``
    parameter, at ``path`` within a struct, or a whole ``IWDiffTensor``/``WDiffTensor`` argument
    (written into a copy of itself, of its own shape); ``leaf`` is the argument leaf it is
    copied into (-1 for the result)."""

    name: str
    source: int
    path: tuple[str, ...]
    leaf: int
    slang_type: str
    scalar: str
    dtype: str
    elem: tuple[int, ...]
    differentiable: bool


@frozen
class SpecializationPlan:
    """Everything code generation and dispatch need to know about one call signature."""

    format: int
    signature_format: int
    signature: str
    module: str
    function: str
    overload: str  # the declaration of the overload the call resolved to (FunctionInfo's)
    differentiable: bool
    params: tuple[ParamPlan, ...]
    args: tuple[ArgPlan, ...]
    call_rank: int
    result: str  # the result's Slang type, "" for void
    result_struct: bool  # the result is a struct: it comes back as a dict
    outputs: tuple[OutputPlan, ...]
    backward_masks: tuple[str, ...]
    call_ids: bool = False  # kernels set slangpy's call index (FunctionInfo.call_ids)

    @property
    def returns(self) -> OutputPlan | None:
        """The one output of a function that returns a value and writes no parameter."""
        if len(self.outputs) == 1 and self.outputs[0].source == RESULT and not self.result_struct:
            return self.outputs[0]
        return None

    def accumulates(self, a: ArgPlan) -> bool:
        """Whether a backward kernel adds elementwise leaf ``a``'s gradient into storage of
        the argument's own shape, where calls sharing an element sum their parts: a float or
        double leaf broadcast over the call (an extent of 1, or fewer dimensions than the
        call, where another argument's extent is past 1). A half one's parts are stored per
        call, then summed."""
        return a.broadcast and a.kind == "elementwise" and a.scalar in ("float", "double")

    @property
    def wrapped(self) -> bool:
        """Whether a kernel calls the function through ``_CONCRETE``: a method, a function
        with interface parameters, or one whose name a kernel's own locals would hide."""
        ref = parse_function_ref(self.function)
        hidden = KERNEL_LOCAL.fullmatch(ref.name) is not None
        return ref.owner is not None or hidden or any(p.interface for p in self.params)

    def sums_per_warp(self, j: int) -> bool:
        """Whether a backward kernel that computes whole-tensor leaf ``j``'s gradient passes it
        as an ``IDiffTensor<float, D>`` that adds the parts of a warp's calls once
        (``codegen.slang_helpers.WAVE_TENSOR``), into the copy of the gradient the call's number
        picks: a tensor every call reads in full. Not inside a struct or through ``_CONCRETE``,
        which declare the parameter's own type."""
        a = self.args[j]
        return (
            a.kind == "tensor"
            and not a.call_dims
            and a.row.sums_per_warp
            and a.scalar == "float"
            and not a.elem
            and not a.path
            and not self.wrapped
        )

    def is_whole(self, out: OutputPlan) -> bool:
        """Whether ``out`` is a whole tensor the kernel writes through its tensor parameter,
        not an output stored per call point."""
        return out.leaf >= 0 and self.args[out.leaf].kind == "tensor"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SpecializationPlan:
        d = json.loads(text)
        d["params"] = tuple(ParamPlan(**p) for p in d["params"])
        d["args"] = tuple(
            ArgPlan(
                **{
                    **a,
                    "path": tuple(a["path"]),
                    "arrays": tuple(tuple(e) for e in a["arrays"]),
                    "elem": tuple(a["elem"]),
                }
            )
            for a in d["args"]
        )
        d["outputs"] = tuple(
            OutputPlan(**{**o, "path": tuple(o["path"]), "elem": tuple(o["elem"])})
            for o in d["outputs"]
        )
        d["backward_masks"] = tuple(d["backward_masks"])
        return cls(**d)


def output_routes(info: FunctionInfo) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Where each output of a call goes, in the order ``SpecializationPlan.outputs`` lists them:
    the result (``RESULT``) or a parameter's index, and the field path within it. Known from
    the function alone, whatever the call."""
    routes: list[tuple[int, tuple[str, ...]]] = []
    if info.returns.kind != "void":
        routes += [(RESULT, path) for path in _leaf_paths(info.returns, ())]
    for k, p in enumerate(info.params):
        row = declared_kind(p.type)
        if row is not None and row.writes == "output":
            routes.append((k, ()))
        if p.direction != "in":
            routes += [(k, path) for path in _leaf_paths(p.type, ())]
    return tuple(routes)


def _leaf_paths(t: TypeInfo, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    if t.kind != "struct":
        return [path]
    return [q for f in t.fields for q in _leaf_paths(f.type, (*path, f.name))]


def device_problem(plan: SpecializationPlan, device: str) -> str | None:
    """Why ``device`` cannot compute ``plan`` right: the first leaf or output whose scalar type
    it does not compute; None when it can."""
    fn = f"{plan.module}::{plan.function}"
    typed = [(argument_label(a.index, a.param), a.scalar) for a in plan.args]
    typed += [("the result", o.scalar) for o in plan.outputs if o.source == RESULT]
    for what, scalar in typed:
        row = SLANG.get(scalar)
        if row is not None and device not in row.devices:
            return (
                f"{fn}: {what}: {scalar} is computed on {' and '.join(row.devices)} only, not "
                f"on {device}: {row.elsewhere}"
            )
    return None
