"""Generic type parameters inferred from a call's arguments, as slangpy infers them."""

from __future__ import annotations

from dataclasses import replace

from ..signatures.scalars import SLANG, SLANG_FLOATS
from ..signatures.text import ArgForm, CallSignature, ScalarForm, TensorForm, argument_label
from .info import FunctionInfo, GenericParam, ParamInfo, TypeInfo
from .messages import describe

_SLANG_INTEGERS = tuple(name for name, s in SLANG.items() if s.py_type is int)
PY_SCALARS_FOR = {
    "f": SLANG_FLOATS,
    "i": (*SLANG_FLOATS, *_SLANG_INTEGERS),
    "b": ("bool", *_SLANG_INTEGERS),  # Slang converts a bool to an integer, and slangpy passes it
}
SLANG_OF_PYTHON = {"f": "float", "i": "int", "b": "bool"}
SLANG_OF_DTYPE = {s.dtype: name for name, s in reversed(SLANG.items())}
"""The Slang scalar a tensor of each dtype passes as, where a generic type is inferred
(``int32`` is ``int``, not ``uint``)."""


def inferred(info: FunctionInfo, call: CallSignature) -> FunctionInfo:
    """``info`` with each generic type parameter bound to the scalar type of the arguments it
    types, as slangpy infers them: a tensor's dtype, else a Python scalar's kind (a Python scalar
    takes the type a tensor gave the same generic, where it converts to it: a float for
    ``double``); Slang infers the same from the generated call. TypeError naming the argument
    where that is not possible or two arguments disagree."""
    generic = [k for k, p in enumerate(info.params) if p.type.kind == "generic"]
    if not generic and info.returns.kind != "generic":
        return info
    fn = f"{info.module}::{info.name}"
    bound: dict[str, tuple[str, int]] = {}
    # Tensors first: a Python scalar takes the type a tensor gave its generic, where it can.
    for k in sorted(generic, key=lambda k: isinstance(call.args[k], ScalarForm)):
        p, form = info.params[k], call.args[k]
        if isinstance(form, TensorForm) and form.dtype in SLANG_OF_DTYPE:
            scalar = SLANG_OF_DTYPE[form.dtype]
        elif isinstance(form, ScalarForm):
            held = bound.get(p.type.name, ("", k))[0]
            scalar = held if held in PY_SCALARS_FOR[form.kind] else SLANG_OF_PYTHON[form.kind]
        else:
            raise TypeError(
                f"{fn}: {argument_label(k, p.name)}: expected a tensor or Python scalar to infer "
                f"the generic type {p.type.name} from, got {describe(form)}; name the type "
                f"explicitly ({info.name}<...>)"
            )
        _check_constraint(fn, k, p, form, scalar, info.generics)
        first = bound.setdefault(p.type.name, (scalar, k))
        if first[0] != scalar:
            raise TypeError(
                f"{fn}: {argument_label(k, p.name)}: expected {first[0]} for the generic type "
                f"{p.type.name} (as {argument_label(first[1], info.params[first[1]].name)} has "
                f"it), got {scalar}"
            )
    r = info.returns
    if r.kind == "generic":
        if r.name not in bound:
            raise TypeError(
                f"{fn}: the return type {r.name} is not the type of any argument, so it cannot "
                f"be inferred; name it explicitly ({info.name}<...>)"
            )
        r = TypeInfo("scalar", bound[r.name][0], bound[r.name][0])
    params = tuple(
        replace(p, type=TypeInfo("scalar", bound[p.type.name][0], bound[p.type.name][0]))
        if p.type.kind == "generic"
        else p
        for p in info.params
    )
    return replace(info, params=params, returns=r)


def _check_constraint(
    fn: str,
    k: int,
    p: ParamInfo,
    form: ArgForm,
    scalar: str,
    generics: tuple[GenericParam, ...],
) -> None:
    """TypeError naming argument ``k`` when ``scalar``, which it binds the generic type of
    parameter ``p`` to, is not one the type parameter accepts."""
    for g in generics:
        if g.name == p.type.name and g.scalars and scalar not in g.scalars:
            refused = f"does not conform to {g.constraint}" if g.constraint else "it refuses"
            raise TypeError(
                f"{fn}: {argument_label(k, p.name)}: {describe(form)} makes the generic type "
                f"{g.name} {scalar}, which {refused} ({g.name} takes {', '.join(g.scalars)})"
            )
