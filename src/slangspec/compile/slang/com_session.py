"""A Slang session that keeps what it loaded (Slang's ``ISession``, through its COM interface):
the user's module and slangpy's library go through the front-end once, and every kernel
compiled after is only the kernel's own front-end, linking and code generation. Compile
requests (``api.SlangSession.compile``) read every module again each time.

Each interface is a pointer to a table of functions; a method is called by its place in the
table, which ``slang.h`` of the Slang release slangpy bundles fixes (``ISlangUnknown``'s three
methods first, then each base interface's in declaration order). Everything here runs on the
global session's thread (``SlangSession.run``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .api import _STR, CUDA_SOURCE, EntryPoint, P, SlangCompileError, SlangSession, _text

T = TypeVar("T")
_SIZE = ctypes.c_size_t
_INT64 = ctypes.c_int64
_RESULT = ctypes.c_int32
_GENERATE_WHOLE_PROGRAM = 1 << 8
_ROW_MAJOR = 1  # SLANG_MATRIX_LAYOUT_ROW_MAJOR
_LOOP_INVERSION = 105  # CompilerOptionName::LoopInversion

# Places in the tables (ISlangUnknown: 0 queryInterface, 1 addRef, 2 release).
_RELEASE = 2
_GLOBAL_CREATE_SESSION = 3
_SESSION_LOAD_MODULE = 3 + 1
_SESSION_CREATE_COMPOSITE = 3 + 3
_SESSION_LOAD_FROM_SOURCE_STRING = 3 + 17
_COMPONENT_GET_LAYOUT = 3 + 1
_COMPONENT_LINK = 3 + 7
_COMPONENT_RENAME_ENTRY_POINT = 3 + 9
_COMPONENT_GET_TARGET_CODE = 3 + 11
_MODULE_FIND_ENTRY_POINT = 3 + 14 + 0
_MODULE_GET_NAME = 3 + 14 + 5
_MODULE_GET_MODULE_REFLECTION = 3 + 14 + 11


class _OptionValue(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("intValue0", ctypes.c_int32),
        ("intValue1", ctypes.c_int32),
        ("stringValue0", _STR),
        ("stringValue1", _STR),
    ]


class _OptionEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_int), ("value", _OptionValue)]


class _TargetDesc(ctypes.Structure):
    _fields_ = [
        ("structureSize", _SIZE),
        ("format", ctypes.c_int),
        ("profile", ctypes.c_uint),
        ("flags", ctypes.c_uint),
        ("floatingPointMode", ctypes.c_uint),
        ("lineDirectiveMode", ctypes.c_uint),
        ("forceGLSLScalarBufferLayout", ctypes.c_bool),
        ("compilerOptionEntries", ctypes.POINTER(_OptionEntry)),
        ("compilerOptionEntryCount", ctypes.c_uint32),
    ]


class _Macro(ctypes.Structure):
    _fields_ = [("name", _STR), ("value", _STR)]


class _SessionDesc(ctypes.Structure):
    _fields_ = [
        ("structureSize", _SIZE),
        ("targets", ctypes.POINTER(_TargetDesc)),
        ("targetCount", _INT64),
        ("flags", ctypes.c_uint32),
        ("defaultMatrixLayoutMode", ctypes.c_uint),
        ("searchPaths", ctypes.POINTER(_STR)),
        ("searchPathCount", _INT64),
        ("preprocessorMacros", ctypes.POINTER(_Macro)),
        ("preprocessorMacroCount", _INT64),
        ("fileSystem", P),
        ("enableEffectAnnotations", ctypes.c_bool),
        ("allowGLSLSyntax", ctypes.c_bool),
        ("compilerOptionEntries", ctypes.POINTER(_OptionEntry)),
        ("compilerOptionEntryCount", ctypes.c_uint32),
        ("skipSPIRVValidation", ctypes.c_bool),
    ]


def _method(obj: int, place: int, restype: Any, *argtypes: Any) -> Any:
    """Method ``place`` of the COM object ``obj``, bound to it."""
    table = ctypes.cast(obj, ctypes.POINTER(ctypes.POINTER(P))).contents
    function = ctypes.CFUNCTYPE(restype, P, *argtypes)(table[place])
    return lambda *args: function(obj, *args)


def _release(obj: int | None) -> None:
    if obj:
        _method(obj, _RELEASE, ctypes.c_uint32)()


def _diagnostics(blob: P) -> str:
    from .api import _blob_bytes

    return _blob_bytes(blob).rstrip(b"\0").decode(errors="replace") if blob else ""


class Session:
    """An ``ISession`` targeting CUDA source with ``search_paths`` and ``defines`` for every
    module, slangpy's code generation options, and whole-program output. Made, used and
    released on ``owner``'s thread."""

    def __init__(
        self,
        owner: SlangSession,
        search_paths: Sequence[Path],
        defines: Mapping[str, str],
        options: Sequence[int] = (_LOOP_INVERSION,),
    ) -> None:
        self._owner = owner
        self._lib = owner.lib
        self.modules: dict[str, int] = {}
        entries = (_OptionEntry * max(len(options), 1))(
            *(_OptionEntry(name, _OptionValue(0, 1, 0, None, None)) for name in options)
        )
        target = _TargetDesc(
            ctypes.sizeof(_TargetDesc), CUDA_SOURCE, 0, _GENERATE_WHOLE_PROGRAM, 0, 0, False
        )
        paths = [str(p).encode() for p in search_paths]
        path_array = (_STR * max(len(paths), 1))(*paths)
        macros = (_Macro * max(len(defines), 1))(
            *(_Macro(k.encode(), v.encode()) for k, v in defines.items())
        )
        desc = _SessionDesc(
            ctypes.sizeof(_SessionDesc),
            ctypes.pointer(target),
            1,
            0,
            _ROW_MAJOR,
            path_array,
            len(paths),
            macros,
            len(defines),
            None,
            False,
            False,
            entries,
            len(options),
            False,
        )
        session = P()
        create = _method(owner.handle, _GLOBAL_CREATE_SESSION, _RESULT, P, ctypes.POINTER(P))
        if create(ctypes.byref(desc), ctypes.byref(session)) < 0 or not session:
            raise SlangCompileError("Slang could not create a session")
        self._handle = session.value

    def release(self) -> None:
        """Release the session (and with it what it loaded)."""
        _release(self._handle)
        self._handle = 0

    def load(self, name: str, path: Path, source: str) -> int:
        """The module ``name`` from ``source`` (said to lie at ``path``), through the front-end
        once per session; ``SlangCompileError`` with Slang's diagnostics when it fails."""
        known = self.modules.get(name)
        if known is not None:
            return known
        diagnostics = P()
        load = _method(
            self._handle, _SESSION_LOAD_FROM_SOURCE_STRING, P, _STR, _STR, _STR, ctypes.POINTER(P)
        )
        module = load(name.encode(), str(path).encode(), source.encode(), ctypes.byref(diagnostics))
        text = _diagnostics(diagnostics)
        if not module:
            raise SlangCompileError(text)
        if _text(_method(module, _MODULE_GET_NAME, _STR)()) != name:
            raise RuntimeError("Slang's IModule is not laid out as this slangspec expects")
        self.modules[name] = module
        return module

    def load_file(self, name: str, path: Path) -> int:
        """The module ``name``, read by Slang from its file ``path``: how Slang takes a module
        that a module it imports imports again (``preimage.imported_back``)."""
        known = self.modules.get(name)
        if known is not None:
            return known
        diagnostics = P()
        load = _method(self._handle, _SESSION_LOAD_MODULE, P, _STR, ctypes.POINTER(P))
        module = load(str(path).encode(), ctypes.byref(diagnostics))
        text = _diagnostics(diagnostics)
        if not module:
            raise SlangCompileError(text)
        self.modules[name] = module
        return module

    def layout(self, module: int) -> int:
        """The program layout (``SlangReflection*``) of a loaded module."""
        get = _method(module, _COMPONENT_GET_LAYOUT, P, _INT64, ctypes.POINTER(P))
        diagnostics = P()
        layout = get(0, ctypes.byref(diagnostics))
        text = _diagnostics(diagnostics)
        if not layout:
            raise SlangCompileError(text or "Slang gave no layout")
        return layout

    def module_decl(self, module: int) -> int:
        """The declaration (``SlangReflectionDecl*``) of a loaded module."""
        return _method(module, _MODULE_GET_MODULE_REFLECTION, P)()

    def compile(
        self, kernels: Sequence[tuple[str, Path, str, str]], read: Callable[[EntryPoint], T]
    ) -> tuple[bytes, list[T]]:
        """Link ``kernels`` (module name, path, source, and the name its entry point
        ``codegen.ENTRY_POINT`` takes in the output) into one CUDA source: its code, and
        ``read`` of each kernel's entry point reflection, in order (read before it is
        released; the reflection names the entry point as its module declares it)."""
        from ...codegen import ENTRY_POINT

        parts: list[int] = []
        made: list[int] = []
        try:
            for name, path, source, entry in kernels:
                module = self.load(name, path, source)
                found = P()
                find = _method(module, _MODULE_FIND_ENTRY_POINT, _RESULT, _STR, ctypes.POINTER(P))
                if find(ENTRY_POINT.encode(), ctypes.byref(found)) < 0 or not found:
                    raise SlangCompileError(f"{name} declares no entry point {ENTRY_POINT}")
                made.append(found.value)
                renamed = P()
                rename = _method(
                    found.value, _COMPONENT_RENAME_ENTRY_POINT, _RESULT, _STR, ctypes.POINTER(P)
                )
                if rename(entry.encode(), ctypes.byref(renamed)) < 0 or not renamed:
                    raise SlangCompileError(f"Slang could not rename {name}'s entry point")
                made.append(renamed.value)
                parts += [module, renamed.value]
            linked = self._linked(parts, made)
            code, diagnostics = P(), P()
            get = _method(
                linked,
                _COMPONENT_GET_TARGET_CODE,
                _RESULT,
                _INT64,
                ctypes.POINTER(P),
                ctypes.POINTER(P),
            )
            failed = get(0, ctypes.byref(code), ctypes.byref(diagnostics)) < 0
            text = _diagnostics(diagnostics)
            if failed or not code:
                raise SlangCompileError(text or "Slang generated no code")
            from .api import _blob_bytes

            source = _blob_bytes(code)
            layout = self.layout(linked)
            lib = self._lib
            count = lib.spReflection_getEntryPointCount(layout)
            if count != len(kernels):
                raise SlangCompileError(f"Slang linked {count} entry points of {len(kernels)}")
            entries = [
                read(EntryPoint(lib, lib.spReflection_getEntryPointByIndex(layout, i)))
                for i in range(count)
            ]
            return source, entries
        finally:
            for obj in made:
                _release(obj)

    def _linked(self, parts: list[int], made: list[int]) -> int:
        array = (P * len(parts))(*parts)
        composite, diagnostics = P(), P()
        create = _method(
            self._handle,
            _SESSION_CREATE_COMPOSITE,
            _RESULT,
            ctypes.POINTER(P),
            _INT64,
            ctypes.POINTER(P),
            ctypes.POINTER(P),
        )
        failed = create(array, len(parts), ctypes.byref(composite), ctypes.byref(diagnostics))
        text = _diagnostics(diagnostics)
        if failed < 0 or not composite:
            raise SlangCompileError(text)
        made.append(composite.value)
        linked, diagnostics = P(), P()
        link = _method(
            composite.value, _COMPONENT_LINK, _RESULT, ctypes.POINTER(P), ctypes.POINTER(P)
        )
        failed = link(ctypes.byref(linked), ctypes.byref(diagnostics))
        text = _diagnostics(diagnostics)
        if failed < 0 or not linked:
            raise SlangCompileError(text)
        # Released with the others once its code and layout are read.
        made.append(linked.value)
        return linked.value
