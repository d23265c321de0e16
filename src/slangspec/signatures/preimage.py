"""What a cache key covers: the canonical preimage of everything that can change a kernel.

The runtime builds it, with the formats below and the toolchain's versions
(``compile.toolchain``), and hands it to the cache, which keys by its hash and stores it with
each entry to compare on every hit: neither a collision nor a damaged key can serve a kernel
built from anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from ..errors import Error

if TYPE_CHECKING:
    from .module_text import ModuleText

_IMPORT_RE = re.compile(
    r'^\s*(?:__exported\s+)?(?:__)?(?:import|implementing)\s+([\w.]+|"[^"]+")\s*;'
    r'|^\s*(?:__include|#\s*include)\s+"([^"]+)"',
    re.MULTILINE,
)


def imported_names(text: str) -> list[str]:
    """The modules ``text`` imports (``import``, ``__exported import``, ``implementing``), as
    written, without quotes; included files are not modules and are left out."""
    return [m.group(1).strip('"') for m in _IMPORT_RE.finditer(text) if m.group(1)]


def _resolve(name: str, relative_to: Path, search: Sequence[Path]) -> Path | None:
    if name.startswith('"'):
        candidates = [name.strip('"')]
    else:
        base = name.replace(".", "/")
        candidates = [base + ".slang", name + ".slang"]
    for directory in (relative_to, *search):
        for c in candidates:
            path = directory / c
            if path.is_file():
                return path
    return None


def module_closure(
    entry: Path, search: Sequence[Path], content: bytes | None = None
) -> dict[str, str]:
    """Content hashes of a module and of every Slang file it imports, transitively; the module's
    own ``content``, when given, instead of its file's.

    Keys are import names relative to the search paths, so a cache built on one machine keys the
    same on another; imports outside the search paths (slangpy's own library) are covered by the
    toolchain versions.
    """
    closure: dict[str, str] = {}
    for path, data in module_files(entry, search, content):
        closure[_name_of(path, entry, search)] = xxhash.xxh3_128_hexdigest(data)
    return dict(sorted(closure.items()))


def module_files(
    entry: Path, search: Sequence[Path], content: bytes | None = None
) -> Iterator[tuple[Path, bytes]]:
    """A module's file and every Slang file it imports, transitively, each once, with its bytes
    (the module's own ``content``, when given, instead of its file's)."""
    for path, data, _ in _import_graph(entry, search, content):
        yield path, data


def imported_back(module: ModuleText, search: Sequence[Path]) -> bool:
    """Whether ``module``, the text of its own file, is imported again by a module it imports,
    transitively: Slang takes such a cycle only from a module it reads from its file, never
    from one given as text (which is then "a recursive module import")."""
    entry = module.path
    try:
        if not entry.is_file() or entry.read_text(encoding="utf-8") != module.text:
            return False
    except (OSError, UnicodeDecodeError):
        return False
    target = entry.resolve()
    graph = _import_graph(entry, search, module.text.encode())
    return any(found.resolve() == target for _, _, imports in graph for found in imports)


def search_paths(module: ModuleText, search: Sequence[Path]) -> tuple[list[Path], bool]:
    """The search paths of a Slang session for ``module``, and whether Slang must read it from
    its file (``imported_back``): by name, its own directory searched first."""
    if imported_back(module, search):
        return [module.path.parent, *search], True
    return list(search), False


def _import_graph(
    entry: Path, search: Sequence[Path], content: bytes | None
) -> Iterator[tuple[Path, bytes, list[Path]]]:
    """``entry`` and every Slang file it imports, transitively, each once: its path, its bytes
    (``entry``'s own ``content`` where given) and the files its imports resolve to."""
    pending = [entry]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        data = content if path == entry and content is not None else path.read_bytes()
        imports = []
        for m in _IMPORT_RE.finditer(data.decode("utf-8", errors="replace")):
            found = _resolve(m.group(1) or f'"{m.group(2)}"', path.parent, search)
            if found is not None:
                imports.append(found)
        yield path, data, imports
        pending.extend(imports)


class ModuleChangedError(Error, RuntimeError):
    """A module's file changed between reading it for its key and Slang reading it."""


def unchanged(module: ModuleText) -> None:
    """After Slang read ``module`` from its file: ``ModuleChangedError`` unless the file still
    holds the text the call was keyed with."""
    try:
        same = module.path.read_text(encoding="utf-8") == module.text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        raise ModuleChangedError(
            f"module '{module.name}': {module.path} changed while it was compiled; load it again"
        )


def _name_of(path: Path, entry: Path, search: Sequence[Path]) -> str:
    """The shortest name of ``path`` relative to the module's directory or a search path."""
    names = []
    for directory in (entry.parent, *search):
        try:
            names.append(path.resolve().relative_to(directory.resolve()).as_posix())
        except ValueError:
            continue
    return min(names, key=len) if names else path.name


def preimage(
    *,
    toolchain: dict[str, Any],
    device: dict[str, str],
    module: str,
    sources: dict[str, str],
    defines: dict[str, str],
    function: str,
    signature: str,
) -> dict[str, Any]:
    """The full preimage of one specialization's key."""
    return {
        "toolchain": toolchain,
        "device": device,
        "module": module,
        "sources": sources,
        "defines": dict(sorted(defines.items())),
        "function": function,
        "signature": signature,
    }
