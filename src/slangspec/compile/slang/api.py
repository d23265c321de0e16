"""Slang's compiler through its C API (ctypes): the global session (on a thread of its own),
a compile request for slangpy's library as IR, and the reflection of entry points' layouts.

The library is the one slangpy's wheel bundles, found without importing slangpy, so nothing
here opens a device or needs a GPU. Every handle the reflection classes hold belongs to the
session that compiled it (``com_session``) and is valid while that lives.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import logging
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

from ...errors import Error

P = ctypes.c_void_p
_STR = ctypes.c_char_p
_INT = ctypes.c_int
_UINT = ctypes.c_uint
_SIZE = ctypes.c_size_t
_UINT64 = ctypes.c_uint64

CUDA_SOURCE = 17  # SLANG_CUDA_SOURCE
_LANGUAGE_SLANG = 1  # SLANG_SOURCE_LANGUAGE_SLANG
_UNIFORM = 8  # SLANG_PARAMETER_CATEGORY_UNIFORM
_SLANG_MODULE = 1  # SLANG_CONTAINER_FORMAT_SLANG_MODULE
T = TypeVar("T")
_Call = tuple[Callable[..., Any], tuple[Any, ...], "Future[Any] | None"]
_log = logging.getLogger(__name__)


class TypeKind(IntEnum):
    """The ``SlangTypeKind`` values a parameter block is made of (others are kept as ints)."""

    STRUCT = 1
    ARRAY = 2
    MATRIX = 3
    VECTOR = 4
    SCALAR = 5
    POINTER = 18


SCALAR_NAMES = {
    2: "bool",
    3: "int32",
    4: "uint32",
    5: "int64",
    6: "uint64",
    7: "float16",
    8: "float32",
    9: "float64",
    10: "int8",
    11: "uint8",
    12: "int16",
    13: "uint16",
}
"""``SlangScalarType`` values by the names slangpy's reflection gives them."""

