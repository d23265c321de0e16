"""The user's module as Slang gets it, apart from the compiler so that what builds keys
needs no slangpy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
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
