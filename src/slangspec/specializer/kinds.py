"""Argument kinds: the one table of how each kind of argument binds to its Slang parameter, and
what that means for resolution, code generation, dispatch, autograd and traced calls.

A row is a kind the code tells apart. Most are leaf kinds: every leaf of a plan
(``plan.ArgPlan``) is of exactly one, found by its ``kind`` and ``binding``
(``ArgPlan.row``). The others (``leaf`` None) are parameters made of other rows' leaves: a
struct of its fields', an interface of the struct a call names, a generic parameter of the
scalar a call infers. Plain data, free of torch and slangpy, like ``signatures.scalars``.
"""

from __future__ import annotations

from typing import Literal, cast

from ..define import frozen
from ..signatures.generators import GENERATOR
from .info import Direction, TypeInfo

ArgKind = Literal["elementwise", "uniform", "tensor", "grid", "generator", "target"]
"""How a leaf takes part in a call: an element per call point, one value for the whole call,
a whole tensor, the call index, a value the kernel makes per thread (its binding names the
generator), or (``target``) a tensor an ``out`` parameter is written into, which only shapes
the call."""
LeafBinding = Literal[
    "pointer",
    "value",
    "index",
    "strided_index",
    "none",
    "call_id",
    "thread_id",
    "wang_hash",
    "rand_float",
    "Tensor",
    "RWTensor",
    "WTensor",
    "AtomicTensor",
    "PrimalTensor",
    "DiffTensor",
    "WPrimalTensor",
    "WDiffTensor",
]
"""How a leaf is bound: a pointer, a uniform value, the call index (offset and strided by
uniforms), not at all, a generator's uniforms, or the Slang tensor struct bound in forward
kernels."""
Writes = Literal["", "itself", "output"]
"""What a call writes of a tensor passed for a kind: nothing; the tensor itself, which the
kernel writes in place; or its value, an output of the call that is then copied into it
through autograd."""
Shapes = Literal["", "leading", "whole"]
"""How a leaf takes part in the call shape: not at all, by its tensor's leading (call)
dimensions, or by its whole shape."""

_ALL: tuple[Direction, ...] = ("in", "out", "inout")


@frozen
class Kind:
    """One kind of argument."""

    name: str
    names: tuple[str, ...]
    """What a parameter of the kind is declared as: a slangpy tensor type's names (interface
    and struct), a generator's function, or the ``TypeInfo`` kinds it binds."""
    leaf: ArgKind | None
    binding: LeafBinding | None = None
    directions: tuple[Direction, ...] = ("in",)
    tensor: bool = False  # a torch tensor is passed for it, on the call's device
    reads: bool = False  # the kernels read that tensor: it is an input of the autograd node
    writes: Writes = ""
    shapes: Shapes = ""
    words: bool = False  # binds uniform words: a strided grid's, a generator's values
    differentiable: bool = False
    """A derivative can flow through a leaf of it, where its scalar is a float (a struct's
    leaves: where it conforms to ``IDifferentiable``)."""
    grad_binding: str = ""
    """How a backward kernel that computes its gradient binds it: ``pointer``, a differential
    pair whose derivative is stored per call point; a tensor struct, with the gradient in its
    parts. "" where it has no gradient of its own."""
    backward_binding: str = ""
    """How every other backward kernel binds it, where not as forward kernels do: a tensor the
    call writes, whose cotangent backward kernels read."""
    parts: tuple[str, ...] = ()
    """The fields of its Slang struct that are tensors of their own: the primal, and the
    gradient the kernel writes (``_grad_out``) or reads (``_grad_in``); () for one tensor."""
    sums_per_warp: bool = False
    """A whole tensor of it (``float`` elements) whose gradient a backward kernel adds once per
    warp and element where the warp's calls read one (``codegen.kernels``' wave tensor)."""
    in_struct: bool = True  # may be a field of a struct
    in_struct_array: bool = True  # may be a field of an array of structs


def _tensor(
    name: str, names: tuple[str, ...], *, writes: Writes = "", diff: bool = False, **more
) -> Kind:
    """A slangpy tensor type, bound whole."""
    return Kind(
        name,
        names,
        "tensor",
        cast(LeafBinding, name),
        tensor=True,
        reads=writes != "output",
        writes=writes,
        shapes="leading",
        differentiable=diff,
        in_struct=not writes,
        in_struct_array=False,
        **more,
    )


def _generator(name: str) -> Kind:
    return Kind(
        name,
        (name,),
        "generator",
        cast(LeafBinding, name),
        words=bool(GENERATOR[name].words),
    )


