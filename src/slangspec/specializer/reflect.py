"""Slang reflection -> FunctionInfo: the plain-data view of a function that resolution needs.

The only part of resolution that needs Slang: it reads slangpy's reflection of a module, or
``compile.reflection``'s (Slang's C API, shaped alike), comparing kinds by name; a process
whose functions the cache already describes runs none of it."""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import product
from typing import TYPE_CHECKING, Any, Protocol

from ..signatures.function_ref import CONSTRUCTOR, FunctionRef, parse_function_ref
from ..signatures.scalars import SLANG, SLANG_NAME_OF_REFLECTED
from ..signatures.twins import twin_module
from .generic_values import declared_generics
from .inference import SLANG_OF_DTYPE, SLANG_OF_PYTHON
from .info import (
    Direction,
    FieldInfo,
    FunctionInfo,
    GenericParam,
    ParamInfo,
    TypeInfo,
)
from .kinds import TENSOR_TYPES, VALUE_KINDS

if TYPE_CHECKING:
    import slangpy as spy


class Reflected(Protocol):
    """A module through Slang's front-end: slangpy's on Vulkan, ``compile.FrontEnd`` (Slang's
    C API, shaped alike) on CUDA."""

    @property
    def layout(self) -> Any: ...

    @property
    def module_decl(self) -> Any: ...

    def load_source(self, name: str, text: str) -> bool:
        """Load module ``name`` from ``text`` into the session that loaded this one; whether
        Slang took it."""
        ...


_SLANG_NAMES = dict(SLANG_NAME_OF_REFLECTED)
CALL_SHAPE_INFO = "CallShapeInfo"
"""slangpy's type that gives a called function the call's index: a module whose text names it
has its kernels set that index (``FunctionInfo.call_ids``)."""

_GENERIC_RE = re.compile(r"(\w+)<\s*(\w+|vector<\s*\w+\s*,\s*\d+\s*>)\s*,\s*(\d+)\s*>")
_VECTOR_RE = re.compile(r"vector<\s*(\w+)\s*,\s*([1-4])\s*>")


def type_info(
    t: spy.TypeReflection, layout: spy.ProgramLayout, depth: int = 0, structs: bool = True
) -> TypeInfo:
    """Classify one reflected type of ``layout``; a struct as "other" unless ``structs`` (Slang
    crashes reading some of its built-in generic structs, ``CoopVec<T, N>``)."""
    full = t.full_name
    kind = t.kind.name
    if kind == "scalar":
        if _scalar_type(t) == "void":
            return TypeInfo("void", full)
        scalar = _SLANG_NAMES.get(_scalar_type(t))
        return TypeInfo("scalar", full, scalar) if scalar else TypeInfo("other", full)
    if kind == "vector":
        scalar = _SLANG_NAMES.get(_scalar_type(t))
        cols = _count(t, "col_count")
        if scalar and 1 <= cols <= 4:
            return TypeInfo("vector", full, scalar, (cols,))
        return TypeInfo("other", full)
    if kind == "matrix":
        scalar = _SLANG_NAMES.get(_scalar_type(t))
        rows, cols = _count(t, "row_count"), _count(t, "col_count")
        if scalar and 1 <= rows <= 4 and 1 <= cols <= 4:
            return TypeInfo("matrix", full, scalar, (rows, cols))
        return TypeInfo("other", full)
    if kind == "array":
        element = type_info(t.element_type, layout, depth + 1, structs)
        count = _count(t, "element_count")
        if element.kind in VALUE_KINDS and count > 0:
            return TypeInfo("array", full, element.scalar, (count, *element.shape))
        if element.kind == "struct" and count > 0:
            return replace(element, name=full, shape=(count, *element.shape))
        return TypeInfo("other", full)
    m = _GENERIC_RE.fullmatch(full)
    if m and m.group(1) in TENSOR_TYPES and kind in ("interface", "struct"):
        element, shape = m.group(2), ()
        vector = _VECTOR_RE.fullmatch(element)
        if vector:  # a tensor of vectors: their components are the tensor's last dimension
            element, shape = vector.group(1), (int(vector.group(2)),)
        if element in SLANG:
            return TypeInfo("tensor", full, element, shape, m.group(1), int(m.group(3)))
        return TypeInfo("other", full)
    if kind == "struct" and structs and depth < 8:
        fields = tuple(FieldInfo(f.name, type_info(f.type, layout, depth + 1)) for f in t.fields)
        differentiable = _differentiable(layout, t)
        return TypeInfo("struct", full, fields=fields, differentiable=differentiable)
    if kind == "interface" and structs:
        return TypeInfo("interface", full)
    if kind == "none" and full == "void":
        return TypeInfo("void", full)
    if kind == "none" and full.isidentifier():
        return TypeInfo("generic", full)
    return TypeInfo("other", full)


