"""The layers hold: the cache store imports only itself, the standard library and its storage
libraries; the compiler and device code are handed paths, never the cache; and no module of
slangspec imports one that imports it back, however late or only for type checking."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent / "src" / "slangspec"
STORE_MAY_IMPORT = {"diskcache", "xxhash", "platformdirs", "redis"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere in it (in functions too, and for type checking),
    relative imports resolved against its package; ``from package import name`` imports the
    module ``package.name`` when there is one."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*(base if node.level else []), *filter(None, [node.module])])
            for a in node.names:
                inner = f"{module}.{a.name}"
                found.add(inner if inner in MODULES else module)
    return found


def slangspec_imports(path: Path) -> set[str]:
    """The slangspec modules ``path`` imports (an import of a name inside a module, the module)."""
    out = set()
    for name in imported(path):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out - {module_name(path)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("path", sorted((SRC / "cache_store").glob("*.py")), ids=lambda p: p.name)
def test_the_cache_store_imports_only_itself_the_standard_library_and_its_storage(path):
    for name in imported(path):
        top = name.split(".")[0]
        if name == "slangspec.cache_store" or name.startswith("slangspec.cache_store."):
            continue
        assert top in sys.stdlib_module_names or top in STORE_MAY_IMPORT, (
            f"{path.name} imports {name}"
        )


@pytest.mark.parametrize("name", ["compiler.py", "devices.py"])
def test_compiler_and_devices_do_not_know_the_cache(name):
    # Not even the table of settings, which lives in the cache store: what of it devices need,
    # their callers read and hand them.
    assert {m for m in imported(SRC / name) if m.startswith("slangspec.cache")} == set()


def test_no_module_imports_one_that_imports_it_back():
    graph = {name: slangspec_imports(path) for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_however_long():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_import_walk_sees_relative_lazy_and_type_checking_imports():
    lazy = imported(SRC / "runtime" / "module.py")
    assert "slangspec.runtime.traced" in lazy, "imported inside a method"
    typed = slangspec_imports(SRC / "runtime" / "launch.py")
    assert "slangspec.runtime.cuda_call" in typed, "imported for type checking and lazily"
    assert "slangspec.cache" in imported(SRC / "runtime" / "module_base.py")
