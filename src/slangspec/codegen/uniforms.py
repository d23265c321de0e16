"""Packing a kernel's entry-point uniforms straight into its parameter block.

Binding each uniform through a shader cursor by name costs tens of microseconds per dispatch;
packing them with one ``struct`` call at the offsets the kernel's own reflected layout gives, and
writing the block once, costs under one. Layouts holding resources (Vulkan's structured buffers)
cannot be packed as bytes and are bound by name instead.

The layout is the generated kernels' entry-point parameters, which the compile path reads from
Slang's reflection and the CUDA launcher packs: it sits here, below both.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import Error
from ..signatures.scalars import STRUCT_CODE_OF_REFLECTED

Packer = Callable[[Any, dict[str, Any]], None]
Layout = dict[str, Any]
"""A parameter block as plain data: ``{"size": bytes, "params": [[name, offset, type], ...]}``
where a type is ``{"pointer": true}``, ``{"scalar": struct code}``,
``{"array": count, "stride": bytes, "element": type}`` or ``{"struct": [[name, offset, type]]}``.
It is JSON, so a cached kernel's block can be packed without reflecting the kernel again."""


class Unpackable(Error):
    """The layout holds something that is not plain bytes."""


_KNOWN_CODES = frozenset(STRUCT_CODE_OF_REFLECTED.values())
MAX_LEAVES = 4096
"""Most scalars and pointers a block may hold: a kernel's uniforms are a few dozen, and a
cached layout past this is refused before its packer is generated."""
MAX_DEPTH = 32
"""Deepest nesting of arrays and structs a block may hold."""


def _count(value: Any, what: str) -> int:
    """``value`` when it is a non-negative int (not a bool); else Unpackable naming ``what``."""
    if type(value) is not int or value < 0:
        raise Unpackable(f"{what} {value!r}: expected a non-negative int")
    return value


def _fields(value: Any, what: str) -> list[tuple[str, int, dict[str, Any]]]:
    """``[[name, offset, type], ...]`` checked for shape: names are strings, offsets counts."""
    if not isinstance(value, list):
        raise Unpackable(f"{what}: expected a list of [name, offset, type]")
    fields = []
    for field in value:
        if not (isinstance(field, list) and len(field) == 3 and isinstance(field[0], str)):
            raise Unpackable(f"{what}: {field!r} is not a [name, offset, type]")
        fields.append((field[0], _count(field[1], f"offset of {field[0]!r}"), field[2]))
    return fields


def _leaf_count(t: Any, depth: int = 0) -> int:
    """Leaves of one layout type, checking its shape as it goes; never walks an array."""
    if not isinstance(t, dict) or depth > MAX_DEPTH:
        raise Unpackable(f"a layout type nested past {MAX_DEPTH} levels or not an object")
    if "pointer" in t:
        return 1
    if "scalar" in t:
        if not isinstance(t["scalar"], str) or t["scalar"] not in _KNOWN_CODES:
            raise Unpackable(f"unknown scalar code {t['scalar']!r}")
        return 1
    if "array" in t:
        count = _count(t["array"], "array count")
        _count(t.get("stride"), "array stride")
        return count * _leaf_count(t.get("element"), depth + 1)
    if "struct" in t:
        return sum(_leaf_count(ft, depth + 1) for _, _, ft in _fields(t["struct"], "struct"))
    raise Unpackable(f"unknown layout type {t!r}")


def _check(layout: Any) -> None:
    """Unpackable unless ``layout`` has the shape ``Layout`` describes, with counts, offsets,
    strides and sizes non-negative ints and at most ``MAX_LEAVES`` leaves in all. Cheap: it
    multiplies array counts instead of walking them."""
    if not isinstance(layout, dict):
        raise Unpackable("a layout is an object")
    _count(layout.get("size"), "block size")
    leaves = 0
    for name, _, t in _fields(layout.get("params"), "params"):
        leaves += _leaf_count(t)
        if leaves > MAX_LEAVES:
            raise Unpackable(f"more than {MAX_LEAVES} leaves by parameter {name!r}")


Path = tuple[str | int, ...]
"""Where a leaf's value sits in the keyword arguments: ``("a0", "_shape", 1)`` is
``kw["a0"]["_shape"][1]``."""


def _leaves(layout: Layout) -> list[tuple[int, str, Path]]:
    """(offset, struct code, path) of every scalar and pointer of a layout ``_check``
    accepted."""
    leaves: list[tuple[int, str, Path]] = []

    def walk(t: dict[str, Any], off: int, path: Path) -> None:
        if "pointer" in t:
            leaves.append((off, "Q", path))
        elif "scalar" in t:
            leaves.append((off, t["scalar"], path))
        elif "array" in t:
            for k in range(t["array"]):
                walk(t["element"], off + k * t["stride"], (*path, k))
        else:
            for name, field_off, ft in t["struct"]:
                walk(ft, off + field_off, (*path, name))

    for name, off, t in layout["params"]:
        walk(t, off, (name,))
    return sorted(leaves)


def packing(layout: Layout) -> tuple[str, list[Path]]:
    """The ``struct`` format that writes a whole block, and the path of each value it packs, in
    order; Unpackable unless the layout is well formed and its fields lie apart in the block."""
    _check(layout)
    fmt, pos, paths = "<", 0, []
    for off, code, path in _leaves(layout):
        if off < pos:
            raise Unpackable(f"overlapping fields at offset {off}")
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += code
        pos = off + struct.calcsize("<" + code)
        paths.append(path)
    if pos > layout["size"]:
        raise Unpackable(f"fields end at {pos}, past the block's {layout['size']} bytes")
    return fmt, paths


def _packer(fmt: str, paths: list[Path]) -> Packer:
    """One function that writes the whole block with a single ``struct`` call.

    Its source holds only ``repr``s of the layout's names and integer indices, so a layout read
    from the cache is data, never code; ``packing`` bounds it first.
    """
    exprs = ["kw" + "".join(f"[{key!r}]" for key in path) for path in paths]
    namespace = {"_pack_into": struct.Struct(fmt).pack_into}
    exec(f"def pack(buf, kw):\n    _pack_into(buf, 0, {', '.join(exprs)})\n", namespace)
    return namespace["pack"]


class UniformBlock:
    """Writes a kernel's entry-point uniforms as one block of bytes."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.size = layout["size"]
        self.format, self.paths = packing(layout)
        self.pack_into: Packer = _packer(self.format, self.paths)
        """``pack_into(buf, kwargs)`` writes every uniform into ``buf`` (at least ``size``
        bytes)."""

    def pack(self, kwargs: dict[str, Any]) -> np.ndarray:
        buf = bytearray(self.size)
        self.pack_into(buf, kwargs)
        return np.frombuffer(buf, np.uint8)