_VALUES = ("scalar", "vector", "matrix", "array")
_INDICES = ("scalar", "vector", "array")
_PAIR_OUT = ("_primal", "_grad_out")
_PAIR_IN = ("_primal", "_grad_in")

KINDS: tuple[Kind, ...] = (
    Kind(
        "element",
        _VALUES,
        "elementwise",
        "pointer",
        _ALL,
        tensor=True,
        reads=True,
        shapes="leading",
        differentiable=True,
        grad_binding="pointer",
    ),
    Kind("uniform", _INDICES, "uniform", "value", differentiable=True),
    Kind("grid", _INDICES, "grid", "index", shapes="whole"),
    Kind("strided grid", _INDICES, "grid", "strided_index", shapes="whole", words=True),
    Kind("result shape", ("_result",), "grid", "none", shapes="whole"),
    Kind(
        "out", _VALUES, "target", "none", ("out",), tensor=True, writes="output", shapes="leading"
    ),
    *(_generator(name) for name in GENERATOR),
    _tensor("Tensor", ("ITensor", "Tensor")),
    _tensor("RWTensor", ("IRWTensor", "RWTensor"), writes="itself"),
    _tensor("WTensor", ("IWTensor", "WTensor"), writes="itself"),
    _tensor("AtomicTensor", ("AtomicTensor",), writes="itself"),
    _tensor(
        "PrimalTensor", ("IDiffTensor",), diff=True, grad_binding="DiffTensor", sums_per_warp=True
    ),
    _tensor("DiffTensor", ("DiffTensor",), diff=True, grad_binding="DiffTensor", parts=_PAIR_OUT),
    _tensor(
        "WPrimalTensor",
        ("IWDiffTensor",),
        writes="output",
        diff=True,
        backward_binding="WDiffTensor",
    ),
    _tensor(
        "WDiffTensor",
        ("WDiffTensor",),
        writes="output",
        diff=True,
        backward_binding="WDiffTensor",
        parts=_PAIR_IN,
    ),
    Kind("struct", ("struct",), None, directions=_ALL),
    Kind("array of structs", ("struct",), None),
    Kind("interface", ("interface",), None, in_struct=False),
    Kind("generic", ("generic",), None, directions=_ALL),
)

KIND: dict[str, Kind] = {k.name: k for k in KINDS}
"""The rows by name; a tensor struct's row by the binding named after it."""
LEAF_KIND: dict[tuple[str, str], Kind] = {(k.leaf, k.binding): k for k in KINDS if k.leaf}
"""The leaf rows, by a leaf's ``kind`` and ``binding``."""
TENSOR_KIND: dict[str, Kind] = {n: k for k in KINDS if k.leaf == "tensor" for n in k.names}
"""The slangpy tensor types, interfaces and concrete structs alike, by name."""
TENSOR_TYPES = tuple(TENSOR_KIND)
UNBOUND_TENSORS: dict[str, str] = {
    "PrimalTensor": "IDiffTensor<T, D> (or ITensor<T, D>), which binds a tensor as one",
    "WPrimalTensor": "IWDiffTensor<T, D> (or IWTensor<T, D>), which binds a tensor as one",
    "RWPrimalTensor": "IRWTensor<T, D>",
    "IRWDiffTensor": "an IDiffTensor<T, D> to read and an IWDiffTensor<T, D> to write",
    "RWDiffTensor": "an IDiffTensor<T, D> to read and an IWDiffTensor<T, D> to write",
}
"""slangpy's tensor types no row binds, by name: what to declare instead."""
UNBOUND_BUFFERS: dict[str, str] = {
    "StructuredBuffer": "ITensor<T, 1> (or Tensor<T, 1>), which a torch tensor binds",
    "RWStructuredBuffer": "IRWTensor<T, 1> (or RWTensor<T, 1>), which a torch tensor binds",
    "ByteAddressBuffer": "ITensor<uint, 1> over the words",
    "RWByteAddressBuffer": "IRWTensor<uint, 1> over the words",
}
"""Slang's buffer types, which slangspec does not bind, by name: what to declare instead."""
VALUE_KINDS = KIND["element"].names
"""Kinds whose values are a scalar type over an element shape: one element per call point."""


def declared_kind(t: TypeInfo) -> Kind | None:
    """The row a parameter of type ``t`` is of by its declaration alone: a tensor type's, or
    one made of other rows' leaves; None for a value type, whose row the value a call passes
    decides (a tensor, a Python scalar, a grid, a generator)."""
    if t.kind == "tensor":
        return TENSOR_KIND[t.interface]
    if t.kind == "struct":
        return KIND["array of structs" if t.shape else "struct"]
    return KIND.get(t.kind)
