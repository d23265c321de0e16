"""Type resolution: (FunctionInfo, call signature) -> SpecializationPlan, plain serializable data.

The plan depends only on the call signature, so it can be built, cached and warmed from a
signature string alone. A change to its fields or their meaning bumps
``toolchain.PLAN_FORMAT``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from itertools import product
from typing import Any, Literal

from ..scalars import SLANG, SLANG_FLOATS
from ..signature_text import (
    SIGNATURE_FORMAT,
    ArgForm,
    CallSignature,
    GridForm,
    ScalarForm,
    TensorForm,
    parse_call_signature,
)
from ..toolchain import PLAN_FORMAT
from .info import FunctionInfo, ParamInfo, TypeInfo

ArgKind = Literal["elementwise", "uniform", "tensor", "grid"]
Binding = Literal["pointer", "value", "index", "Tensor", "RWTensor", "WTensor", "PrimalTensor"]
"""How an argument is bound: a pointer, a uniform value, the call index, or the Slang tensor
struct bound in forward kernels."""
WRITTEN: tuple[Binding, ...] = ("RWTensor", "WTensor")
"""The tensor bindings through which a kernel writes a whole tensor."""

_PY_SCALARS_FOR = {"f": SLANG_FLOATS, "i": (*SLANG_FLOATS, "int", "uint"), "b": ("bool",)}
_PY_NAMES = {"f": "Python float", "i": "Python int", "b": "Python bool"}
_BINDINGS: dict[str, Binding] = {
    "ITensor": "Tensor",
    "IRWTensor": "RWTensor",
    "IWTensor": "WTensor",
}


@dataclass(frozen=True, kw_only=True)
class ArgPlan:
    """How one argument binds to its parameter."""

    param: str
    kind: ArgKind
    slang_type: str
    scalar: str  # Slang element scalar type
    dtype: str = ""  # torch dtype name, "" for uniforms and grids
    width: int = 0  # vector components consumed from the last dimension; 0 for scalars
    rank: int = 0  # rank of the tensor, or grid dimensions
    call_dims: int = 0  # dimensions contributed to the call shape
    broadcast: bool = False  # may be broadcast across the call: its gradient is a sum
    differentiable: bool = False  # differentiable: a DifferentialPair in backward kernels
    grad: bool = False  # receives a gradient in this call (differentiable and requires grad)
    binding: Binding


@dataclass(frozen=True)
class ReturnPlan:
    slang_type: str
    scalar: str
    dtype: str
    width: int
    differentiable: bool


@dataclass(frozen=True)
class SpecializationPlan:
    """Everything code generation and dispatch need to know about one call signature."""

    format: int
    signature_format: int
    signature: str
    module: str
    function: str
    differentiable: bool
    args: tuple[ArgPlan, ...]
    call_rank: int
    returns: ReturnPlan | None
    backward_masks: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SpecializationPlan:
        d = json.loads(text)
        d["args"] = tuple(ArgPlan(**a) for a in d["args"])
        d["returns"] = ReturnPlan(**d["returns"]) if d["returns"] else None
        d["backward_masks"] = tuple(d["backward_masks"])
        return cls(**d)


class _Resolver:
    def __init__(self, info: FunctionInfo) -> None:
        self.info = info

    def fail(self, exc: type[Exception], index: int, param: ParamInfo, expected: str, got: str):
        fn = f"{self.info.module}::{self.info.name}"
        return exc(f"{fn}: argument {index} ('{param.name}'): expected {expected}, got {got}")

    def arg(self, index: int, param: ParamInfo, form: ArgForm) -> ArgPlan:
        t = param.type
        if param.direction != "in":
            raise self.fail(TypeError, index, param, "an 'in' parameter", f"'{param.direction}'")
        if t.kind in ("scalar", "vector"):
            return self.value_arg(index, param, t, form)
        if t.kind == "tensor":
            return self.tensor_arg(index, param, t, form)
        raise self.fail(
            TypeError,
            index,
            param,
            "a scalar, vector or slangpy tensor parameter",
            f"unsupported parameter type {t.name}",
        )

    def value_arg(self, index: int, param: ParamInfo, t: TypeInfo, form: ArgForm) -> ArgPlan:
        diff = self.info.differentiable and not param.no_diff and t.scalar in SLANG_FLOATS
        want = SLANG[t.scalar].dtype
        if isinstance(form, ScalarForm):
            if t.kind == "vector" or t.scalar not in _PY_SCALARS_FOR[form.kind]:
                raise self.fail(TypeError, index, param, _expected_value(t), _PY_NAMES[form.kind])
            return _arg_plan(param, kind="uniform", binding="value", differentiable=diff)
        if isinstance(form, GridForm):
            if t.scalar not in ("int", "uint") or (t.width or 1) != form.rank:
                raise self.fail(
                    TypeError,
                    index,
                    param,
                    _expected_value(t),
                    f"a {form.rank}-D grid (an int{form.rank} index)",
                )
            return _arg_plan(
                param, kind="grid", binding="index", rank=form.rank, call_dims=form.rank
            )
        if form.dtype != want:
            raise self.fail(
                TypeError,
                index,
                param,
                f"a {want} tensor",
                f"a {form.dtype} tensor",
            )
        width = t.width
        if width and (form.rank == 0 or form.extents[-1] != str(width)):
            got = f"shape class {form.extents or '()'}"
            raise self.fail(
                ValueError, index, param, f"a tensor whose last dimension is {width}", got
            )
        call_dims = form.rank - (1 if width else 0)
        broadcast = "1" in form.extents[:call_dims]
        return _arg_plan(
            param,
            kind="elementwise",
            binding="pointer",
            dtype=form.dtype,
            width=width,
            rank=form.rank,
            call_dims=call_dims,
            broadcast=broadcast,
            differentiable=diff,
            grad=diff and form.grad,
        )

    def tensor_arg(self, index: int, param: ParamInfo, t: TypeInfo, form: ArgForm) -> ArgPlan:
        want = SLANG[t.scalar].dtype
        expected = f"a {want} tensor of rank {t.dims} for {t.name}"
        if not isinstance(form, TensorForm):
            raise self.fail(TypeError, index, param, expected, _describe(form))
        if form.dtype != want or form.rank != t.dims:
            raise self.fail(TypeError, index, param, expected, _describe(form))
        diff = t.interface == "IDiffTensor" and self.info.differentiable and t.scalar == "float"
        if t.interface == "IDiffTensor" and t.scalar != "float":
            raise self.fail(TypeError, index, param, "IDiffTensor<float, D>", t.name)
        binding = "PrimalTensor" if t.interface == "IDiffTensor" else _BINDINGS[t.interface]
        return _arg_plan(
            param,
            kind="tensor",
            binding=binding,
            dtype=form.dtype,
            rank=form.rank,
            differentiable=diff,
            grad=diff and form.grad,
        )


def _arg_plan(param: ParamInfo, *, kind: ArgKind, binding: Binding, **fields: Any) -> ArgPlan:
    """The plan of an argument for ``param``; the fields not given are absent (0, False, "")."""
    t = param.type
    return ArgPlan(
        param=param.name, kind=kind, slang_type=t.name, scalar=t.scalar, binding=binding, **fields
    )


def _expected_value(t: TypeInfo) -> str:
    dtype = SLANG[t.scalar].dtype
    if t.kind == "vector":
        return f"a {dtype} tensor whose last dimension is {t.width} for {t.name}"
    if t.scalar in ("int", "uint"):
        return f"a {dtype} tensor, a Python int or a 1-D grid for {t.name}"
    return f"a {dtype} tensor or a Python scalar for {t.name}"


def _describe(form: ArgForm) -> str:
    if isinstance(form, TensorForm):
        return f"a {form.dtype} tensor of rank {form.rank}"
    if isinstance(form, GridForm):
        return f"a {form.rank}-D grid"
    return _PY_NAMES[form.kind]


def _returns(info: FunctionInfo) -> ReturnPlan | None:
    r = info.returns
    if r.kind == "void":
        return None
    if r.kind not in ("scalar", "vector"):
        raise TypeError(
            f"{info.module}::{info.name}: unsupported return type {r.name}; "
            "expected void, a scalar or a vector"
        )
    diff = info.differentiable and r.scalar in SLANG_FLOATS
    return ReturnPlan(r.name, r.scalar, SLANG[r.scalar].dtype, r.width, diff)


def resolve(info: FunctionInfo, call: CallSignature) -> SpecializationPlan:
    """Resolve every argument of ``call`` against ``info``'s parameters."""
    fn = f"{info.module}::{info.name}"
    if call.function_id != fn:
        raise ValueError(f"call signature is for {call.function_id}, not {fn}")
    if len(call.args) != len(info.params):
        raise TypeError(
            f"{fn}: expected {len(info.params)} arguments "
            f"({', '.join(p.name for p in info.params)}), got {len(call.args)}"
        )
    resolver = _Resolver(info)
    pairs = enumerate(zip(info.params, call.args, strict=True))
    args = tuple(resolver.arg(i, p, f) for i, (p, f) in pairs)
    call_rank = max((a.call_dims for a in args), default=0)
    args = tuple(
        a if a.kind != "elementwise" or a.call_dims == call_rank else replace(a, broadcast=True)
        for a in args
    )
    returns = _returns(info)
    capable = [i for i, a in enumerate(args) if a.differentiable and a.grad]
    masks: list[str] = []
    if returns is not None and returns.differentiable:
        for bits in product("01", repeat=len(capable)):
            if "1" in bits:
                chosen = {c for c, b in zip(capable, bits, strict=True) if b == "1"}
                masks.append("".join("1" if i in chosen else "0" for i in range(len(args))))
    return SpecializationPlan(
        PLAN_FORMAT,
        SIGNATURE_FORMAT,
        call.text,
        info.module,
        info.name,
        info.differentiable,
        args,
        call_rank,
        returns,
        tuple(masks),
    )


def plan_from_signature(info: FunctionInfo, signature: str) -> SpecializationPlan:
    """Build the plan from a call-signature string alone, with no tensors at hand."""
    return resolve(info, parse_call_signature(signature))