def _scalar_type(t: spy.TypeReflection) -> str:
    """The reflected name of ``t``'s scalar type; "" for one slangpy's enumeration lacks
    (Slang's ``BFloat16``)."""
    try:
        return t.scalar_type.name
    except ValueError:
        return ""


def _count(t: spy.TypeReflection, field: str) -> int:
    """An extent of ``t``; 0 where a generic parameter (``vector<float, N>``) leaves it open,
    which slangpy reports by raising."""
    try:
        return int(getattr(t, field))
    except (SystemError, RuntimeError, TypeError, ValueError):
        return 0


def _differentiable(layout: spy.ProgramLayout, t: spy.TypeReflection) -> bool:
    interface = layout.find_type_by_name("IDifferentiable")
    return interface is not None and bool(layout.is_sub_type(t, interface))


def _has(item: Any, modifier: str) -> bool:
    """Whether a reflected variable or function has ``modifier`` (named as slangpy's
    ``ModifierID`` names it)."""
    named = getattr(item, "has_modifier_named", None)
    if named is not None:
        return named(modifier)
    import slangpy as spy

    return bool(item.has_modifier(getattr(spy.ModifierID, modifier)))


def _direction(p: spy.VariableReflection) -> Direction:
    if _has(p, "inout"):
        return "inout"
    if _has(p, "out"):
        return "out"
    return "in"


def function_names(module: Reflected) -> list[str]:
    """The functions ``module`` itself declares, generic ones aside (Slang's declaration
    reflection does not name those), sorted."""
    return sorted({d.name for d in module.module_decl.children if d.kind.name == "func"})


def _find(layout: spy.ProgramLayout, name: str) -> spy.FunctionReflection | None:
    """Function ``name`` (a struct's constructors by ``CONSTRUCTOR``), or None."""
    ref = parse_function_ref(name)
    if ref.owner is None or ref.name != CONSTRUCTOR:
        return layout.find_function_by_name(name)
    owner = layout.find_type_by_name(ref.owner.text)
    return None if owner is None else layout.find_function_by_name_in_type(owner, "$init")


def has_function(module: Reflected, name: str) -> bool:
    """Whether ``name`` is a function ``module`` can call (its own or one it imports)."""
    return _find(module.layout, name) is not None


def function_overloads(
    module: Reflected, module_name: str, name: str, text: str = ""
) -> tuple[FunctionInfo, ...]:
    """Reflect every overload of ``name`` in ``module``, whose own source is ``text``, ordered
    by declaration (so both front-ends list them alike); () when the module has no such
    function. Where the module's own function shares its name with Slang's built-ins, these
    are among the overloads, as a call's resolution sees them."""
    f = _find(module.layout, name)
    if f is None:
        return ()
    ref = parse_function_ref(name)
    owner = None if ref.owner is None else module.layout.find_type_by_name(ref.owner.text)
    call_ids = CALL_SHAPE_INFO in text
    if not f.is_overloaded:
        declared = declared_generics(text, name)
        info = _describe(module.layout, f, module_name, name, declared, owner=owner)
        viewed = _viewed(module, module_name, text, name) if owner is None and not declared else ()
        return (replace(_with_conformances(module, info), call_ids=call_ids, viewed=viewed),)
    own = {
        tuple(p.type.full_name for p in d.as_function().parameters)
        for d in module.module_decl.children
        if d.kind.name == "func" and d.name == name
    }
    declared = declared_generics(text, name)
    overloads = []
    for o in f.overloads:
        types = tuple(p.type.full_name for p in o.parameters)
        generic = any(
            p.type.kind.name == "none" and t.isidentifier()
            for p, t in zip(o.parameters, types, strict=True)
        )
        # A method is the struct's own: none of Slang's built-ins are named after it.
        mine = owner is not None or types in own or (generic and bool(declared))
        info = _describe(module.layout, o, module_name, name, declared if mine else {}, mine, owner)
        info = replace(_with_conformances(module, info), elsewhere=not mine, call_ids=call_ids)
        overloads.append(info)
    return tuple(sorted(overloads, key=lambda i: (i.elsewhere, i.declaration)))


def _viewed(
    module: Reflected, module_name: str, text: str, name: str
) -> tuple[tuple[str, str], ...]:
    """The parameters of function ``name`` its twin takes as views, where Slang takes
    the twin's module (``signatures.twins``) in the session that loaded ``module``."""
    twin = twin_module(module_name, text, name)
    if twin is None or not module.load_source(twin.name, twin.text):
        return ()
    return tuple(twin.viewed.items())


