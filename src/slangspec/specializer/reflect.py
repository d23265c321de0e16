"""Slang reflection -> FunctionInfo: the plain-data view of a function that resolution needs."""

from __future__ import annotations

import re
from dataclasses import dataclass

import slangpy as spy

_Kind = spy.TypeReflection.Kind
_Scalar = spy.TypeReflection.ScalarType

SCALAR_NAMES = {
    _Scalar.float16: "half",
    _Scalar.float32: "float",
    _Scalar.float64: "double",
    _Scalar.int32: "int",
    _Scalar.uint32: "uint",
    _Scalar.bool: "bool",
}
TENSOR_INTERFACES = ("ITensor", "IRWTensor", "IWTensor", "IDiffTensor")
_GENERIC_RE = re.compile(r"(\w+)<\s*(\w+)\s*,\s*(\d+)\s*>")


@dataclass(frozen=True)
class TypeInfo:
    """A parameter or return type: ``kind`` is scalar, vector, tensor, void or other."""

    kind: str
    name: str
    scalar: str = ""
    width: int = 0
    interface: str = ""
    dims: int = 0


@dataclass(frozen=True)
class ParamInfo:
    name: str
    type: TypeInfo
    no_diff: bool
    direction: str  # "in", "out" or "inout"


@dataclass(frozen=True)
class FunctionInfo:
    module: str
    name: str
    differentiable: bool
    params: tuple[ParamInfo, ...]
    returns: TypeInfo


def type_info(t: spy.TypeReflection) -> TypeInfo:
    """Classify one reflected type."""
    full = t.full_name
    if t.kind == _Kind.scalar:
        if t.scalar_type == _Scalar.void:
            return TypeInfo("void", full)
        scalar = SCALAR_NAMES.get(t.scalar_type)
        return TypeInfo("scalar", full, scalar) if scalar else TypeInfo("other", full)
    if t.kind == _Kind.vector:
        scalar = SCALAR_NAMES.get(t.scalar_type)
        if scalar and 2 <= t.col_count <= 4:
            return TypeInfo("vector", full, scalar, t.col_count)
        return TypeInfo("other", full)
    if t.kind == _Kind.interface:
        m = _GENERIC_RE.fullmatch(full)
        if m and m.group(1) in TENSOR_INTERFACES:
            element = m.group(2)
            scalar = element if element in SCALAR_NAMES.values() else ""
            if scalar:
                return TypeInfo("tensor", full, scalar, 0, m.group(1), int(m.group(3)))
    if t.kind == _Kind.none and full == "void":
        return TypeInfo("void", full)
    return TypeInfo("other", full)


def _direction(p: spy.VariableReflection) -> str:
    if p.has_modifier(spy.ModifierID.inout):
        return "inout"
    if p.has_modifier(spy.ModifierID.out):
        return "out"
    return "in"


def function_info(module: spy.SlangModule, module_name: str, name: str) -> FunctionInfo | None:
    """Reflect ``name`` in ``module``; None when the module has no such function."""
    f = module.layout.find_function_by_name(name)
    if f is None:
        return None
    if f.is_overloaded:
        raise TypeError(
            f"{module_name}::{name} is overloaded; slangspec calls only functions with one overload"
        )
    params = tuple(
        ParamInfo(p.name, type_info(p.type), p.has_modifier(spy.ModifierID.nodiff), _direction(p))
        for p in f.parameters
    )
    return FunctionInfo(
        module_name,
        name,
        f.has_modifier(spy.ModifierID.differentiable),
        params,
        type_info(f.return_type),
    )