_DECLARATIONS: dict[str, tuple[type | None, list[type]]] = {
    "spGetBuildTagString": (_STR, []),
    "spCreateSession": (P, [_STR]),
    "spCreateCompileRequest": (P, [P]),
    "spDestroyCompileRequest": (None, [P]),
    "spProcessCommandLineArguments": (ctypes.c_int32, [P, ctypes.POINTER(_STR), _INT]),
    "spAddSearchPath": (None, [P, _STR]),
    "spAddPreprocessorDefine": (None, [P, _STR, _STR]),
    "spAddTranslationUnit": (_INT, [P, _INT, _STR]),
    "spAddTranslationUnitSourceFile": (None, [P, _INT, _STR]),
    "spSetOutputContainerFormat": (None, [P, _INT]),
    "spGetContainerCode": (ctypes.c_int32, [P, ctypes.POINTER(P)]),
    "spCompile": (ctypes.c_int32, [P]),
    "spGetDiagnosticOutput": (_STR, [P]),
    "spReflection_getEntryPointCount": (_UINT64, [P]),
    "spReflection_getEntryPointByIndex": (P, [P, _UINT64]),
    "spReflectionEntryPoint_getName": (_STR, [P]),
    "spReflectionEntryPoint_getParameterCount": (_UINT, [P]),
    "spReflectionEntryPoint_getParameterByIndex": (P, [P, _UINT]),
    "spReflectionEntryPoint_getComputeThreadGroupSize": (None, [P, _UINT64, P]),
    "spReflectionVariableLayout_GetVariable": (P, [P]),
    "spReflectionVariableLayout_GetTypeLayout": (P, [P]),
    "spReflectionVariableLayout_GetOffset": (_SIZE, [P, _INT]),
    "spReflectionVariable_GetName": (_STR, [P]),
    "spReflectionTypeLayout_GetType": (P, [P]),
    "spReflectionTypeLayout_getKind": (_UINT, [P]),
    "spReflectionTypeLayout_GetSize": (_SIZE, [P, _INT]),
    "spReflectionTypeLayout_GetElementStride": (_SIZE, [P, _INT]),
    "spReflectionTypeLayout_GetFieldCount": (ctypes.c_uint32, [P]),
    "spReflectionTypeLayout_GetFieldByIndex": (P, [P, _UINT]),
    "spReflectionTypeLayout_GetElementTypeLayout": (P, [P]),
    "spReflectionType_GetElementCount": (_SIZE, [P]),
    "spReflectionType_GetScalarType": (_UINT, [P]),
    "spReflectionType_GetName": (_STR, [P]),
    "spReflection_FindFunctionByName": (P, [P, _STR]),
    "spReflection_FindFunctionByNameInType": (P, [P, P, _STR]),
    "spReflection_FindTypeByName": (P, [P, _STR]),
    "spReflection_isSubType": (ctypes.c_bool, [P, P, P]),
    "spReflectionFunction_GetName": (_STR, [P]),
    "spReflectionFunction_GetParameterCount": (_UINT, [P]),
    "spReflectionFunction_GetParameter": (P, [P, _UINT]),
    "spReflectionFunction_GetResultType": (P, [P]),
    "spReflectionFunction_FindModifier": (P, [P, _INT]),
    "spReflectionFunction_isOverloaded": (ctypes.c_bool, [P]),
    "spReflectionFunction_getOverloadCount": (_UINT, [P]),
    "spReflectionFunction_getOverload": (P, [P, _UINT]),
    "spReflectionFunction_specializeWithArgTypes": (P, [P, ctypes.c_int64, ctypes.POINTER(P)]),
    "spReflectionVariable_GetType": (P, [P]),
    "spReflectionVariable_FindModifier": (P, [P, _INT]),
    "spReflectionType_GetKind": (_UINT, [P]),
    "spReflectionType_GetFullName": (ctypes.c_int32, [P, ctypes.POINTER(P)]),
    "spReflectionType_GetRowCount": (_UINT, [P]),
    "spReflectionType_GetColumnCount": (_UINT, [P]),
    "spReflectionType_GetElementType": (P, [P]),
    "spReflectionType_GetFieldCount": (_UINT, [P]),
    "spReflectionType_GetFieldByIndex": (P, [P, _UINT]),
    "spReflectionDecl_getChildrenCount": (_UINT, [P]),
    "spReflectionDecl_getChild": (P, [P, _UINT]),
    "spReflectionDecl_getName": (_STR, [P]),
    "spReflectionDecl_getKind": (_UINT, [P]),
    "spReflectionDecl_castToFunction": (P, [P]),
}


class SlangLibraryError(Error, RuntimeError):
    """Slang's library cannot be found or loaded."""


class SlangCompileError(Error):
    """Slang refused the sources; ``diagnostics`` is its output, file, line and column
    included, and ``first_error`` its first error on one line. A module that does not compile
    raises it on every device, its diagnostics naming the module's file as the user named it
    (a ``load_source`` module as ``<name>.slang``)."""

    def __init__(self, diagnostics: str) -> None:
        super().__init__(diagnostics)
        self.diagnostics = diagnostics

    def __str__(self) -> str:
        return f"Slang compilation failed:\n{self.diagnostics.rstrip()}"

    @property
    def place(self) -> str | None:
        """The file Slang places its first error in; None where it places none."""
        found = _first_error(self.diagnostics)
        return None if found is None else found[0]

    @property
    def in_the_text(self) -> bool:
        """Whether Slang's first error is placed in a file and is one of the text itself, found
        reading, preprocessing, parsing or checking it (codes 10000 to 39999): not one of
        lowering, linking or code generation (from 40000), where stale IR from a damaged cache
        has shown (docs/reliability.md), nor one of the host's, such as a file that cannot be
        read (below 10000)."""
        found = _first_error(self.diagnostics)
        code = None if found is None else re.search(r"error(?:\[E| )(\d+)", found[2])
        return code is not None and 10000 <= int(code.group(1)) < 40000

    @property
    def first_error(self) -> str:
        """The first error, ``file:line:column: error[E20002]: message`` where Slang places it,
        else the first line of the diagnostics."""
        found = _first_error(self.diagnostics)
        if found is not None:
            return f"{found[0]}:{found[1]}: {found[2]}"
        lines = [line for line in self.diagnostics.splitlines() if line.strip()]
        return next((line for line in lines if "error" in line), lines[0] if lines else "")

    def naming(self, path: Path, shown: str) -> SlangCompileError:
        """The same error, the file ``path`` named ``shown`` in its diagnostics."""
        return SlangCompileError(self.diagnostics.replace(str(path), shown))


