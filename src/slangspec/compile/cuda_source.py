"""Generated kernels -> one CUDA source holding each as an entry point, with each entry point's
parameter layout, through Slang's C API: no slangpy device and no GPU.

The user's module is compiled from the very text the cache keyed, as a module of the same
compile, so each kernel's ``import`` of it finds that text and never a file on disk. Every
generated kernel declares its entry point as ``codegen.ENTRY_POINT``; within one source each
must have a name of its own, so each kernel's module is compiled with that name defined, as a
macro of its module alone, to the kernel's name: the kernel's text stays what the cache keyed.

slangpy's Slang library, which most modules import, costs most of a compile when Slang reads its
source; ``slangpy_library`` compiles it to IR once, and a compile given the directory holding
that as ``library`` reads the IR instead.

Slang writes its CUDA prelude (the same text for every kernel of a Slang release) inline, at
the head of the source, inside an include guard; ``split_prelude`` cuts it off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..codegen import ENTRY_POINT
from ..module_text import ModuleText
from ..uniforms import Layout, Unpackable
from .parameter_layout import entry_layout
from .reflection import FrontEnd
from .slang_api import SlangSession, Unit, global_session, shader_path, slangpy_directory


@dataclass(frozen=True)
class Kernel:
    """A generated kernel (``codegen.kernel_source``): its module name, which also names its
    entry point in the CUDA source, its text, and the path Slang is told it lies at."""

    name: str
    source: str
    path: Path


@dataclass(frozen=True)
class CudaEntry:
    """One kernel's entry point: its ``__global__`` function's name, its parameter block (None
    when that is not plain bytes, as ``block_layout.uniform_block`` says) and its threads per
    group."""

    name: str
    layout: Layout | None
    group: int


@dataclass(frozen=True)
class CudaSource:
    """One CUDA source for several kernels, their entry points by kernel name, Slang's
    warnings, and whether the code (past the prelude) uses ``half``, which NVRTC then compiles
    with NVIDIA's half header."""

    text: str
    entries: dict[str, CudaEntry]
    diagnostics: str
    half: bool


SLANGPY_DEFINES = {"__TARGET_CUDA__": "1", "SGL_ENABLE_PRINT": "0", "SGL_ENABLE_NVAPI": "0"}
"""What slangpy defines in a CUDA device's sessions: its Slang library declares tensor storage
as plain pointers only under ``__TARGET_CUDA__``."""
SLANGPY_OPTIONS = ("-matrix-layout-row-major", "-loop-inversion")
"""The code generation options slangpy's sessions set."""

LIBRARY = "slangpy"
LIBRARY_FILE = f"{LIBRARY}.slang-module"
"""The file name ``cuda_source`` finds slangpy's Slang library under, compiled to IR."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _check_names(module: ModuleText, kernels: Sequence[Kernel]) -> None:
    names = [k.name for k in kernels]
    if not kernels:
        raise ValueError("no kernels to compile")
    for name in names:
        if not _IDENTIFIER.match(name) or name == ENTRY_POINT:
            raise ValueError(f"kernel name {name!r} cannot name an entry point")
    if len(set(names)) != len(names) or module.name in names:
        raise ValueError(f"kernel names {names} repeat or name the module {module.name!r}")


def _search(include_paths: Sequence[Path]) -> list[Path]:
    """``include_paths``, then slangpy's Slang library and its shaders, as slangpy's sessions
    search them."""
    return [*include_paths, shader_path(), slangpy_directory() / "shaders"]


def _defines(defines: Mapping[str, str] | None) -> dict[str, str]:
    return {**(defines or {}), **SLANGPY_DEFINES}


def slangpy_library(
    defines: Mapping[str, str] | None = None, session: SlangSession | None = None
) -> bytes:
    """slangpy's Slang library compiled to IR as ``cuda_source`` compiles it with ``defines``:
    written as ``LIBRARY_FILE`` in a directory given to ``cuda_source`` as ``library``."""
    path = shader_path() / f"{LIBRARY}.slang"
    compiler = session or global_session()
    return compiler.compile_module(LIBRARY, path, _search(()), _defines(defines), SLANGPY_OPTIONS)


def front_end(
    module: ModuleText,
    include_paths: Sequence[Path] = (),
    defines: Mapping[str, str] | None = None,
    session: SlangSession | None = None,
    library: Path | None = None,
) -> FrontEnd:
    """``module`` through Slang's front-end, for its reflection, searched and defined as
    ``cuda_source`` compiles it."""
    search = _search([*([library] if library is not None else []), *include_paths])
    unit = Unit(module.name, module.path, module.text)
    session = session or global_session()
    return session.run(FrontEnd, session, unit, search, _defines(defines), SLANGPY_OPTIONS)


def cuda_source(
    module: ModuleText,
    kernels: Sequence[Kernel],
    include_paths: Sequence[Path] = (),
    defines: Mapping[str, str] | None = None,
    session: SlangSession | None = None,
    library: Path | None = None,
) -> CudaSource:
    """Compile ``kernels``, which import ``module``, into one CUDA source.

    ``include_paths`` are searched for the module's own imports, then slangpy's Slang library
    and its shaders, as slangpy's sessions search them; ``defines`` hold for every module, as
    do the ones slangpy sets. ``library``, a directory holding ``slangpy_library(defines)`` as
    ``LIBRARY_FILE``, is searched first. Raises ``slang_api.SlangCompileError`` carrying
    Slang's diagnostics when the sources do not compile.
    """
    _check_names(module, kernels)
    session = session or global_session()
    return session.run(_cuda_source, module, kernels, include_paths, defines, session, library)


def _cuda_source(
    module: ModuleText,
    kernels: Sequence[Kernel],
    include_paths: Sequence[Path],
    defines: Mapping[str, str] | None,
    session: SlangSession,
    library: Path | None,
) -> CudaSource:
    units = [Unit(module.name, module.path, module.text)]
    units += [Unit(k.name, k.path, k.source, (k.name,), {ENTRY_POINT: k.name}) for k in kernels]
    search = _search([*([library] if library is not None else []), *include_paths])
    compiling = session.compile(units, search, _defines(defines), SLANGPY_OPTIONS)
    with compiling as output:
        entries = {}
        for entry in output.entry_points:
            try:
                layout: Layout | None = entry_layout(entry)
            except Unpackable:
                layout = None
            entries[entry.name] = CudaEntry(entry.name, layout, entry.thread_group_size[0])
        text = output.code.decode()
        diagnostics = output.diagnostics
    missing = [k.name for k in kernels if k.name not in entries]
    if missing:
        raise RuntimeError(f"Slang's output lacks the entry points of {missing}")
    half = "__half" in split_prelude(text)[1]
    return CudaSource(text, {k.name: entries[k.name] for k in kernels}, diagnostics, half)


_OPENS = ("#if", "#ifdef", "#ifndef")


def split_prelude(text: str) -> tuple[str, str]:
    """The prelude Slang wrote at the head of a CUDA source (up to the ``#endif`` closing its
    include guard), and the rest; ValueError when the source does not start with one."""
    lines = text.splitlines(keepends=True)
    depth = 0
    for number, line in enumerate(lines):
        directive = line.lstrip().split(maxsplit=1)[0] if line.strip() else ""
        if directive in _OPENS:
            depth += 1
        elif directive == "#endif":
            depth -= 1
            if depth == 0:
                return "".join(lines[: number + 1]), "".join(lines[number + 1 :])
        elif depth == 0 and directive and not directive.startswith("//"):
            break
    raise ValueError("the source does not start with a guarded prelude")
