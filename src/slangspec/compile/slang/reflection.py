"""A Slang module's reflection through Slang's C API, without slangpy: what
``specializer.reflect`` reads of a module (its functions, their parameters and types, the
module's declarations), shaped as slangpy's reflection is (kinds named as slangpy names them),
so one reflection pass serves both.

A ``FrontEnd`` holds the session that loaded the module for as long as its reflection is read;
every call its reflection makes into Slang runs on the global session's thread
(``SlangSession.run``).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Iterator, Sequence
from enum import IntEnum
from typing import Any

from .api import P, SlangSession, _blob_bytes, _text


class SlangTypeKind(IntEnum):
    """``SlangTypeKind``, named as slangpy names its members; ``other`` for a kind this
    slangspec does not know."""

    other = -1
    none = 0
    struct = 1
    array = 2
    matrix = 3
    vector = 4
    scalar = 5
    constant_buffer = 6
    resource = 7
    sampler_state = 8
    texture_buffer = 9
    shader_storage_buffer = 10
    parameter_block = 11
    generic_type_parameter = 12
    interface = 13
    output_stream = 14
    mesh_output = 15
    specialized = 16
    feedback = 17
    pointer = 18
    dynamic_resource = 19
    enum = 20


class ScalarType(IntEnum):
    """``SlangScalarType``, named as slangpy names its members."""

    none = 0
    void = 1
    bool = 2
    int32 = 3
    uint32 = 4
    int64 = 5
    uint64 = 6
    float16 = 7
    float32 = 8
    float64 = 9
    int8 = 10
    uint8 = 11
    int16 = 12
    uint16 = 13


class DeclKind(IntEnum):
    """``SlangDeclKind``, named as slangpy names its members."""

    unsupported = 0
    struct = 1
    func = 2
    module = 3
    generic = 4
    variable = 5
    namespace = 6


class Modifier(IntEnum):
    """``SlangModifierID``, named as slangpy names its members."""

    shared = 0
    nodiff = 1
    static = 2
    const = 3
    export = 4
    extern = 5
    differentiable = 6
    mutating = 7
    inn = 8
    out = 9
    inout = 10


def _member(enum: type[IntEnum], value: int, default: IntEnum) -> Any:
    try:
        return enum(value)
    except ValueError:
        return default


class _Api:
    """Slang's library, each call made on the session's thread."""

    def __init__(self, session: SlangSession) -> None:
        self._lib = session.lib
        self._run = session.run

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._lib, name)
        return lambda *args: self._run(function, *args)


class TypeReflection:
    """A reflected type, read as slangpy's ``TypeReflection`` is."""

    def __init__(self, api: _Api, handle: int) -> None:
        self._api = api
        self._handle = handle

    @property
    def kind(self) -> SlangTypeKind:
        return _member(
            SlangTypeKind, self._api.spReflectionType_GetKind(self._handle), SlangTypeKind.other
        )

    @property
    def name(self) -> str:
        return _text(self._api.spReflectionType_GetName(self._handle))

    @property
    def full_name(self) -> str:
        blob = P()
        if self._api.spReflectionType_GetFullName(self._handle, ctypes.byref(blob)) < 0:
            return self.name
        return _blob_bytes(blob).rstrip(b"\0").decode() if blob else self.name

    @property
    def scalar_type(self) -> ScalarType:
        scalar = self._api.spReflectionType_GetScalarType(self._handle)
        return _member(ScalarType, scalar, ScalarType.none)

    @property
    def row_count(self) -> int:
        self._check_extents()
        return self._api.spReflectionType_GetRowCount(self._handle)

    @property
    def col_count(self) -> int:
        self._check_extents()
        return self._api.spReflectionType_GetColumnCount(self._handle)

    @property
    def element_count(self) -> int:
        self._check_extents()
        return self._api.spReflectionType_GetElementCount(self._handle)

    def _check_extents(self) -> None:
        """Raise, as slangpy does, for an extent a generic parameter leaves open
        (``vector<float,N>``, ``float[N]``): Slang aborts the process when asked for one."""
        full, kind = self.full_name, self.kind
        extents: list[str] = []
        if kind in (SlangTypeKind.vector, SlangTypeKind.matrix):
            found = re.fullmatch(r"\w+<(.*)>", full)
            extents = [a.strip() for a in found.group(1).split(",")[1:]] if found else ["?"]
        elif kind == SlangTypeKind.array:
            found = re.search(r"\[([^\]]*)\]\Z", full)
            extents = [found.group(1).strip()] if found else ["?"]
        if not all(e == "" or e.isdigit() for e in extents):
            raise RuntimeError(f"{full}: an extent depends on a generic parameter")

    @property
    def element_type(self) -> TypeReflection:
        return TypeReflection(self._api, self._api.spReflectionType_GetElementType(self._handle))

    @property
    def fields(self) -> list[VariableReflection]:
        api, handle = self._api, self._handle
        return [
            VariableReflection(api, api.spReflectionType_GetFieldByIndex(handle, i))
            for i in range(api.spReflectionType_GetFieldCount(handle))
        ]


