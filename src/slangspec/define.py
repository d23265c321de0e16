"""How slangspec defines its parts at a fraction of the usual cost: value classes (``@frozen``)
and package faces whose names are imported on first use (``lazy_face``).

A frozen dataclass compiles six methods, each in an ``exec`` of its own: about 0.6 ms a class
on CPython 3.11 and 0.7 ms on 3.12. A warm process defines some forty before its first call.
Here ``dataclasses`` registers the fields (so ``fields``, ``replace`` and ``asdict`` work as on
any dataclass) and compiles nothing; ``__init__`` is compiled once per shape of fields (how many
positional, how many keyword-only, whether there is a ``__post_init__``; thirteen shapes serve
the forty-three classes a warm process defines) and renamed for each class, and comparison,
hashing, ``repr`` and the refusal to assign are shared functions over the class's field names.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from functools import cache
from operator import attrgetter
from types import FunctionType
from typing import Any, TypeVar, dataclass_transform, overload

_C = TypeVar("_C", bound=type)


@overload
def frozen(cls: _C, /) -> _C: ...
@overload
def frozen(*, kw_only: bool = False) -> Callable[[_C], _C]: ...
@dataclass_transform(frozen_default=True)
def frozen(cls: Any = None, /, *, kw_only: bool = False) -> Any:
    """``dataclass(frozen=True)`` (or ``dataclass(frozen=True, kw_only=True)``): fields with
    defaults, ``field(default=..., compare=False, repr=False)`` and ``__post_init__``."""

    def make(cls: _C) -> _C:
        dataclasses.dataclass(cls, init=False, repr=False, eq=False, kw_only=kw_only)
        # What the class is, for what asks (torch.compile traces a frozen dataclass's instances
        # as values): made below instead of by dataclasses.
        params = cls.__dataclass_params__
        params.init = params.repr = params.eq = params.frozen = True
        fields = dataclasses.fields(cls)
        for f in fields:
            if not f.init or f.default_factory is not dataclasses.MISSING:
                raise TypeError(
                    f"{cls.__qualname__}.{f.name}: @frozen takes fields with at most a default"
                )
        compared = tuple(f.name for f in fields if f.compare)
        methods = {
            "__init__": lambda: _init(cls, fields),
            "__eq__": lambda: _eq(compared),
            "__hash__": lambda: _hash(compared),
            "__repr__": lambda: _repr(tuple(f.name for f in fields if f.repr)),
            "__setattr__": lambda: _refuse_setattr(cls, {f.name for f in fields}),
            "__delattr__": lambda: _refuse_delattr(cls, {f.name for f in fields}),
        }
        for name, make_method in methods.items():
            if name not in cls.__dict__:  # what the class defines itself it keeps, as a dataclass
                setattr(cls, name, make_method())
        return cls

    return make if cls is None else make(cls)


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    positional = [f for f in fields if not f.kw_only]
    keyword = [f for f in fields if f.kw_only]
    defaults = [f.default for f in positional if f.default is not dataclasses.MISSING]
    if any(f.default is dataclasses.MISSING for f in positional[len(positional) - len(defaults) :]):
        raise TypeError(f"{cls.__qualname__}: a field without a default follows one with a default")
    template, slots = _init_template(len(positional), len(keyword), hasattr(cls, "__post_init__"))
    names = {slot: f.name for slot, f in zip(slots, positional + keyword, strict=True)}
    shared = template.__code__
    code = shared.replace(
        co_varnames=("self", *names.values()),
        co_consts=tuple(names.get(c, c) if isinstance(c, str) else c for c in shared.co_consts),
        co_qualname=f"{cls.__qualname__}.__init__",
    )
    init = FunctionType(code, template.__globals__, "__init__", tuple(defaults) or None)
    keyword_defaults = {f.name: f.default for f in keyword if f.default is not dataclasses.MISSING}
    init.__kwdefaults__ = keyword_defaults or None
    init.__qualname__ = code.co_qualname
    return init


@cache
def _init_template(
    positional: int, keyword: int, post_init: bool
) -> tuple[FunctionType, list[str]]:
    """An ``__init__`` of that many positional and keyword-only fields, over placeholder names
    that ``_init`` renames in a copy of its code: one compile per shape, not one per class."""
    slots = [f"_slangspec_slot{i}" for i in range(positional + keyword)]
    parameters = ["self", *slots[:positional], *(["*", *slots[positional:]] if keyword else [])]
    # Spelled as a dataclass spells it: torch.compile follows ``object.__setattr__`` so written.
    body = [f"    _object.__setattr__(self, {slot!r}, {slot})" for slot in slots]
    if post_init:
        body.append("    self.__post_init__()")
    namespace: dict[str, Any] = {"_object": object}
    exec(f"def __init__({', '.join(parameters)}):\n" + ("\n".join(body) or "    pass"), namespace)
    return namespace["__init__"], slots


def _values(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """The tuple of the fields ``names`` that a dataclass compares and hashes."""
    if len(names) > 1:
        return attrgetter(*names)
    get = attrgetter(*names) if names else None

    def values(self: Any) -> tuple[Any, ...]:
        return () if get is None else (get(self),)

    return values


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    values = _values(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or values(self) == values(other)

    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _refuse_setattr(cls: type, names: set[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _refuse_delattr(cls: type, names: set[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def lazy_face(
    namespace: dict[str, Any], home: Mapping[str, str], whole: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (``namespace`` is its ``globals()``) that
    import each name it exports on first use: ``home`` maps a name to the module, relative to
    the package, that defines it; ``whole`` a name to the module it names whole. A name
    imported is kept in ``namespace``; ``__dir__`` lists its ``__all__``."""
    package = namespace["__name__"]
    whole = whole or {}

    def __getattr__(name: str) -> Any:
        if name in whole:
            value = importlib.import_module(whole[name], package)
        elif name in home:
            value = getattr(importlib.import_module(home[name], package), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__
