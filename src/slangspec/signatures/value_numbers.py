"""Rows of the table of Python values (``values``) for Python numbers: a bool, an int, a
float, and a tuple or list of them (a vector or array); nested ones are bound as the numpy
array of them. A tuple or list of dicts (structs: an array's elements, or one struct per call)
is bound as one dict, each field the dicts' values stacked along a new first dimension."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .text import TYPE_KEY, NumbersForm, ScalarForm, format_arg, parse_arg
from .value_row import (
    Packing,
    Unpacking,
    ValueRow,
    register,
    row_of,
    spec_text,
    tensors_of,
    untraceable,
)
from .value_struct import DictRow
from .value_tensor import NumpyRow, TensorRow

_NUMBERS_SPEC = r"(float|int|bool)\[([1-9]\d*)\]"
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
            raise TypeError(f"cannot pass a {what} mixing dicts with other values")
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


def of_dicts(value: tuple[Any, ...] | list[Any]) -> bool:
    """Whether a tuple or list is of dicts (structs)."""
    return len(value) > 0 and isinstance(value[0], dict)


def stacked(value: tuple[Any, ...] | list[Any]) -> dict[str, Any]:
    """A tuple or list of dicts as the one dict a call binds: each field the dicts' values of
    it stacked along a new first dimension (tensors by ``torch.stack``, numbers as the numpy
    array of them, nested dicts field by field); TypeError or ValueError, naming the field,
    where the dicts differ in their fields, their struct or a field's kind or shape."""
    what = type(value).__name__
    if not all(isinstance(x, dict) for x in value):
        raise TypeError(f"cannot pass a {what} mixing dicts with other values")
    fields = list(value[0])
    for other in value[1:]:
        if set(other) != set(fields):
            raise TypeError(
                f"cannot pass a {what} of dicts with different fields ({sorted(fields)} and "
                f"{sorted(other)}); expected the fields of one struct in each"
            )
    out = {}
    for key in fields:
        try:
            out[key] = _stacked_field(key, [x[key] for x in value], what)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"field {key!r}: {exc}") from None
    return out


def _stacked_field(key: str, items: list[Any], what: str) -> Any:
    first = items[0]
    if key == TYPE_KEY:
        if any(x != first for x in items):
            raise TypeError(f"the dicts of a {what} name different structs; expected one")
        return first
    row = row_of(first)
    for x in items:
        if type(row_of(x)) is not type(row):
            names = f"{type(first).__name__} and {type(x).__name__}"
            raise TypeError(f"expected one kind of value in every dict, got {names}")
    if isinstance(row, DictRow):
        return stacked(items)
    if isinstance(row, (NumberRow, NumbersRow)):
        return as_array(items, numbers_kind(items))
    if isinstance(row, (TensorRow, NumpyRow)):
        for x in items:
            if x.shape != first.shape:
                shapes = f"{tuple(first.shape)} and {tuple(x.shape)}"
                raise ValueError(f"expected one shape in every dict, got {shapes}")
        if isinstance(row, NumpyRow):
            import numpy as np

            return np.stack(items)
        import torch

        for x in items:
            if x.device != first.device:
                devices = f"{first.device} and {x.device}"
                raise ValueError(f"expected the tensors of every dict on one device, got {devices}")
        return torch.stack(items)
    raise TypeError(
        f"cannot stack values of type {type(first).__name__} over a {what} of dicts; expected "
        "tensors, numpy arrays, Python numbers or tuples of them, or dicts of those"
    )


class NumbersRow(ValueRow):
    """A tuple or list of Python numbers: ``(kn)``, packed as their letters in parentheses,
    ``(fif)``, spelled ``float[n]``. A nested one (rows of numbers) is bound as the numpy array
    of it (``as_array``): its form is that array's, and it is not packed. One of dicts is bound
    as the dict ``stacked`` makes: its form is that dict's in brackets, ``[{...}]``, and it is
    packed as that dict."""

    python_types = (tuple, list)
    letters = "("
    forms = (NumbersForm,)
    spelling = "float[n], int[n], bool[n] (a tuple of n numbers)"
    order = 3

    def form(self, value: Any, grad_on: bool) -> str:
        if of_dicts(value):
            fields = stacked(value)
            return f"[{row_of(fields).form(fields, grad_on)}]"
        kind = numbers_kind(value)
        if nested(value):
            array = as_array(value, kind)
            return row_of(array).form(array, grad_on)
        return format_arg(NumbersForm(kind, len(value)))

    def to_torch(self, value: Any, device: Any) -> Any:
        if of_dicts(value):
            bound = stacked(value)
        elif nested(value):
            bound = as_array(value, numbers_kind(value))
        else:
            return value
        return row_of(bound).to_torch(bound, device)

    def tensors(self, value: Any) -> list[Any]:
        return tensors_of(value) if of_dicts(value) else []

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        if of_dicts(value):
            fields = stacked(value)
            try:
                packing.add(fields, where)
            except TypeError:
                raise TypeError(
                    f"cannot pass a {type(value).__name__} of dicts holding Python numbers or "
                    "numpy arrays in code torch compiles; expected tensors as their fields"
                ) from None
            return
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
        m = re.fullmatch(_NUMBERS_SPEC, text)
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

register(NumbersRow())
