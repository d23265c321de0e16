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
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...codegen import ENTRY_POINT
from ...codegen.uniforms import Layout, Unpackable
from ...define import frozen
from ...signatures.module_text import ModuleText
from ...signatures.preimage import search_paths, unchanged
from ..slang.api import (
    EntryPoint,
    SlangCompileError,
    SlangSession,
    global_session,
    shader_path,
    slangpy_directory,
)
from ..slang.com_session import Session
from ..slang.reflection import FrontEnd
from ..slang.twinned import twin_modules
from .parameter_layout import entry_layout


@frozen
class KernelSource:
    """A generated kernel (``codegen.kernel_source``): its module name, which also names its
    entry point in the CUDA source, its text, and the path Slang is told it lies at."""

    name: str
    source: str
    path: Path


@frozen
class CudaEntry:
    """One kernel's entry point: its ``__global__`` function's name, its parameter block (None
    when that is not plain bytes, as ``slang.block_layout.uniform_block`` says) and its threads per
    group."""

    name: str
    layout: Layout | None
    group: int


@frozen
class CudaSource:
    """One CUDA source for several kernels, their entry points by kernel name, and whether the
    code (past the prelude) uses ``half``, which NVRTC then compiles with NVIDIA's half
    header."""

    text: str
    entries: dict[str, CudaEntry]
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


def _check_names(module: ModuleText, kernels: Sequence[KernelSource]) -> None:
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


_SESSIONS_KEPT = 2
"""Sessions kept for later compiles of the same module text (one with slangpy's library loaded
holds about 70 MB); an older one lives on only while a ``FrontEnd`` of it does."""
_sessions: OrderedDict[tuple[Any, ...], _Loaded] = OrderedDict()


_SPARE_MODULE = "slangspec_library_preloaded"
_spares: OrderedDict[tuple[Any, ...], Session] = OrderedDict()
"""Sessions with slangpy's library loaded and no user module yet, by owner, search paths and
defines: the next new module searched and defined so is loaded into one (``make_spare``)."""


class _Loaded:
    """A ``com_session.Session`` with the user's module loaded in it, released when the last
    holder lets go of it."""

    def __init__(
        self,
        owner: SlangSession,
        module: ModuleText,
        search: list[Path],
        defines: Mapping[str, str],
        spare: Session | None = None,
        from_file: bool = False,
    ) -> None:
        self.session = spare or Session(owner, search, defines)
        weakref.finalize(self, owner.run_later, self.session.release).atexit = False
        if from_file:
            self.module = self.session.load_file(module.name, module.path)
            unchanged(module)
        else:
            self.module = self.session.load(module.name, module.path, module.text)


def _loaded(
    module: ModuleText,
    include_paths: Sequence[Path],
    defines: Mapping[str, str] | None,
    session: SlangSession,
    library: Path | None,
    content: str,
) -> _Loaded:
    """The session holding ``module`` searched and defined as given (on the session's
    thread): made and the module loaded on first use, then kept for the same text and
    ``content`` (what identifies the files it imports: a session keeps what it loaded)."""
    include_paths, from_file = search_paths(module, include_paths)
    search, defined, where = _place(include_paths, defines, session, library)
    key = (*where, module, content)
    loaded = _sessions.get(key)
    if loaded is None:
        spare = _spares.pop(where, None)
        loaded = _sessions[key] = _Loaded(session, module, search, defined, spare, from_file)
        while len(_sessions) > _SESSIONS_KEPT:
            _sessions.popitem(last=False)
    _sessions.move_to_end(key)
    return loaded


def _place(
    include_paths: Sequence[Path],
    defines: Mapping[str, str] | None,
    session: SlangSession,
    library: Path | None,
) -> tuple[list[Path], dict[str, str], tuple[Any, ...]]:
    """The search paths and defines of a session for modules searched and defined as given,
    and what identifies such sessions."""
    search = _search([*([library] if library is not None else []), *include_paths])
    defined = _defines(defines)
    return search, defined, (id(session), tuple(map(str, search)), tuple(sorted(defined.items())))


