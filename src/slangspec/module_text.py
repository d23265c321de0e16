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
