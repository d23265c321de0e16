"""Choosing among a function's overloads the one a call resolves against, as slangpy does."""

from __future__ import annotations

from collections.abc import Sequence

from ..signatures.text import CallSignature, parse_call_signature
from .info import FunctionInfo
from .messages import describe
from .plan import SpecializationPlan
from .resolve import resolve


def resolve_overloads(overloads: Sequence[FunctionInfo], call: CallSignature) -> SpecializationPlan:
    """The plan of the one overload of ``overloads`` that ``call`` resolves against, picked as
    slangpy picks one: each overload is resolved on its own, and exactly one must fit (one that
    fits exactly is not preferred to one that takes a conversion, a Python int for a ``float``).
    A lone function's errors are its own; otherwise a TypeError lists every candidate, with why
    each refuses the call where none fits, or those that fit where several do."""
    if not overloads:
        raise ValueError(f"{call.function_id}: no function to resolve the call against")
    if len(overloads) == 1:
        return resolve(overloads[0], call)
    fn = f"{overloads[0].module}::{overloads[0].name}"
    if call.function_id != fn:
        raise ValueError(f"call signature is for {call.function_id}, not {fn}")
    fits: list[tuple[FunctionInfo, SpecializationPlan]] = []
    refusals: list[tuple[FunctionInfo, str]] = []
    for info in overloads:
        try:
            fits.append((info, resolve(info, call)))
        except (TypeError, ValueError) as exc:
            refusals.append((info, str(exc).removeprefix(f"{fn}: ")))
    if len(fits) == 1:
        return fits[0][1]
    given = ", ".join(describe(form) for form in call.args) or "no arguments"
    if fits:
        listed = "".join(f"\n  {_candidate(info)}" for info, _ in fits)
        fix = "pass arguments that only one of them takes (a tensor of its parameter's dtype)"
        if len({info.elsewhere for info, _ in fits}) == 2:
            fix = "rename the module's function, or " + fix
        raise TypeError(
            f"{fn}: the call ({given}) is ambiguous: {len(fits)} of its {len(overloads)} "
            f"overloads take it, and none is preferred (as in slangpy):{listed}\n{fix}"
        )
    listed = "".join(f"\n  {_candidate(info)}: {why}" for info, why in refusals)
    raise TypeError(f"{fn}: none of its {len(overloads)} overloads takes ({given}):{listed}")


def _candidate(info: FunctionInfo) -> str:
    """An overload as a message lists it."""
    where = " (not declared in the module: a Slang built-in, or an import's)"
    return info.declaration + (where if info.elsewhere else "")


def plan_from_signature(
    overloads: FunctionInfo | Sequence[FunctionInfo], signature: str
) -> SpecializationPlan:
    """Build the plan from a call-signature string alone, with no tensors at hand, for a
    function or the one of its overloads the call resolves against."""
    if isinstance(overloads, FunctionInfo):
        overloads = (overloads,)
    return resolve_overloads(overloads, parse_call_signature(signature))
