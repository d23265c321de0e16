"""What resolution needs to know of a Slang function, as plain data that the cache can keep."""

from __future__ import annotations

from typing import Any, Literal, get_args

from ..define import frozen

TypeInfoKind = Literal[
    "scalar",
    "vector",
    "matrix",
    "array",
    "struct",
    "interface",
    "tensor",
    "generic",
    "void",
    "other",
]
Direction = Literal["in", "out", "inout"]


@frozen
class FieldInfo:
    """A struct's field: its name and type."""

    name: str
    type: TypeInfo


@frozen
class TypeInfo:
    """A parameter or return type.

    ``shape`` is the element shape a value of a vector, matrix or array type takes from a
    tensor's trailing dimensions: ``(3,)`` for ``float3``, ``(3, 3)`` for ``float3x3``, ``(5,)``
    for ``float[5]``, ``(4, 3)`` for ``float3[4]``; ``interface`` names a tensor type
    (``IDiffTensor``, ``RWTensor``, ...) of element ``scalar`` and rank ``dims``; ``fields`` are a
    struct's, in declaration order, and ``differentiable`` says whether
    it conforms to ``IDifferentiable``. A ``struct`` with a ``shape`` is an array of structs
    (``Sphere[4]``: ``(4,)``, outermost first, as for arrays of values), its fields and
    differentiability its element's. An ``interface`` type's ``conformances`` are the structs
    of the module that conform to it, each a call may name as the concrete type of its value.
    A ``generic`` type is a function's type parameter (``T`` of ``T add<T : IFloat>(T a, T
    b)``), named ``name``, which each call infers.
    """

    kind: TypeInfoKind
    name: str
    scalar: str = ""
    shape: tuple[int, ...] = ()
    interface: str = ""
    dims: int = 0
    fields: tuple[FieldInfo, ...] = ()
    differentiable: bool = False  # a struct that conforms to IDifferentiable
    conformances: tuple[TypeInfo, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "scalar": self.scalar,
            "shape": list(self.shape),
            "interface": self.interface,
            "dims": self.dims,
            "fields": [[f.name, f.type.to_json()] for f in self.fields],
            "differentiable": self.differentiable,
            "conformances": [c.to_json() for c in self.conformances],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], depth: int = 0) -> TypeInfo:
        """The inverse of ``to_json``; ValueError, TypeError or KeyError when ``data`` is not
        one's output."""
        if not isinstance(data, dict) or set(data) != set(_TYPE_FIELDS) or depth > 16:
            raise ValueError("not a type description")
        for name, kind in _TYPE_FIELDS.items():
            if type(data[name]) is not kind:
                raise ValueError(f"type field {name!r} is {data[name]!r}")
        if data["kind"] not in get_args(TypeInfoKind):
            raise ValueError(f"type kind {data['kind']!r}")
        if any(type(n) is not int or n < 0 for n in data["shape"]):
            raise ValueError(f"type shape {data['shape']!r}")
        fields = []
        for f in data["fields"]:
            if not (isinstance(f, list) and len(f) == 2 and type(f[0]) is str):
                raise ValueError(f"struct field {f!r}")
            fields.append(FieldInfo(f[0], cls.from_json(f[1], depth + 1)))
        conformances = tuple(cls.from_json(c, depth + 1) for c in data["conformances"])
        return cls(
            data["kind"],
            data["name"],
            data["scalar"],
            tuple(data["shape"]),
            data["interface"],
            data["dims"],
            tuple(fields),
            data["differentiable"],
            conformances,
        )


_TYPE_FIELDS = {
    "kind": str,
    "name": str,
    "scalar": str,
    "shape": list,
    "interface": str,
    "dims": int,
    "fields": list,
    "differentiable": bool,
    "conformances": list,
}


@frozen
class ParamInfo:
    """A function's parameter: its name, type, whether it is ``no_diff``, and its direction."""

    name: str
    type: TypeInfo
    no_diff: bool
    direction: Direction


@frozen
class GenericParam:
    """A type parameter of a generic function: its name, its constraint as the module declares
    it ("" where the module's own text does not), and the scalar types a call may bind it to
    (empty where reflection could not tell, and then any)."""

    name: str
    constraint: str
    scalars: tuple[str, ...]


@frozen
class FunctionInfo:
    """One function, or one overload of those sharing its name. ``elsewhere`` marks an overload
    the module's own source does not declare: a Slang built-in, or one an import declares."""

    module: str
    name: str
    differentiable: bool
    params: tuple[ParamInfo, ...]
    returns: TypeInfo
    generics: tuple[GenericParam, ...] = ()
    elsewhere: bool = False
    call_ids: bool = False
    """Its module asks slangpy for the call's index (``CallShapeInfo::get_call_id()``), which
    each kernel that calls it then sets."""
    viewed: tuple[tuple[str, str], ...] = ()
    """The parameters its twin (``signatures.twins``) takes as views, each with what
    ``twins.viewed_arrays`` says it views (an array's element type, or a struct of arrays),
    where Slang took the twin's module; a kernel may call the twin instead."""

    @property
    def declaration(self) -> str:
        """The overload as Slang declares it, for plans and messages: ``float twice(int x)``."""
        mark = "[Differentiable] " if self.differentiable else ""
        params = ", ".join(
            ("no_diff " if p.no_diff else "")
            + ("" if p.direction == "in" else f"{p.direction} ")
            + f"{p.type.name} {p.name}"
            for p in self.params
        )
        return f"{mark}{self.returns.name} {self.name}({params})"

    def to_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "name": self.name,
            "differentiable": self.differentiable,
            "elsewhere": self.elsewhere,
            "params": [
                {
                    "name": p.name,
                    "type": p.type.to_json(),
                    "no_diff": p.no_diff,
                    "direction": p.direction,
                }
                for p in self.params
            ],
            "returns": self.returns.to_json(),
            "generics": [[g.name, g.constraint, list(g.scalars)] for g in self.generics],
            "call_ids": self.call_ids,
            "viewed": [list(v) for v in self.viewed],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FunctionInfo:
        """The inverse of ``to_json``; TypeError, KeyError or ValueError when ``data`` is not
        one's output."""
        params = tuple(
            ParamInfo(p["name"], TypeInfo.from_json(p["type"]), p["no_diff"], p["direction"])
            for p in data["params"]
        )
        generics = tuple(
            GenericParam(name, constraint, tuple(scalars))
            for name, constraint, scalars in data["generics"]
        )
        info = cls(
            data["module"],
            data["name"],
            data["differentiable"],
            params,
            TypeInfo.from_json(data["returns"]),
            generics,
            data["elsewhere"],
            data["call_ids"],
            tuple((name, element) for name, element in data["viewed"]),
        )
        plain = [str, str, bool, bool, bool] + [str, bool, str] * len(params)
        values = [info.module, info.name, info.differentiable, info.elsewhere, info.call_ids]
        for p in params:
            values += [p.name, p.no_diff, p.direction]
        for g in generics:
            plain += [str, str, *[str] * len(g.scalars)]
            values += [g.name, g.constraint, *g.scalars]
        for name, element in info.viewed:
            plain += [str, str]
            values += [name, element]
        if (
            info.to_json() != data
            or any(type(v) is not t for v, t in zip(values, plain, strict=True))
            or any(p.direction not in get_args(Direction) for p in params)
        ):
            raise ValueError("not a function description")
        return info
