"""A batch of instances of a Slang struct whose methods are called on every instance, as
slangpy's ``InstanceList``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .module import Module


class InstanceList:
    """Instances of struct ``struct`` of ``module``, their fields ``data``: a dict as a struct
    argument takes it (tensors with the batch's leading dimensions, Python scalars, nested
    dicts). Each method of the struct is an attribute that calls it on every instance, the
    dict as its ``this``: ``particles.reset(p, v)`` is ``m["Particle.reset"](particles.data,
    p, v)``, and a ``[mutating]`` method writes ``this`` back into the dict's tensors. Each field
    of ``data`` is an attribute too (``particles.position``). A ``static`` method takes no
    ``this``: call it through the module (``m["Particle.scaled"](x)``)."""

    def __init__(self, module: Module, struct: str, data: dict[str, Any]) -> None:
        if not isinstance(data, dict):
            raise TypeError(
                f"InstanceList of {struct}: expected a dict of its fields, got "
                f"{type(data).__name__}"
            )
        self.module = module
        self.struct = struct
        self.data = data

    def __repr__(self) -> str:
        return f"<slangspec.InstanceList of {self.module.name}::{self.struct}: {sorted(self.data)}>"

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("data")
        if data is None or name.startswith("__"):
            raise AttributeError(name)
        if name in data:
            return data[name]
        return self.method(name)

    def method(self, name: str) -> Callable[..., Any]:
        """Method ``name`` of the struct, called on every instance; UnknownFunctionError (an
        AttributeError) where the struct has no such method."""
        return functools.partial(self.module[f"{self.struct}.{name}"], self.data)