def _describe(
    layout: spy.ProgramLayout,
    f: spy.FunctionReflection,
    module_name: str,
    name: str,
    declared: dict[str, str],
    structs: bool = True,
    owner: spy.TypeReflection | None = None,
) -> FunctionInfo:
    """One function (one overload), its generics' constraints as ``declared``; its struct types
    described field by field where ``structs``, else as "other". A method of struct ``owner``
    that is not ``static`` takes the struct first, as parameter ``this``: ``inout`` where the
    method is ``[mutating]``."""
    params = tuple(
        ParamInfo(p.name, type_info(p.type, layout, 0, structs), _has(p, "nodiff"), _direction(p))
        for p in f.parameters
    )
    generics = _generics(layout, f, params, declared)
    if owner is not None and not _has(f, "static") and parse_function_ref(name).name != CONSTRUCTOR:
        this = type_info(owner, layout, 0, structs)
        params = (ParamInfo("this", this, False, "inout" if _has(f, "mutating") else "in"), *params)
    return FunctionInfo(
        module_name,
        name,
        _has(f, "differentiable"),
        params,
        type_info(f.return_type, layout, 0, structs),
        generics,
    )


def _with_conformances(module: Reflected, info: FunctionInfo) -> FunctionInfo:
    """``info`` with each interface type of its parameters listing the structs the module
    declares that conform to it."""
    found: dict[str, tuple[TypeInfo, ...]] = {}

    def conformances(interface: str) -> tuple[TypeInfo, ...]:
        if interface not in found:
            layout = module.layout
            wanted = layout.find_type_by_name(interface)
            structs = [
                t
                for t in (
                    layout.find_type_by_name(d.name)
                    for d in module.module_decl.children
                    if d.kind.name == "struct"
                )
                if t is not None and t.kind.name == "struct"
            ]
            found[interface] = tuple(
                type_info(t, layout)
                for t in structs
                if wanted is not None and layout.is_sub_type(t, wanted)
            )
        return found[interface]

    params = tuple(
        replace(p, type=replace(p.type, conformances=conformances(p.type.name)))
        if p.type.kind == "interface"
        else p
        for p in info.params
    )
    return info if params == info.params else replace(info, params=params)


_BINDABLE = tuple(sorted(set(SLANG_OF_DTYPE.values()) | set(SLANG_OF_PYTHON.values())))
"""The scalar types a call can bind a generic type parameter to."""
_MAX_GENERICS = 2
"""Functions with more type parameters inferred from the call are not probed (6 ** n tries)."""


def _generics(
    layout: spy.ProgramLayout,
    f: spy.FunctionReflection,
    params: tuple[ParamInfo, ...],
    declared: dict[str, str],
) -> tuple[GenericParam, ...]:
    """The type parameters of ``f`` that its parameters take directly, each with the scalar
    types that specialize ``f`` as they are (Slang would convert one it does not accept, an
    ``int`` for ``T : IFloat`` into ``float``, and say so only as a warning)."""
    names = sorted({p.type.name for p in params if p.type.kind == "generic"})
    if not names or len(names) > _MAX_GENERICS:
        return ()
    reflected = [p.type for p in f.parameters]
    types = {s: layout.find_type_by_name(s) for s in _BINDABLE}
    accepted: dict[str, set[str]] = {n: set() for n in names}
    for combo in product(_BINDABLE, repeat=len(names)):
        bound = dict(zip(names, combo, strict=True))
        args = [
            types[bound[p.type.name]] if p.type.kind == "generic" else t
            for p, t in zip(params, reflected, strict=True)
        ]
        g = f.specialize_with_arg_types(args)
        if g is None:
            continue
        got = [q.type.full_name for q in g.parameters]
        if all(
            got[k] == bound[p.type.name] for k, p in enumerate(params) if p.type.kind == "generic"
        ):
            for n in names:
                accepted[n].add(bound[n])
    if not any(accepted.values()):
        return ()  # reflection cannot tell (another parameter's type does not specialize)
    return tuple(GenericParam(n, declared.get(n, ""), tuple(sorted(accepted[n]))) for n in names)


def unspecialized(module: Reflected, text: str, ref: FunctionRef) -> str | None:
    """Why the generic function ``ref`` names does not specialize with its arguments, when
    ``module`` has the function under ``ref``'s bare name; None when it does not."""
    layout = module.layout
    if ref.args is None or layout.find_function_by_name(ref.name) is None:
        return None
    declared = declared_generics(text, ref.name)
    shown = f"{ref.name}<{', '.join(f'{n} : {c}' if c else n for n, c in declared.items())}>"
    for (param, constraint), arg in zip(declared.items(), ref.args, strict=False):
        if not constraint or not isinstance(arg, FunctionRef):
            continue
        given, bound = layout.find_type_by_name(arg.text), layout.find_type_by_name(constraint)
        if given is None:
            return f"{arg.text} is not a type it knows (for {param} of {shown})"
        if bound is not None and not layout.is_sub_type(given, bound):
            return f"{arg.text} does not conform to {constraint} ({param} of {shown})"
    if declared:
        return f"its generic arguments do not specialize {shown}"
    return f"{ref.name} takes no such generic arguments"
