"""Packing a kernel's entry-point uniforms straight into its parameter block.

Binding each uniform through a shader cursor by name costs tens of microseconds per dispatch;
packing them with ``struct`` at the offsets the kernel's own reflected layout gives, and writing
the block once, costs a few. Layouts holding resources (Vulkan's structured buffers) cannot be
packed as bytes and are bound by name instead.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import slangpy as spy

_Kind = spy.TypeReflection.Kind
_Scalar = spy.TypeReflection.ScalarType
_CODES = {
    _Scalar.bool: "?",
    _Scalar.int32: "i",
    _Scalar.uint32: "I",
    _Scalar.int64: "q",
    _Scalar.uint64: "Q",
    _Scalar.float16: "e",
    _Scalar.float32: "f",
    _Scalar.float64: "d",
    _Scalar.int8: "b",
    _Scalar.uint8: "B",
    _Scalar.int16: "h",
    _Scalar.uint16: "H",
}

Writer = Callable[[bytearray, int, Any], None]
Layout = dict[str, Any]
"""A parameter block as plain data: ``{"size": bytes, "params": [[name, offset, type], ...]}``
where a type is ``{"pointer": true}``, ``{"scalar": struct code}``,
``{"array": count, "stride": bytes, "element": type}`` or ``{"struct": [[name, offset, type]]}``.
It is JSON, so a cached kernel's block can be packed without reflecting the kernel again."""


class Unpackable(Exception):
    """The layout holds something that is not plain bytes."""


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


def _writer(t: dict[str, Any]) -> Writer:
    if "pointer" in t:
        return struct.Struct("<Q").pack_into
    if "scalar" in t:
        return struct.Struct("<" + t["scalar"]).pack_into
    if "array" in t:
        count, stride, element = t["array"], t["stride"], t["element"]
        if "scalar" in element and stride == struct.calcsize(element["scalar"]):
            packed = struct.Struct(f"<{count}{element['scalar']}").pack_into
            return lambda buf, off, values: packed(buf, off, *values)
        inner = _writer(element)

        def write_array(buf: bytearray, off: int, values: Any) -> None:
            for k, v in enumerate(values):
                inner(buf, off + k * stride, v)

        return write_array
    fields = [(name, field_off, _writer(ft)) for name, field_off, ft in t["struct"]]

    def write_struct(buf: bytearray, off: int, value: dict[str, Any]) -> None:
        for name, field_off, write in fields:
            write(buf, off + field_off, value[name])

    return write_struct


class UniformBlock:
    """Writes a kernel's entry-point uniforms as one block of bytes."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.size = layout["size"]
        self._params = [(name, off, _writer(t)) for name, off, t in layout["params"]]

    def pack_into(self, buf: Any, kwargs: dict[str, Any]) -> None:
        """Write every uniform into ``buf`` (a writable buffer of at least ``size`` bytes)."""
        for name, off, write in self._params:
            write(buf, off, kwargs[name])

    def pack(self, kwargs: dict[str, Any]) -> np.ndarray:
        buf = bytearray(self.size)
        self.pack_into(buf, kwargs)
        return np.frombuffer(buf, np.uint8)


def uniform_block(kernel: spy.ComputeKernel) -> UniformBlock | None:
    """The kernel's packer, or None when its uniforms must be bound by name."""
    try:
        return UniformBlock(describe(kernel))
    except Unpackable:
        return None