class VariableReflection:
    """A parameter or field: its name, type and modifiers."""

    def __init__(self, api: _Api, handle: int) -> None:
        self._api = api
        self._handle = handle

    @property
    def name(self) -> str:
        return _text(self._api.spReflectionVariable_GetName(self._handle))

    @property
    def type(self) -> TypeReflection:
        return TypeReflection(self._api, self._api.spReflectionVariable_GetType(self._handle))

    def has_modifier_named(self, modifier: str) -> bool:
        found = self._api.spReflectionVariable_FindModifier(self._handle, Modifier[modifier])
        return bool(found)


class FunctionReflection:
    """A reflected function (or a set of overloads under one name)."""

    def __init__(self, api: _Api, handle: int) -> None:
        self._api = api
        self._handle = handle

    @property
    def name(self) -> str:
        return _text(self._api.spReflectionFunction_GetName(self._handle))

    @property
    def parameters(self) -> list[VariableReflection]:
        api, handle = self._api, self._handle
        return [
            VariableReflection(api, api.spReflectionFunction_GetParameter(handle, i))
            for i in range(api.spReflectionFunction_GetParameterCount(handle))
        ]

    @property
    def return_type(self) -> TypeReflection:
        return TypeReflection(self._api, self._api.spReflectionFunction_GetResultType(self._handle))

    @property
    def is_overloaded(self) -> bool:
        return bool(self._api.spReflectionFunction_isOverloaded(self._handle))

    @property
    def overloads(self) -> list[FunctionReflection]:
        """The functions an overloaded name stands for, each reflected on its own."""
        api, handle = self._api, self._handle
        return [
            FunctionReflection(api, api.spReflectionFunction_getOverload(handle, i))
            for i in range(api.spReflectionFunction_getOverloadCount(handle))
        ]

    def has_modifier_named(self, modifier: str) -> bool:
        found = self._api.spReflectionFunction_FindModifier(self._handle, Modifier[modifier])
        return bool(found)

    def specialize_with_arg_types(
        self, types: Sequence[TypeReflection | None]
    ) -> FunctionReflection | None:
        """This generic function specialized for arguments of ``types``; None when it does
        not specialize so."""
        handles = (P * max(len(types), 1))(*(t._handle if t else None for t in types))
        found = self._api.spReflectionFunction_specializeWithArgTypes(
            self._handle, len(types), handles
        )
        return FunctionReflection(self._api, found) if found else None


class ProgramLayout:
    """What slangpy's ``ProgramLayout`` offers for finding functions and types by name."""

    def __init__(self, api: _Api, handle: int) -> None:
        self._api = api
        self._handle = handle

    def find_function_by_name(self, name: str) -> FunctionReflection | None:
        found = self._api.spReflection_FindFunctionByName(self._handle, name.encode())
        return FunctionReflection(self._api, found) if found else None

    def find_function_by_name_in_type(
        self, owner: TypeReflection, name: str
    ) -> FunctionReflection | None:
        found = self._api.spReflection_FindFunctionByNameInType(
            self._handle, owner._handle, name.encode()
        )
        return FunctionReflection(self._api, found) if found else None

    def find_type_by_name(self, name: str) -> TypeReflection | None:
        found = self._api.spReflection_FindTypeByName(self._handle, name.encode())
        return TypeReflection(self._api, found) if found else None

    def is_sub_type(self, sub: TypeReflection, sup: TypeReflection) -> bool:
        return bool(self._api.spReflection_isSubType(self._handle, sub._handle, sup._handle))


class DeclReflection:
    """A declaration: its kind, name and children."""

    def __init__(self, api: _Api, handle: int) -> None:
        self._api = api
        self._handle = handle

    @property
    def kind(self) -> DeclKind:
        kind = self._api.spReflectionDecl_getKind(self._handle)
        return _member(DeclKind, kind, DeclKind.unsupported)

    @property
    def name(self) -> str:
        return _text(self._api.spReflectionDecl_getName(self._handle))

    def as_function(self) -> FunctionReflection:
        """This declaration as the function it declares (a ``func`` one)."""
        return FunctionReflection(
            self._api, self._api.spReflectionDecl_castToFunction(self._handle)
        )

    @property
    def children(self) -> Iterator[DeclReflection]:
        api, handle = self._api, self._handle
        for i in range(api.spReflectionDecl_getChildrenCount(handle)):
            yield DeclReflection(api, api.spReflectionDecl_getChild(handle, i))


class FrontEnd:
    """A Slang module through the front-end, held for its reflection: ``layout`` and
    ``module_decl`` as slangpy's ``SlangModule`` has them. ``keep`` is what must live as long
    as the reflection does (the session that loaded the module)."""

    def __init__(
        self,
        owner: SlangSession,
        layout: int,
        decl: int,
        keep: object,
        load: Callable[[str, str], bool],
    ) -> None:
        self._keep = keep
        self._load = load
        api = _Api(owner)
        self.layout = ProgramLayout(api, layout)
        self.module_decl = DeclReflection(api, decl)

    def load_source(self, name: str, text: str) -> bool:
        """Load module ``name`` from ``text`` into the session that loaded this one (a twin's
        module, which imports it); whether Slang took it."""
        return self._load(name, text)
