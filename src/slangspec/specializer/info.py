"""What resolution needs to know of a Slang function, as plain data that the cache can keep."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, get_args

TypeKind = Literal["scalar", "vector", "tensor", "void", "other"]
Direction = Literal["in", "out", "inout"]
TENSOR_INTERFACES = ("ITensor", "IRWTensor", "IWTensor", "IDiffTensor")


@dataclass(frozen=True)
class TypeInfo:
    """A parameter or return type."""

    kind: TypeKind
    name: str
    scalar: str = ""
    width: int = 0
    interface: str = ""
    dims: int = 0


@dataclass(frozen=True)
class ParamInfo:
    name: str
    type: TypeInfo
    no_diff: bool
    direction: Direction


@dataclass(frozen=True)
class FunctionInfo:
    module: str
    name: str
    differentiable: bool
    params: tuple[ParamInfo, ...]
    returns: TypeInfo

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = list(data["params"])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FunctionInfo:
        """The inverse of ``to_json``; TypeError, KeyError or ValueError when ``data`` is not
        one's output."""
        params = tuple(
            ParamInfo(p["name"], _type(p["type"]), p["no_diff"], p["direction"])
            for p in data["params"]
        )
        info = cls(
            data["module"],
            data["name"],
            data["differentiable"],
            params,
            _type(data["returns"]),
        )
        plain = [str, str, bool] + [str, bool, str] * len(params)
        values = [info.module, info.name, info.differentiable]
        for p in params:
            values += [p.name, p.no_diff, p.direction]
        if (
            info.to_json() != data
            or any(type(v) is not t for v, t in zip(values, plain, strict=True))
            or any(p.direction not in get_args(Direction) for p in params)
        ):
            raise ValueError("not a function description")
        return info


def _type(data: dict[str, Any]) -> TypeInfo:
    t = TypeInfo(**data)
    for f in fields(t):
        if type(getattr(t, f.name)) is not (int if f.name in ("width", "dims") else str):
            raise ValueError(f"type field {f.name!r} is {getattr(t, f.name)!r}")
    if t.kind not in get_args(TypeKind):
        raise ValueError(f"type kind {t.kind!r}")
    return t