def make_spare(
    include_paths: Sequence[Path],
    defines: Mapping[str, str] | None,
    library: Path,
    session: SlangSession | None = None,
) -> None:
    """Make a session searched and defined as given with slangpy's library (``library``, as
    ``library_dir`` gives it) loaded, which the next new module searched and defined so is
    loaded into: a process that compiles one module after another (the compile server) loads
    the library while it waits for the next. One spare is kept."""
    owner = session or global_session()
    search, defined, where = _place(include_paths, defines, owner, library)
    if where in _spares:
        return

    def made() -> Session:
        spare = Session(owner, search, defined)
        try:
            spare.load(_SPARE_MODULE, library / f"{_SPARE_MODULE}.slang", f"import {LIBRARY};\n")
        except BaseException:
            spare.release()
            raise
        return spare

    _spares[where] = owner.run(made)
    while len(_spares) > 1:
        owner.run(_spares.popitem(last=False)[1].release)


def spare_sessions() -> int:
    """How many sessions ``make_spare`` made wait for a module."""
    return len(_spares)


def held_modules() -> list[str]:
    """The names of the user modules whose sessions this process keeps."""
    return [key[3].name for key in list(_sessions)]  # status asks from another thread


def forget(module: ModuleText, content: str) -> None:
    """Drop the kept sessions of ``module`` with ``content`` (on the session's thread, or
    before any is made): after a failed build, the next loads everything afresh."""
    for key in [k for k in _sessions if k[-2:] == (module, content)]:
        del _sessions[key]


def front_end(
    module: ModuleText,
    include_paths: Sequence[Path] = (),
    defines: Mapping[str, str] | None = None,
    session: SlangSession | None = None,
    library: Path | None = None,
    content: str = "",
) -> FrontEnd:
    """``module`` through Slang's front-end, for its reflection, searched and defined as
    ``cuda_source`` compiles it (and in the same session, which later compiles with the same
    ``content`` reuse)."""
    owner = session or global_session()

    def made() -> FrontEnd:
        loaded = _loaded(module, include_paths, defines, owner, library, content)
        layout = loaded.session.layout(loaded.module)

        def load(name: str, text: str) -> bool:
            path = module.path.with_name(f"{name}.slang")
            try:
                owner.run(lambda: loaded.session.load(name, path, text))
            except SlangCompileError:
                return False
            return True

        return FrontEnd(owner, layout, loaded.session.module_decl(loaded.module), loaded, load)

    return owner.run(made)


def cuda_source(
    module: ModuleText,
    kernels: Sequence[KernelSource],
    include_paths: Sequence[Path] = (),
    defines: Mapping[str, str] | None = None,
    session: SlangSession | None = None,
    library: Path | None = None,
    content: str = "",
) -> CudaSource:
    """Compile ``kernels``, which import ``module``, into one CUDA source.

    ``include_paths`` are searched for the module's own imports, then slangpy's Slang library
    and its shaders, as slangpy's sessions search them; ``defines`` hold for every module, as
    do the ones slangpy sets. ``library``, a directory holding ``slangpy_library(defines)`` as
    ``LIBRARY_FILE``, is searched first. The module goes through the front-end once per
    session, which later compiles of its kernels share while ``content`` (an identity of the
    files the module imports) stays the same. Raises ``slang.api.SlangCompileError``
    carrying Slang's diagnostics when the sources do not compile.
    """
    _check_names(module, kernels)
    owner = session or global_session()

    def compiled() -> tuple[bytes, list[tuple[Layout | None, int]]]:
        loaded = _loaded(module, include_paths, defines, owner, library, content)
        for name, text in twin_modules(module, [k.source for k in kernels]).items():
            loaded.session.load(name, module.path.with_name(f"{name}.slang"), text)
        parts = [(k.name, k.path, k.source, k.name) for k in kernels]
        return loaded.session.compile(parts, _entry)

    code, entries = owner.run(compiled)
    text = code.decode()
    missing = [k.name for k in kernels if f"__global__ void {k.name}(" not in text]
    if missing:
        raise RuntimeError(f"Slang's output lacks the entry points of {missing}")
    half = "__half" in split_prelude(text)[1]
    found = {k.name: CudaEntry(k.name, *entry) for k, entry in zip(kernels, entries, strict=True)}
    return CudaSource(text, found, half)


def _entry(entry: EntryPoint) -> tuple[Layout | None, int]:
    """An entry point's parameter block (None where it is not plain bytes) and group size."""
    try:
        layout: Layout | None = entry_layout(entry)
    except Unpackable:
        layout = None
    return layout, entry.thread_group_size[0]


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
