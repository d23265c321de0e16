"""Rows of the table of Python values (``values``) for Python numbers: a bool, an int, a
float, and a tuple or list of them (a vector or array); nested ones are bound as the numpy
array of them."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .text import NumbersForm, ScalarForm, format_arg, parse_arg
from .value_row import Packing, Unpacking, ValueRow, register, row_of, spec_text, untraceable
from .value_struct import DictRow
from .value_tensor import NumpyRow

_NUMBERS_SPEC = re.compile(r"(float|int|bool)\[([1-9]\d*)\]")
"""A tuple of Python numbers: ``float[3]`` is three floats (a ``float3`` or ``float[3]``)."""


class NumberRow(ValueRow):
    """A Python number: its form, its packed kind and its ``ScalarForm`` kind are one letter;
    a manifest spells it by its Python type's name."""

    word: ClassVar[str]

    def form(self, value: Any, grad_on: bool) -> str:
        return self.letters

    def number(self, value: Any, packing: Packing) -> str:
        """``value`` appended to ``packing``'s numbers; its letter."""
        packing.ints.append(int(value))
        return self.letters

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        packing.kinds.append(self.number(value, packing) + where)

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return next(source.ints)

    def read_spec(self, spec: Any) -> str | None:
        return format_arg(ScalarForm(self.letters)) if spec_text(spec) == self.word else None


class FloatRow(NumberRow):
    python_types = (float,)
    letters = "f"
    word = spelling = "float"
    order = 2.0

    def number(self, value: Any, packing: Packing) -> str:
        packing.floats.append(value)
        return "f"

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return next(source.floats)


class IntRow(NumberRow):
    python_types = (int,)
    letters = "i"
    word = spelling = "int"
    order = 2.1


class BoolRow(NumberRow):
    python_types = (bool,)
    letters = "b"
    word = spelling = "bool"
    order = 2.2

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return bool(next(source.ints))


def numbers_kind(value: tuple[Any, ...] | list[Any]) -> str:
    """The kind the numbers of a tuple or list take together, as its form writes it;
    TypeError for one that holds anything but Python numbers, or mixes bools with others."""
    what = type(value).__name__
    if not value:
        raise TypeError(f"cannot pass an empty {what}; expected the numbers of a vector or array")
    kinds = set()
    for x in value:
        row = row_of(x)
        if isinstance(row, NumbersRow):
            kinds.add(numbers_kind(x))
            continue
        if isinstance(row, DictRow):
            raise TypeError(
                f"cannot pass a {what} of dicts; expected, for a struct or an array of structs, "
                "one dict of its fields, each field a tensor with a leading dimension over the "
                f"{what}'s elements (torch.stack them)"
            )
        if not isinstance(row, NumberRow):
            raise TypeError(
                f"cannot pass a {what} holding a value of type {type(x).__name__}; expected "
                "Python floats, ints or bools"
            )
        kinds.add(row.letters)
    if "b" in kinds and len(kinds) > 1:
        raise TypeError(f"cannot pass a {what} mixing bools and numbers; expected one or the other")
    return "f" if "f" in kinds else kinds.pop()


def nested(value: tuple[Any, ...] | list[Any]) -> bool:
    """Whether a tuple or list holds tuples or lists (an array of vectors, a matrix)."""
    return any(isinstance(x, (tuple, list)) for x in value)


_DTYPES = {"f": "float32", "i": "int32", "b": "bool"}


def as_array(value: tuple[Any, ...] | list[Any], kind: str) -> Any:
    """A nested tuple or list as the numpy array a call binds it as: float32 where it holds a
    float, else int32 (bool for bools); TypeError for a ragged one."""
    import numpy as np

    try:
        return np.array(value, dtype=_DTYPES[kind])
    except ValueError:
        what = type(value).__name__
        raise TypeError(
            f"cannot pass a ragged nested {what}; expected {what}s of one length at each level, "
            "as a tensor's rows are"
        ) from None


class NumbersRow(ValueRow):
    """A tuple or list of Python numbers: ``(kn)``, packed as their letters in parentheses,
    ``(fif)``, spelled ``float[n]``. A nested one (rows of numbers) is bound as the numpy array
    of it (``as_array``): its form is that array's, and it is not packed."""

    python_types = (tuple, list)
    letters = "("
    forms = (NumbersForm,)
    spelling = "float[n], int[n], bool[n] (a tuple of n numbers)"
    order = 3

    def form(self, value: Any, grad_on: bool) -> str:
        kind = numbers_kind(value)
        if nested(value):
            return _NUMPY.form(as_array(value, kind), grad_on)
        return format_arg(NumbersForm(kind, len(value)))

    def to_torch(self, value: Any, device: Any) -> Any:
        if nested(value):
            return _NUMPY.to_torch(as_array(value, numbers_kind(value)), device)
        return value

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        rows = [row for row in map(row_of, value) if isinstance(row, NumberRow)]
        if len(rows) != len(value):
            raise untraceable(value)
        numbers = "".join(row.number(x, packing) for row, x in zip(rows, value, strict=True))
        packing.kinds.append(f"({numbers}){where}")

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return tuple(source.value(letter) for letter in kind[1:-1])

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None:
            return None
        m = _NUMBERS_SPEC.fullmatch(text)
        if m:
            letter = {"float": "f", "int": "i", "bool": "b"}[m.group(1)]
            return format_arg(NumbersForm(letter, int(m.group(2))))
        if text.startswith("("):
            parse_arg(text)
            return text
        return None


register(FloatRow())
register(IntRow())
register(BoolRow())
_NUMPY = NumpyRow()

register(NumbersRow())
