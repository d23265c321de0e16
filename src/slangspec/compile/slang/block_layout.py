"""A compiled kernel's entry-point parameter block, reflected through slangpy as a ``Layout``."""

from __future__ import annotations

from typing import Any

import slangpy as spy

from ...codegen.uniforms import Layout, UniformBlock, Unpackable
from ...signatures.scalars import STRUCT_CODE_OF_REFLECTED

_Kind = spy.TypeReflection.Kind
_Scalar = spy.TypeReflection.ScalarType
_CODES = {getattr(_Scalar, name): code for name, code in STRUCT_CODE_OF_REFLECTED.items()}


def _describe(layout: spy.TypeLayoutReflection) -> dict[str, Any]:
    kind = layout.kind
    if kind == _Kind.pointer:
        return {"pointer": True}
    if kind == _Kind.scalar:
        code = _CODES.get(layout.type.scalar_type)
        if code is None:
            raise Unpackable(layout.name)
        return {"scalar": code}
    if kind == _Kind.array:
        element = layout.element_type_layout
        count = layout.type.element_count
        stride = layout.size // count if count else element.size
        return {"array": count, "stride": stride, "element": _describe(element)}
    if kind == _Kind.struct:
        return {"struct": [[f.name, f.offset, _describe(f.type_layout)] for f in layout.fields]}
    raise Unpackable(f"{layout.name} ({kind})")


def describe(kernel: spy.ComputeKernel) -> Layout:
    """The entry-point parameter block of ``kernel``; Unpackable when it is not plain bytes."""
    ep = kernel.program.layout.entry_points[0]
    params = [p for p in ep.parameters if p.type_layout.size > 0]
    return {
        "size": max((p.offset + p.type_layout.size for p in params), default=0),
        "params": [[p.name, p.offset, _describe(p.type_layout)] for p in params],
    }


def uniform_block(kernel: spy.ComputeKernel) -> UniformBlock | None:
    """The kernel's packer, or None when its uniforms must be bound by name."""
    try:
        return UniformBlock(describe(kernel))
    except Unpackable:
        return None
