"""What a benchmark with a ``--baseline`` needs of another slangspec tree: the environment that
puts it on a child's path, and names it kept in other modules."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any


def tree_path(src: Path | None) -> dict[str, str]:
    """The environment that makes a child import slangspec from ``src`` (None: as installed)."""
    if src is None:
        return {}
    return {"PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


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
