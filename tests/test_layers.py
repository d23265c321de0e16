"""The layers hold: the cache store depends on nothing above it, and the compiler and device code
are handed paths, never the cache."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src" / "slangspec"
ABOVE_THE_STORE = ("specializer", "codegen", "compiler", "runtime", "devices", "preimage")
OUTSIDE_ANY_LAYER = ("torch", "slangpy", "numpy")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved against the package."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("path", sorted((SRC / "cache_store").glob("*.py")), ids=lambda p: p.name)
def test_the_cache_store_imports_nothing_above_it(path):
    for name in imported(path):
        parts = name.split(".")
        assert parts[0] not in OUTSIDE_ANY_LAYER, f"{path.name} imports {name}"
        if parts[0] == "slangspec":
            assert parts[1] not in ABOVE_THE_STORE, f"{path.name} imports {name}"


@pytest.mark.parametrize("name", ["compiler.py", "devices.py"])
def test_compiler_and_devices_do_not_know_the_cache(name):
    assert not [m for m in imported(SRC / name) if m.startswith("slangspec.cache")]


def test_the_import_check_sees_relative_imports():
    found = imported(SRC / "runtime" / "build.py")
    assert "slangspec.cache" in found and "slangspec.compiler.Compiler" in found