_RICH_ERROR = re.compile(
    r"^((?:fatal )?error(?:\[\w+\])?: .*)\n\s*--> (.+):(\d+:\d+)\s*$", re.MULTILINE
)
"""An error as Slang shows it by default: its code and message, then a line pointing at its
file, line and column."""
_PLAIN_ERROR = re.compile(r"^(.+?)\((\d+)(?:,\s*(\d+))?\): ((?:fatal )?error.*)$", re.MULTILINE)
"""An error on one line, as Slang writes it without its rich format: ``file(line): error``."""


def _first_error(diagnostics: str) -> tuple[str, str, str] | None:
    """The file, ``line:column`` (or line) and message of the first error that Slang places in
    a file."""
    found = []
    rich = _RICH_ERROR.search(diagnostics)
    if rich is not None:
        found.append((rich.start(), rich.group(2), rich.group(3), rich.group(1)))
    plain = _PLAIN_ERROR.search(diagnostics)
    if plain is not None:
        where = plain.group(2) + (f":{plain.group(3)}" if plain.group(3) else "")
        found.append((plain.start(), plain.group(1), where, plain.group(4)))
    return min(found)[1:] if found else None


def slangpy_directory() -> Path:
    """Where the slangpy package lies, found without importing it."""
    spec = importlib.util.find_spec("slangpy")
    if spec is None or not spec.submodule_search_locations:
        raise SlangLibraryError("slangpy is not installed: it carries Slang's compiler")
    return Path(next(iter(spec.submodule_search_locations)))


def shader_path() -> Path:
    """slangpy's Slang library (``import slangpy;``), as ``slangpy.SHADER_PATH`` names it."""
    return slangpy_directory() / "slang"


def library_path() -> Path:
    """Slang's compiler library in slangpy's wheel."""
    directory = slangpy_directory()
    found = sorted(directory.glob("libslang-compiler.so*")) or sorted(
        directory.glob("slang-compiler.dll")
    )
    if not found:
        raise SlangLibraryError(f"no Slang compiler library in {directory}")
    return found[-1]


@functools.cache
def library() -> ctypes.CDLL:
    """Slang's compiler library with the C API's calls declared; loaded once."""
    path = library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise SlangLibraryError(f"cannot load {path}: {exc}") from exc
    for name, (restype, argtypes) in _DECLARATIONS.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def build_tag() -> str:
    """The Slang release the library is (``spGetBuildTagString``)."""
    return (library().spGetBuildTagString() or b"").decode()


def _text(value: bytes | None) -> str:
    return (value or b"").decode(errors="replace")


