"""The row of the table of Python values (``values``) for slangpy's vectors (``slangpy.float3``,
``slangpy.int2``, ``slangpy.uint4``, ``slangpy.bool3``, ...): an eager call takes one as it
takes the tuple of its components. torch.compile cannot read one (slangpy's classes are not
Python's): there a call refuses it, naming the tuple to pass instead.

The classes are named, not imported: a process that never meets one never imports slangpy."""

from __future__ import annotations

from typing import Any

from .text import NumbersForm, format_arg
from .value_row import Packing, ValueRow, register

_LETTERS = {"float": "f", "int": "i", "uint": "i", "bool": "b"}
"""A vector class's element type, by the prefix of its name, as a tuple's numbers form it."""


def _letter(value: Any) -> str:
    return _LETTERS[type(value).__name__.rstrip("1234")]


def components(value: Any) -> tuple[Any, ...]:
    """The vector's components as Python numbers."""
    return tuple(value[i] for i in range(len(value)))


class SlangpyVectorRow(ValueRow):
    """A slangpy vector: its form is that of the tuple of its components (``float[3]`` for a
    ``float3``), and a call binds that tuple; a manifest spells it as that tuple does."""

    python_types = tuple(f"slangpy.math.{prefix}{n}" for prefix in _LETTERS for n in range(1, 5))

    def form(self, value: Any, grad_on: bool) -> str:
        return format_arg(NumbersForm(_letter(value), len(value)))

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        name = type(value).__name__
        raise TypeError(
            f"argument {packing.index + 1}: cannot pass a slangpy.{name} in code torch compiles, "
            f"which cannot read slangpy's classes; pass the tuple of its components instead, "
            f"as tuple(v) gives them"
        )

    def to_torch(self, value: Any, device: Any) -> Any:
        return components(value)


register(SlangpyVectorRow())
