"""Rows of the table of Python values (``values``) for call shapes: ``slangspec.grid`` and
the call shape that ``_result=`` gives a call with generators. Both classes live in
``call_shapes``, which imports torch: the rows name them, and import them only to rebuild
one."""

from __future__ import annotations

import functools
import re
from typing import Any

from .text import GridForm, ResultForm, format_arg, parse_arg
from .value_row import Packing, Unpacking, ValueRow, register, spec_text

_GRID_SPEC = r"grid\[(\d+)\]( strided)?"
_RESULT_SPEC = r"_result\[(\d+)\]"


@functools.cache
def _grid_form(dims: int, strided: bool) -> str:
    return format_arg(GridForm(dims, strided))


class GridRow(ValueRow):
    """``slangspec.grid``: ``grid[Dn]``, or ``grid[Dn,strided]`` given an offset or a stride,
    packed as ``gn`` or ``sn`` (its extents, then its offsets and strides, as ints), spelled
    ``grid[n] [strided]``."""

    python_types = ("slangspec.signatures.call_shapes.grid",)
    letters = "gs"
    forms = (GridForm,)
    spelling = "grid[n] [strided]"
    order = 1

    def form(self, value: Any, grad_on: bool) -> str:
        return _grid_form(len(value.shape), value.strided)

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        packing.ints.extend(value.shape)
        if value.strided:
            packing.ints.extend((*value.offset, *value.stride))
        packing.kinds.append(f"{'s' if value.strided else 'g'}{len(value.shape)}{where}")

    def generates(self, value: Any) -> bool:
        return value.open

    def unpack(self, kind: str, source: Unpacking) -> Any:
        from .call_shapes import grid

        shape = [next(source.ints) for _ in range(int(kind[1:]))]
        if kind[0] == "g":
            return grid(shape)
        offset = [next(source.ints) for _ in shape]
        return grid(shape, offset, [next(source.ints) for _ in shape])

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None:
            return None
        m = re.fullmatch(_GRID_SPEC, text)
        if m:
            return format_arg(GridForm(int(m.group(1)), bool(m.group(2))))
        if text.startswith("grid[D"):
            parse_arg(text)
            return text
        return None


class ResultShapeRow(ValueRow):
    """The call shape ``_result=`` gives a call with generators: ``_result[Dn]``, packed as
    ``rn`` (its extents as ints), spelled ``_result[n]``."""

    python_types = ("slangspec.signatures.call_shapes.result_shape",)
    letters = "r"
    forms = (ResultForm,)
    spelling = "_result[n]"
    order = 5

    def form(self, value: Any, grad_on: bool) -> str:
        return format_arg(ResultForm(len(value.shape)))

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        packing.ints.extend(value.shape)
        packing.kinds.append(f"r{len(value.shape)}{where}")

    def unpack(self, kind: str, source: Unpacking) -> Any:
        from .call_shapes import result_shape

        return result_shape([next(source.ints) for _ in range(int(kind[1:]))])

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None:
            return None
        m = re.fullmatch(_RESULT_SPEC, text)
        if m:
            return format_arg(ResultForm(int(m.group(1))))
        if text.startswith("_result[D"):
            parse_arg(text)
            return text
        return None


register(GridRow())
register(ResultShapeRow())
