"""``slangspec.Cache``: the cache store joined to the code generator, so that verification can
check every stored kernel source against the plan beside it, and rebuild a missing one."""

from __future__ import annotations

from typing import Any

from .. import cache_store


def regenerate_source(plan_json: str, preimage: dict[str, Any], label: str) -> str:
    """The kernel source a stored plan generates for ``label``; ValueError when the plan is not
    a plan, or not one for the call ``preimage`` keys."""
    # Only repairs and imports regenerate: listing the cache needs no code generator (nor torch).
    from ..codegen import kernel_source
    from ..specializer import SpecializationPlan

    try:
        plan = SpecializationPlan.from_json(plan_json)
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"not a plan ({type(exc).__name__}: {exc})") from None
    made_for = (plan.module, plan.function, plan.signature)
    keyed = (preimage.get("module"), preimage.get("function"), preimage.get("signature"))
    if made_for != keyed:
        raise ValueError(f"a plan for {plan.signature!r}, not for {keyed[2]!r}")
    return kernel_source(plan, label)


def resolved_plan(description: list[dict[str, Any]], preimage: dict[str, Any]) -> str:
    """The plan, as JSON, type resolution makes for the call ``preimage`` keys from a function's
    stored ``description``, one per overload; ValueError when it does not decode or does not
    take that call."""
    from ..specializer import FunctionInfo, plan_from_signature

    try:
        overloads = [FunctionInfo.from_json(d) for d in description]
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"it does not decode ({type(exc).__name__}: {exc})") from None
    try:
        return plan_from_signature(overloads, preimage["signature"]).to_json()
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


class Cache(cache_store.CacheStore):
    __doc__ = cache_store.CacheStore.__doc__
    regenerate = staticmethod(regenerate_source)
    replan = staticmethod(resolved_plan)
