"""The row of the table of Python values (``values``) for a dict: a struct's fields, each a
value of its own row, and its ``"_type"`` entry, the name of the struct they are of."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from .text import (
    IDENTIFIER,
    TYPE_KEY,
    TYPE_NAME,
    DictForm,
    TypeNameForm,
    format_arg,
    parse_arg,
    split_outside_brackets,
)
from .value_row import (
    ROW_OF,
    Packing,
    Unpacking,
    ValueRow,
    form_grad,
    register,
    row_of,
    spec_signature,
    tensors_of,
)


@functools.cache
def _type_name_form(name: str) -> str:
    if not re.fullmatch(TYPE_NAME, name):
        raise ValueError(
            f"cannot name the struct {name!r}; expected a struct's name, an identifier with "
            "its namespaces (ns::Circle)"
        )
    return format_arg(TypeNameForm(name))


def type_name_form(value: Any) -> str:
    """The form of a dict's ``"_type"`` entry, the struct it names; TypeError or ValueError
    for what does not name one."""
    if not isinstance(value, str):
        raise TypeError(
            f"cannot name a struct with a value of type {type(value).__name__}; expected the "
            "struct's name as a str"
        )
    return _type_name_form(value)


def _dict_signature(value: dict[Any, Any], grad_on: bool) -> str:
    if not value:
        raise TypeError("cannot pass an empty dict; expected a dict of a struct's fields")
    bad = [k for k in value if not (isinstance(k, str) and k.isidentifier())]
    if bad:
        raise TypeError(f"cannot pass a dict keyed by {bad[0]!r}; expected field names")
    parts = []
    for k in sorted(value):
        v = value[k]
        try:
            form = type_name_form(v) if k == TYPE_KEY else row_of(v).form(v, grad_on)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"field {k!r}: {exc}") from None
        parts.append(f"{k}:{form}")
    return "{" + ",".join(parts) + "}"


_field_orders: dict[tuple[Any, ...], tuple[str, ...]] = {}
"""The sorted fields of each key sequence a dict argument came with, once checked."""


def _dict_form(value: dict[Any, Any], grad_on: bool) -> str:
    """``_dict_signature`` on the hot path: keys checked once per key sequence, each field's
    form as a call's argument's."""
    keys = tuple(value)
    order = _field_orders.get(keys)
    if order is None:
        _dict_signature(value, grad_on)  # raises for what it cannot describe
        if len(_field_orders) > 1024:
            _field_orders.clear()
        order = _field_orders[keys] = tuple(sorted(keys))
    parts = []
    for k in order:
        v = value[k]
        if k == TYPE_KEY:
            parts.append(f"{k}:{type_name_form(v)}")
        else:
            row = ROW_OF.get(type(v)) or row_of(v)
            parts.append(f"{k}:{row.call_form(v, grad_on)}")
    return "{" + ",".join(parts) + "}"


def _spec_dict_signature(fields: dict[str, Any]) -> str:
    """The argument signature of a struct's fields, each an argument spec of its own."""
    for name in fields:
        if not re.fullmatch(IDENTIFIER, name):
            raise ValueError(f"argument spec: {name!r} is not a struct field name")
    forms = tuple(
        sorted(
            (k, _spec_type_name(v) if k == TYPE_KEY else parse_arg(spec_signature(v)))
            for k, v in fields.items()
        )
    )
    return format_arg(DictForm(forms))


def _spec_type_name(spec: Any) -> TypeNameForm:
    if not (isinstance(spec, str) and re.fullmatch(TYPE_NAME, spec.strip())):
        raise ValueError(f"argument spec: {TYPE_KEY} {spec!r}: expected a struct's name")
    return TypeNameForm(spec.strip())


def _spec_fields(text: str, spec: str) -> dict[str, Any]:
    """``{name: spec, ...}`` (nested braces for nested structs) -> its fields."""
    if not text.endswith("}"):
        raise ValueError(f"argument spec {spec!r}: a struct's fields end with '}}'")
    fields: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in split_outside_brackets(text[1:-1], ","))):
        name, colon, value = part.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"argument spec {spec!r}: expected 'field: spec', got {part!r}")
        value = value.strip()
        fields[name.strip()] = _spec_fields(value, spec) if value.startswith("{") else value
    return fields


class DictRow(ValueRow):
    """A dict of a struct's fields: ``{name:form,...}``, names sorted, ``"_type"`` among them
    as ``_type:@Circle``. Packed flat, each field at its place (``t@1.dir``: argument 1, field
    ``dir``), an empty dict as ``e``, the ``"_type"`` as ``n<name>``. A manifest spells it as a
    table of its fields' specs, or ``{name: spec, ...}``."""

    python_types = (dict,)
    letters = "en"
    forms = (DictForm,)

    def form(self, value: Any, grad_on: bool) -> str:
        return _dict_signature(value, grad_on)

    def call_form(self, value: Any, grad_on: bool) -> str:
        return _dict_form(value, grad_on)

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        where = where or f"@{packing.index}"
        if not value:
            packing.kinds.append("e" + where)
        for key, v in value.items():
            if isinstance(v, dict):
                self.pack(v, packing, f"{where}.{key}")
            elif key == TYPE_KEY:
                type_name_form(v)  # raises for what names no struct
                packing.kinds.append(f"n{v}{where}.{key}")
            else:
                packing.add(v, f"{where}.{key}")

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return {} if kind == "e" else kind[1:]

    def read_spec(self, spec: Any) -> str | None:
        if isinstance(spec, dict):
            return _spec_dict_signature(spec)
        text = spec.strip()
        if not text.startswith("{"):
            return None
        try:
            parse_arg(text)
            return text
        except ValueError:
            return _spec_dict_signature(_spec_fields(text, spec))

    def flagged(self, value: Any, grads: Iterator[bool]) -> Any:
        return {key: row_of(v).flagged(v, grads) for key, v in value.items()}

    def tensors(self, value: Any) -> list[Any]:
        return tensors_of(value.values())

    def to_torch(self, value: Any, device: Any) -> Any:
        return {k: row_of(v).to_torch(v, device) for k, v in value.items()}

    def generates(self, value: Any) -> bool:
        return any(row_of(v).generates(v) for v in value.values())

    def form_grad(self, form: Any) -> bool:
        return any(form_grad(f) for _, f in form.fields)


register(DictRow())
