"""Names a benchmark takes from the slangspec tree on its path, where an older tree (one a
``--baseline`` names) kept them in other modules."""

from __future__ import annotations

import importlib
from typing import Any


def from_tree(name: str, *homes: str) -> Any:
    """``name`` from the first module of ``homes`` (dotted paths) the tree has."""
    for home in homes:
        try:
            module = importlib.import_module(home)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    raise ImportError(f"none of {', '.join(homes)} has {name}")
