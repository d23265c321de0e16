"""Signatures as text: argument signatures as parsed forms and back, and how they compose into
a call signature and split back. This half of the format needs no torch, so tools that list the
cache, and the builder, read signatures without importing it; ``compose`` reads the forms
of torch values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..define import frozen
from .function_ref import FunctionNameError, canonical_name
from .generators import GENERATOR
from .scalars import DTYPE_OF_NUMBER, NUMBER_OF_DTYPE

CALL_MODE = "call"


def compose_call_signature(function_id: str, arg_signatures: Iterable[str]) -> str:
    """The call signature of ``function_id`` and one argument signature per argument."""
    return " ".join((function_id, CALL_MODE, *arg_signatures))


def call_arguments(call_signature: str) -> str:
    """The argument signatures of a call signature, as it writes them; "" when there are none."""
    return "".join(call_signature.split(" ", 2)[2:])


def argument_label(index: int, name: str | None = None) -> str:
    """How messages name the argument at ``index`` (from 0) of a call: by its position as the
    call wrote it, counted from 1, and its parameter's name (a struct field's path after it)
    where known: ``argument 3 ('light.power')``."""
    where = f"argument {index + 1}"
    return where if name is None else f"{where} ('{name}')"


def binds_converted(call_signature: str) -> bool:
    """Whether a call binds an argument as something else than it was given: a numpy array (as
    a torch tensor), a tuple or list of dicts (as one dict of stacked fields)."""
    return "np[" in call_signature or "[{" in call_signature


def extent_class(extent: int) -> str:
    """One character of a tensor form's ``V`` run: the extent when it is 1-4, else ``x``.

    A size torch traces symbolically answers the comparison by guarding on it (so the graph
    holds for the whole class), and ``int`` specializes a size of 1-4 to its value."""
    return str(int(extent)) if 1 <= extent <= 4 else "x"


def extent_classes(shape: Sequence[int]) -> str:
    """The ``V`` run of a shape."""
    return "".join(map(extent_class, shape))


@frozen
class TensorForm:
    """A parsed tensor signature."""

    rank: int
    dtype: str  # torch's name of it: float32
    grad: bool
    extents: str
    numpy: bool = False


@frozen
class ScalarForm:
    """A parsed Python-scalar signature."""

    kind: str  # "f", "i" or "b"


@frozen
class NumbersForm:
    """A parsed signature of a tuple or list of Python numbers: the kind its elements take
    together (a ``ScalarForm`` kind) and how many there are."""

    kind: str
    length: int


@frozen
class GridForm:
    """A parsed grid signature; ``strided``: given an offset or a stride."""

    rank: int
    strided: bool = False


@frozen
class GeneratorForm:
    """A parsed generator signature: its name (a row of ``generators.GENERATOR``) and the
    width it was asked to fill, None where the parameter's."""

    kind: str
    dims: int | None = None


@frozen
class ResultForm:
    """The call shape of a ``_result=`` tensor, of ``rank`` dimensions, after the arguments."""

    rank: int


@frozen
class TypeNameForm:
    """The struct a dict names as the concrete type of its value, under ``TYPE_KEY``."""

    name: str


@frozen
class DictForm:
    """A parsed dict signature: a struct's fields, by name, in sorted order (``TYPE_KEY``
    among them, as a ``TypeNameForm``, where the dict names its type). ``listed``: given as a
    tuple or list of such dicts, bound as one dict of their fields stacked, ``[{...}]``."""

    fields: tuple[tuple[str, ArgForm], ...]
    listed: bool = False


ArgForm = (
    TensorForm
    | ScalarForm
    | NumbersForm
    | GridForm
    | GeneratorForm
    | ResultForm
    | DictForm
    | TypeNameForm
)

TYPE_KEY = "_type"
"""The key of a dict that names the struct its fields are of, as slangpy's dicts do: the
concrete type of a value for an interface parameter."""
IDENTIFIER = r"[A-Za-z_]\w*"
"""A Slang identifier: a struct's field, a type's name without its namespaces."""
TYPE_NAME = rf"{IDENTIFIER}(?:::{IDENTIFIER})*"
"""How a dict names a struct: an identifier, with its namespaces before it."""

_TENSOR_RE = re.compile(r"(np)?\[D(\d+),S(\d+),G([01]),V([x1-4]*)\]")
_GRID_RE = re.compile(r"grid\[D(\d+)(,strided)?\]")
_GENERATOR_RE = re.compile(rf"({'|'.join(GENERATOR)})(?:\[D([1-9]\d*)\])?")
_RESULT_RE = re.compile(r"_result\[D(\d+)\]")
_NUMBERS_RE = re.compile(r"\(([fib])([1-9]\d*)\)")


