"""Slang reflection -> FunctionInfo: the plain-data view of a function that resolution needs.

The only part of resolution that needs slangpy; a process whose functions the cache already
describes never imports it."""

from __future__ import annotations

import re

import slangpy as spy

from ..scalars import SLANG, SLANG_NAME_OF_REFLECTED
from .info import TENSOR_INTERFACES, Direction, FunctionInfo, ParamInfo, TypeInfo

_Kind = spy.TypeReflection.Kind
_Scalar = spy.TypeReflection.ScalarType
_SLANG_NAMES = {getattr(_Scalar, name): slang for name, slang in SLANG_NAME_OF_REFLECTED.items()}

_GENERIC_RE = re.compile(r"(\w+)<\s*(\w+)\s*,\s*(\d+)\s*>")


def type_info(t: spy.TypeReflection) -> TypeInfo:
    """Classify one reflected type."""
    full = t.full_name
    if t.kind == _Kind.scalar:
        if t.scalar_type == _Scalar.void:
            return TypeInfo("void", full)
        scalar = _SLANG_NAMES.get(t.scalar_type)
        return TypeInfo("scalar", full, scalar) if scalar else TypeInfo("other", full)
    if t.kind == _Kind.vector:
        scalar = _SLANG_NAMES.get(t.scalar_type)
        if scalar and 2 <= t.col_count <= 4:
            return TypeInfo("vector", full, scalar, t.col_count)
        return TypeInfo("other", full)
    if t.kind == _Kind.interface:
        m = _GENERIC_RE.fullmatch(full)
        if m and m.group(1) in TENSOR_INTERFACES:
            element = m.group(2)
            scalar = element if element in SLANG else ""
            if scalar:
                return TypeInfo("tensor", full, scalar, 0, m.group(1), int(m.group(3)))
    if t.kind == _Kind.none and full == "void":
        return TypeInfo("void", full)
    return TypeInfo("other", full)


def _direction(p: spy.VariableReflection) -> Direction:
    if p.has_modifier(spy.ModifierID.inout):
        return "inout"
    if p.has_modifier(spy.ModifierID.out):
        return "out"
    return "in"


def has_function(module: spy.SlangModule, name: str) -> bool:
    """Whether ``name`` is a function ``module`` can call (its own or one it imports)."""
    return module.layout.find_function_by_name(name) is not None


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
