"""The user's module as Slang gets it, apart from the compiler so that what builds keys
needs no slangpy."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..define import frozen

_DEFINE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_LINE_BREAKS = ("\n", "\r", "\0")


@frozen
class ModuleText:
    """A module's name, its text as it was keyed, and the file it is (or, given as a string,
    would be), so that its own imports resolve beside it."""

    name: str
    path: Path
    text: str


def check_source(name: str, source: str) -> None:
    """ValueError naming module ``name`` and the place in ``source`` of a character UTF-8 has no
    form for (a lone surrogate)."""
    try:
        source.encode()
    except UnicodeEncodeError as exc:
        line = source.count("\n", 0, exc.start) + 1
        column = exc.start - source.rfind("\n", 0, exc.start)
        raise ValueError(
            f"module '{name}': its source is not UTF-8 text: a lone surrogate "
            f"{source[exc.start]!r} at line {line}, column {column}"
        ) from None


def checked_defines(defines: Mapping[str, str]) -> dict[str, str]:
    """``defines`` as a dict; ValueError naming a define whose name is not an identifier or
    whose value is not one line, either of which the preprocessor would read as more than a
    define."""
    for name, value in defines.items():
        if not (isinstance(name, str) and re.fullmatch(_DEFINE_NAME, name)):
            raise ValueError(f"define {name!r}: expected an identifier")
        if not isinstance(value, str) or any(c in value for c in _LINE_BREAKS):
            raise ValueError(
                f"define {name!r}: expected a value of one line (a string without newline, "
                f"carriage return or NUL), got {value!r}"
            )
    return dict(defines)