def format_arg(form: ArgForm) -> str:
    """The argument signature of a form: the inverse of ``parse_arg``."""
    if isinstance(form, ScalarForm):
        return form.kind
    if isinstance(form, NumbersForm):
        return f"({form.kind}{form.length})"
    if isinstance(form, GridForm):
        return f"grid[D{form.rank}{',strided' if form.strided else ''}]"
    if isinstance(form, GeneratorForm):
        return form.kind if form.dims is None else f"{form.kind}[D{form.dims}]"
    if isinstance(form, ResultForm):
        return f"_result[D{form.rank}]"
    if isinstance(form, DictForm):
        fields = "{" + ",".join(f"{k}:{format_arg(v)}" for k, v in form.fields) + "}"
        return f"[{fields}]" if form.listed else fields
    if isinstance(form, TypeNameForm):
        return f"@{form.name}"
    number = NUMBER_OF_DTYPE[form.dtype]
    prefix = "np" if form.numpy else ""
    return f"{prefix}[D{form.rank},S{number},G{int(form.grad)},V{form.extents}]"


def parse_arg(text: str) -> ArgForm:
    """Parse one argument signature; raises ValueError naming what is malformed."""
    if text in ("f", "i", "b"):
        return ScalarForm(text)
    m = _GRID_RE.fullmatch(text)
    if m:
        return GridForm(int(m.group(1)), bool(m.group(2)))
    m = _GENERATOR_RE.fullmatch(text)
    if m:
        return GeneratorForm(m.group(1), int(m.group(2)) if m.group(2) else None)
    m = _RESULT_RE.fullmatch(text)
    if m:
        return ResultForm(int(m.group(1)))
    m = _NUMBERS_RE.fullmatch(text)
    if m:
        return NumbersForm(m.group(1), int(m.group(2)))
    if text.startswith("{"):
        return _parse_dict(text)
    if text.startswith("[{") and text.endswith("}]"):
        return replace(_parse_dict(text[1:-1]), listed=True)
    m = _TENSOR_RE.fullmatch(text)
    if not m:
        raise ValueError(f"malformed argument signature {text!r}")
    rank, number, extents = int(m.group(2)), int(m.group(3)), m.group(5)
    if len(extents) != rank:
        raise ValueError(f"argument signature {text!r}: rank {rank} but {len(extents)} extents")
    dtype = DTYPE_OF_NUMBER.get(number)
    if dtype is None:
        raise ValueError(f"argument signature {text!r}: unknown scalar type number {number}")
    return TensorForm(rank, dtype, m.group(4) == "1", extents, numpy=bool(m.group(1)))


def split_outside_brackets(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside brackets and braces, every part as it is."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == sep and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return parts


def _parse_dict(text: str) -> DictForm:
    """``{name:form,...}``, names sorted and distinct, forms nested to any depth."""
    body = text[1:-1]
    opened = sum(body.count(c) for c in "[{")
    if not text.endswith("}") or opened != sum(body.count(c) for c in "]}"):
        raise ValueError(f"malformed argument signature {text!r}")
    fields: list[tuple[str, ArgForm]] = []
    for part in split_outside_brackets(body, ","):
        name, sep, inner = part.partition(":")
        if not sep or not re.fullmatch(IDENTIFIER, name):
            raise ValueError(f"malformed dict field {part!r} in {text!r}")
        if name == TYPE_KEY:
            if not (inner.startswith("@") and re.fullmatch(TYPE_NAME, inner[1:])):
                raise ValueError(f"dict signature {text!r}: expected {TYPE_KEY}:@<struct name>")
            fields.append((name, TypeNameForm(inner[1:])))
            continue
        fields.append((name, parse_arg(inner)))
    names = [name for name, _ in fields]
    if names != sorted(set(names)):
        raise ValueError(f"dict signature {text!r}: expected distinct fields in sorted order")
    return DictForm(tuple(fields))


@frozen
class CallSignature:
    """A parsed call signature."""

    function_id: str
    args: tuple[ArgForm, ...]
    text: str


def parse_call_signature(text: str) -> CallSignature:
    """Parse a call signature string back into its parts."""
    parts = text.split(" ")
    if len(parts) < 2 or "::" not in parts[0]:
        raise ValueError(
            f"malformed call signature {text!r}; expected '<module>::<function> <mode> <arg>...'"
        )
    if parts[1] != CALL_MODE:
        raise ValueError(f"call signature {text!r}: unknown call mode {parts[1]!r}")
    module, _, function = parts[0].partition("::")
    try:
        spelled = module.isascii() and module.isidentifier() and canonical_name(function)
    except FunctionNameError as exc:
        raise ValueError(f"call signature {text!r}: {exc}") from None
    if spelled != function:
        raise ValueError(
            f"call signature {text!r}: {parts[0]!r} is not '<module>::<function>' as slangspec "
            "spells it"
        )
    return CallSignature(parts[0], tuple(parse_arg(p) for p in parts[2:]), text)
