"""Bytecode for the packages a benchmark's fresh processes import, as an installed package has
it: where the environment sets ``PYTHONDONTWRITEBYTECODE`` (the GPU image does) and a package
was unpacked rather than installed, every fresh process would otherwise compile each of its
modules from source again (about 0.1 s for slangspec's on the H200 host), inside the window a
benchmark times."""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path


def package_directory(name: str) -> Path | None:
    """Where the package ``name`` is, without importing it; None when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def compile_packages(*directories: Path | None) -> None:
    """Write bytecode for every module under each directory given (None ones skipped)."""
    for directory in directories:
        if directory is not None:
            compileall.compile_dir(directory, quiet=1, workers=0)
