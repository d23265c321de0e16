"""Slang reflection -> FunctionInfo: the plain-data view of a function that resolution needs.

The only part of resolution that needs slangpy; a process whose functions the cache already
describes never imports it."""

from __future__ import annotations

import re

import slangpy as spy

from ..scalars import SLANG, SLANG_NAME_OF_REFLECTED
from .info import (
    TENSOR_TYPES,
    VALUE_KINDS,
    Direction,
    FieldInfo,
    FunctionInfo,
    ParamInfo,
    TypeInfo,
)

_Kind = spy.TypeReflection.Kind
_Scalar = spy.TypeReflection.ScalarType
_SLANG_NAMES = {getattr(_Scalar, name): slang for name, slang in SLANG_NAME_OF_REFLECTED.items()}

_GENERIC_RE = re.compile(r"(\w+)<\s*(\w+)\s*,\s*(\d+)\s*>")


def type_info(t: spy.TypeReflection, layout: spy.ProgramLayout, depth: int = 0) -> TypeInfo:
    """Classify one reflected type of ``layout``."""
    full = t.full_name
    kind = t.kind
    if kind == _Kind.scalar:
        if t.scalar_type == _Scalar.void:
            return TypeInfo("void", full)
        scalar = _SLANG_NAMES.get(t.scalar_type)
        return TypeInfo("scalar", full, scalar) if scalar else TypeInfo("other", full)
    if kind == _Kind.vector:
        scalar = _SLANG_NAMES.get(t.scalar_type)
        cols = _count(t, "col_count")
        if scalar and 1 <= cols <= 4:
            return TypeInfo("vector", full, scalar, (cols,))
        return TypeInfo("other", full)
    if kind == _Kind.matrix:
        scalar = _SLANG_NAMES.get(t.scalar_type)
        rows, cols = _count(t, "row_count"), _count(t, "col_count")
        if scalar and 1 <= rows <= 4 and 1 <= cols <= 4:
            return TypeInfo("matrix", full, scalar, (rows, cols))
        return TypeInfo("other", full)
    if kind == _Kind.array:
        element = type_info(t.element_type, layout, depth + 1)
        count = _count(t, "element_count")
        if element.kind in VALUE_KINDS and count > 0:
            return TypeInfo("array", full, element.scalar, (count, *element.shape))
        return TypeInfo("other", full)
    m = _GENERIC_RE.fullmatch(full)
    if m and m.group(1) in TENSOR_TYPES and kind in (_Kind.interface, _Kind.struct):
        element = m.group(2)
        if element in SLANG:
            return TypeInfo("tensor", full, element, (), m.group(1), int(m.group(3)))
        return TypeInfo("other", full)
    if kind == _Kind.struct and depth < 8:
        fields = tuple(FieldInfo(f.name, type_info(f.type, layout, depth + 1)) for f in t.fields)
        differentiable = _differentiable(layout, t)
        return TypeInfo("struct", full, fields=fields, differentiable=differentiable)
    if kind == _Kind.none and full == "void":
        return TypeInfo("void", full)
    if kind == _Kind.none and full.isidentifier():
        return TypeInfo("generic", full)
    return TypeInfo("other", full)


def _count(t: spy.TypeReflection, field: str) -> int:
    """An extent of ``t``; 0 where a generic parameter (``vector<float, N>``) leaves it open,
    which slangpy reports by raising."""
    try:
        return int(getattr(t, field))
    except (SystemError, RuntimeError, TypeError, ValueError):
        return 0


def _differentiable(layout: spy.ProgramLayout, t: spy.TypeReflection) -> bool:
    interface = layout.find_type_by_name("IDifferentiable")
    return interface is not None and bool(layout.is_sub_type(t, interface))


def _direction(p: spy.VariableReflection) -> Direction:
    if p.has_modifier(spy.ModifierID.inout):
        return "inout"
    if p.has_modifier(spy.ModifierID.out):
        return "out"
    return "in"


def function_names(module: spy.SlangModule) -> list[str]:
    """The functions ``module`` itself declares, generic ones aside (Slang's declaration
    reflection does not name those), sorted."""
    func = spy.DeclReflection.Kind.func
    return sorted({d.name for d in module.module_decl.children if d.kind == func})


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
        ParamInfo(
            p.name,
            type_info(p.type, module.layout),
            p.has_modifier(spy.ModifierID.nodiff),
            _direction(p),
        )
        for p in f.parameters
    )
    return FunctionInfo(
        module_name,
        name,
        f.has_modifier(spy.ModifierID.differentiable),
        params,
        type_info(f.return_type, module.layout),
    )