class TypeLayout:
    """A type's layout in a compiled program, its sizes in uniform bytes."""

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self._lib = lib
        self._handle = handle
        self._type = lib.spReflectionTypeLayout_GetType(handle)

    @property
    def kind(self) -> int:
        """A ``TypeKind`` where it is one of those, else the raw ``SlangTypeKind``."""
        kind = self._lib.spReflectionTypeLayout_getKind(self._handle)
        try:
            return TypeKind(kind)
        except ValueError:
            return kind

    @property
    def name(self) -> str:
        return _text(self._lib.spReflectionType_GetName(self._type))

    @property
    def size(self) -> int:
        return self._lib.spReflectionTypeLayout_GetSize(self._handle, _UNIFORM)

    @property
    def scalar(self) -> str | None:
        """The scalar type's name (``float32``, ``int32``...), None for one slangspec lacks."""
        return SCALAR_NAMES.get(self._lib.spReflectionType_GetScalarType(self._type))

    @property
    def element_count(self) -> int:
        return self._lib.spReflectionType_GetElementCount(self._type)

    @property
    def element_stride(self) -> int:
        return self._lib.spReflectionTypeLayout_GetElementStride(self._handle, _UNIFORM)

    @property
    def element(self) -> TypeLayout:
        return TypeLayout(
            self._lib, self._lib.spReflectionTypeLayout_GetElementTypeLayout(self._handle)
        )

    @property
    def fields(self) -> list[VariableLayout]:
        lib, handle = self._lib, self._handle
        count = lib.spReflectionTypeLayout_GetFieldCount(handle)
        return [
            VariableLayout(lib, lib.spReflectionTypeLayout_GetFieldByIndex(handle, i))
            for i in range(count)
        ]


class VariableLayout:
    """A parameter or field: its name, its offset in uniform bytes and its type's layout."""

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self._lib = lib
        self._handle = handle

    @property
    def name(self) -> str:
        variable = self._lib.spReflectionVariableLayout_GetVariable(self._handle)
        return _text(self._lib.spReflectionVariable_GetName(variable)) if variable else ""

    @property
    def offset(self) -> int:
        return self._lib.spReflectionVariableLayout_GetOffset(self._handle, _UNIFORM)

    @property
    def type_layout(self) -> TypeLayout:
        return TypeLayout(
            self._lib, self._lib.spReflectionVariableLayout_GetTypeLayout(self._handle)
        )


class EntryPoint:
    """A compiled entry point: its name, its parameters and its threads per group."""

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self._lib = lib
        self._handle = handle

    @property
    def name(self) -> str:
        return _text(self._lib.spReflectionEntryPoint_getName(self._handle))

    @property
    def parameters(self) -> list[VariableLayout]:
        lib, handle = self._lib, self._handle
        count = lib.spReflectionEntryPoint_getParameterCount(handle)
        return [
            VariableLayout(lib, lib.spReflectionEntryPoint_getParameterByIndex(handle, i))
            for i in range(count)
        ]

    @property
    def thread_group_size(self) -> tuple[int, int, int]:
        sizes = (_UINT64 * 3)()
        self._lib.spReflectionEntryPoint_getComputeThreadGroupSize(self._handle, 3, sizes)
        return (sizes[0], sizes[1], sizes[2])


