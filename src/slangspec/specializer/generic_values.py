"""The values of a generic function's value parameters (``let N : int``), read off the call's
arguments as slangpy infers them: ``vector<float, N>``, ``float[N]`` and ``matrix<float, R, C>``
take them from the trailing dimensions of the tensor passed (or the length of a tuple), and a
type parameter ``T`` of the same function takes its argument's scalar type. The call then goes
to the function named with every generic argument (``get<3>``), which is cached and compiled
as any function named so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..define import frozen
from .inference import SLANG_OF_DTYPE, SLANG_OF_PYTHON
from .info import FunctionInfo

_VECTOR = r"vector<\s*\w+\s*,\s*(\w+)\s*>"
_MATRIX = r"matrix<\s*\w+\s*,\s*(\w+)\s*,\s*(\w+)\s*>"
_ARRAY = r"\w+((?:\[\s*\w+\s*\])+)"
_VALUE_KINDS = frozenset({"int", "uint"})


@frozen
class GenericValues:
    """Where each generic argument of a function comes from, in the order it declares them:
    ``("dim", k, d)`` dimension ``d`` (counted from the end) of argument ``k``, or
    ``("scalar", k)`` the scalar type of argument ``k``."""

    name: str
    sources: tuple[tuple[str, str, int, int], ...]

    def named(self, args: Sequence[Any]) -> str:
        """The function's name with the generic arguments ``args`` give; TypeError naming the
        generic argument that they do not give."""
        given = []
        for generic, kind, k, d in self.sources:
            value = args[k] if k < len(args) else None
            if kind == "dim":
                shape = _shape(value)
                if shape is None or len(shape) < d:
                    raise TypeError(
                        f"{self.name}: argument {k + 1}: expected a tensor with at least {d} "
                        f"dimensions, or a tuple, to take the generic value {generic} from; "
                        f"name it explicitly ({self.name}<...>)"
                    )
                given.append(str(int(shape[-d])))
            else:
                scalar = _scalar(value)
                if scalar is None:
                    raise TypeError(
                        f"{self.name}: argument {k + 1}: expected a tensor or Python scalar to "
                        f"take the generic type {generic} from; name it explicitly "
                        f"({self.name}<...>)"
                    )
                given.append(scalar)
        return f"{self.name}<{', '.join(given)}>"


def declares_values(declared: dict[str, str]) -> bool:
    """Whether generic parameters ``declared`` (with their constraints) hold a value one."""
    return any(c.strip() in _VALUE_KINDS for c in declared.values())


def generic_values(info: FunctionInfo, declared: dict[str, str]) -> GenericValues | None:
    """How to name ``info``'s function with every generic argument from a call, where it has a
    value parameter that its parameters' types take (``declared``: its generic parameters in
    order, with their constraints); None for any other function, and where a generic argument
    cannot be read off the arguments."""
    values = {n for n, constraint in declared.items() if constraint.strip() in _VALUE_KINDS}
    if not values or "<" in info.name:
        return None
    dims: dict[str, tuple[int, int]] = {}
    scalars: dict[str, int] = {}
    for k, p in enumerate(info.params):
        for generic, d in _dims(p.type.name):
            dims.setdefault(generic, (k, d))
        if p.type.kind == "generic":
            scalars.setdefault(p.type.name, k)
        m = re.match(r"(?:vector|matrix)<\s*(\w+)|(\w+)\s*\[", p.type.name)
        element = m and (m.group(1) or m.group(2))
        if element in declared and element not in values:
            scalars.setdefault(element, k)
    sources = []
    for generic in declared:
        if generic in values and generic in dims:
            sources.append((generic, "dim", *dims[generic]))
        elif generic not in values and generic in scalars:
            sources.append((generic, "scalar", scalars[generic], 0))
        else:
            return None
    return GenericValues(f"{info.module}::{info.name}", tuple(sources))


def _dims(type_name: str) -> list[tuple[str, int]]:
    """Each name standing for an extent in ``type_name``, with its place among the trailing
    dimensions a value of it takes (1: the last)."""
    m = re.fullmatch(_VECTOR, type_name)
    if m:
        return [(m.group(1), 1)]
    m = re.fullmatch(_MATRIX, type_name)
    if m:
        return [(m.group(1), 2), (m.group(2), 1)]
    m = re.fullmatch(_ARRAY, type_name)
    if m:
        extents = re.findall(r"\[\s*(\w+)\s*\]", m.group(1))
        return [(e, len(extents) - i) for i, e in enumerate(extents)]
    return []


def _shape(value: Any) -> tuple[int, ...] | None:
    if hasattr(value, "shape"):
        return tuple(value.shape)
    if isinstance(value, tuple | list):
        return (len(value),)
    return None


def _scalar(value: Any) -> str | None:
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return SLANG_OF_DTYPE.get(str(dtype).removeprefix("torch."))
    for python, kind in ((bool, "b"), (int, "i"), (float, "f")):
        if isinstance(value, python):
            return SLANG_OF_PYTHON[kind]
    return None


_STATEMENT_WORDS = frozenset({"return", "else", "do", "case"})


def declared_generics(text: str, name: str) -> dict[str, str]:
    """The type parameters of the first generic declaration of function ``name`` in ``text``,
    each with its constraint as written ("" for none): ``{"T": "IFloat"}`` for
    ``T mul<T : IFloat>(T a, T b)``."""
    for m in re.finditer(rf"\b{re.escape(name)}\s*<", text):
        before = re.search(r"(\w+|>|\])\s*$", text[: m.start()])
        if before is None or before.group(1) in _STATEMENT_WORDS:
            continue  # not a declaration: no return type before the name
        parts, depth, start, k = [], 1, m.end(), m.end()
        while k < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[k], 0)
            if (depth == 1 and text[k] == ",") or depth == 0:
                parts.append(text[start:k])
                start = k + 1
            k += 1
        if depth or not re.match(r"\s*\(", text[k:]):
            continue
        found = {}
        for part in parts:
            d = re.fullmatch(r"\s*(?:let\s+)?([A-Za-z_]\w*)\s*(?::\s*(.*?))?\s*", part, re.S)
            if d:
                found[d.group(1)] = d.group(2) or ""
        return found
    return {}
