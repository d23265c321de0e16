"""A batch of instances of a Slang struct whose methods are called on every instance, as
slangpy's ``InstanceList``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..signatures.function_ref import CONSTRUCTOR

if TYPE_CHECKING:
    from .module import Module


class InstanceList:
    """Instances of struct ``struct`` of ``module``, their fields ``data``: a dict as a struct
    argument takes it (tensors with the batch's leading dimensions, Python scalars, nested
    dicts). Each method of the struct is an attribute that calls it on every instance, the
    dict as its ``this``: ``particles.reset(p, v)`` is ``m["Particle.reset"](particles.data,
    p, v)``, and a ``[mutating]`` method writes ``this`` back into the dict's tensors. Each field
    of ``data`` is an attribute too (``particles.position``). A ``static`` method takes no
    ``this``: call it through the module (``m["Particle.scaled"](x)``). ``construct`` sets every
    instance as the struct's constructor makes it."""

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

    def construct(self, *args: Any, **keywords: Any) -> None:
        """Set every instance's fields as the struct's constructor makes them from the
        arguments (slangpy's ``construct``): a call of ``m["Particle.__init"]``, its fields
        written into ``data``'s tensors (broadcast over the batch where the arguments are
        uniform); a field ``data`` holds as a Python value takes the call's tensor."""
        made = self.module[f"{self.struct}.{CONSTRUCTOR}"](*args, **keywords)
        _write_fields(self.data, made)


def _write_fields(into: dict[str, Any], made: dict[str, Any]) -> None:
    for name, value in made.items():
        held = into.get(name)
        if isinstance(value, dict) and isinstance(held, dict):
            _write_fields(held, value)
        elif hasattr(held, "copy_"):
            held.copy_(value)
        else:
            into[name] = value