class SlangSession:
    """Slang's global session (its core module loaded once), every call into it made on one
    thread of its own (``run``): Slang does not allow one global session to be used from
    several threads at once, and it keeps state per thread that slangpy's sessions, in the
    same process, would otherwise meet (seen: a crash in slangpy's ``is_sub_type`` after this
    session had answered one on the same thread)."""

    def __init__(self) -> None:
        self._lib = library()
        # A SimpleQueue, not an executor: ``run_later`` is called by finalizers, which the
        # garbage collector runs on whatever thread allocates, inside an executor's lock too.
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="slangspec-slang", daemon=True)
        self._thread.start()
        handle = self.run(self._lib.spCreateSession, None)
        if not handle:
            raise SlangLibraryError("spCreateSession failed")
        self._handle = handle

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on the session's thread, waiting for it (at once when called
        there)."""
        if threading.get_ident() == self._thread.ident:
            return function(*args)
        done: Future[T] = Future()
        self._calls.put((function, args, done))
        return done.result()

    def run_later(self, function: Callable[..., object], *args: Any) -> None:
        """``function(*args)`` on the session's thread, without waiting: safe in a finalizer
        (it takes no lock) and on the session's thread in the middle of another call."""
        self._calls.put((function, args, None))

    def _serve(self) -> None:
        while True:
            function, args, done = self._calls.get()
            if done is None:
                try:
                    function(*args)
                except Exception:
                    _log.exception("Slang session: %s failed", function)
            elif done.set_running_or_notify_cancel():
                try:
                    done.set_result(function(*args))
                except BaseException as error:
                    done.set_exception(error)

    @property
    def handle(self) -> int:
        """The global session (``slang::IGlobalSession``)."""
        return self._handle

    @property
    def lib(self) -> ctypes.CDLL:
        """Slang's library, to be called on the session's thread (``run``)."""
        return self._lib

    @contextlib.contextmanager
    def _request(
        self,
        search_paths: Sequence[Path],
        defines: Mapping[str, str] | None,
        options: Sequence[str],
    ) -> Iterator[P]:
        """A compile request with ``options`` (as ``slangc`` takes them), search paths and
        defines set, destroyed at the end of the ``with``."""
        lib = self._lib
        request = lib.spCreateCompileRequest(self._handle)
        try:
            if options:
                args = (_STR * len(options))(*(o.encode() for o in options))
                if lib.spProcessCommandLineArguments(request, args, len(options)) < 0:
                    raise SlangCompileError(_text(lib.spGetDiagnosticOutput(request)))
            for path in search_paths:
                lib.spAddSearchPath(request, str(path).encode())
            for key, value in (defines or {}).items():
                lib.spAddPreprocessorDefine(request, key.encode(), value.encode())
            yield request
        finally:
            lib.spDestroyCompileRequest(request)

    def _compiled(self, request: P) -> str:
        """Compile ``request``; Slang's diagnostics, or ``SlangCompileError`` with them."""
        failed = self._lib.spCompile(request) < 0
        diagnostics = _text(self._lib.spGetDiagnosticOutput(request))
        if failed:
            raise SlangCompileError(diagnostics)
        return diagnostics

    def compile_module(
        self,
        name: str,
        path: Path,
        search_paths: Sequence[Path] = (),
        defines: Mapping[str, str] | None = None,
        options: Sequence[str] = (),
    ) -> bytes:
        """The Slang module in the file ``path``, imported as ``name``, compiled to Slang's IR
        as a ``.slang-module`` file holds it: a later compile whose search paths find that file
        before the module's source reads the IR instead of compiling the source again."""
        return self.run(self._compile_module, name, path, search_paths, defines, options)

    def _compile_module(
        self,
        name: str,
        path: Path,
        search_paths: Sequence[Path],
        defines: Mapping[str, str] | None,
        options: Sequence[str],
    ) -> bytes:
        lib = self._lib
        with self._request(search_paths, defines, options) as request:
            lib.spSetOutputContainerFormat(request, _SLANG_MODULE)
            index = lib.spAddTranslationUnit(request, _LANGUAGE_SLANG, name.encode())
            lib.spAddTranslationUnitSourceFile(request, index, str(path).encode())
            self._compiled(request)
            blob = P()
            if lib.spGetContainerCode(request, ctypes.byref(blob)) < 0 or not blob:
                raise SlangCompileError(f"Slang wrote no module for {path}")
            return _blob_bytes(blob)


def _blob_bytes(blob: P) -> bytes:
    """The content of an ``ISlangBlob``, which is then released: a COM object whose virtual
    table holds, after ``queryInterface``, ``addRef`` and ``release``, ``getBufferPointer`` and
    ``getBufferSize``."""
    table = ctypes.cast(blob, ctypes.POINTER(ctypes.POINTER(P))).contents
    release = ctypes.CFUNCTYPE(ctypes.c_uint32, P)(table[2])
    pointer = ctypes.CFUNCTYPE(P, P)(table[3])
    size = ctypes.CFUNCTYPE(_SIZE, P)(table[4])
    try:
        return ctypes.string_at(pointer(blob), size(blob))
    finally:
        release(blob)


@functools.cache
def global_session() -> SlangSession:
    """The process's Slang session, created on first use (again in a forked child, which
    has not its thread)."""
    return SlangSession()


os.register_at_fork(after_in_child=global_session.cache_clear)
