"""Which parameters a plan's kernels pass to the function's twin as views (``ParamPlan.view``,
``codegen.views``): all of the arrays its twin takes (``FunctionInfo.viewed``), or none."""

from __future__ import annotations

from dataclasses import replace

from .info import FunctionInfo
from .plan import ArgPlan, ParamPlan, SpecializationPlan


def with_views(info: FunctionInfo, plan: SpecializationPlan) -> SpecializationPlan:
    """``plan`` with its views marked, where it has them."""
    views = _views(info, plan)
    if not views:
        return plan
    params = tuple(replace(p, view=k in views) for k, p in enumerate(plan.params))
    return replace(plan, params=params)


def _views(info: FunctionInfo, plan: SpecializationPlan) -> set[int]:
    """The parameters a kernel passes to the function's twin as views: all of those the twin
    takes (``FunctionInfo.viewed``), each differentiable and fed by tensors every call reads
    whole, whose gradients add in place; none where one of them is not, or the kernel calls
    the function through a wrapper."""
    viewed = {name for name, _ in info.viewed}
    if not viewed or plan.wrapped or not plan.differentiable:
        return set()
    views = {k for k, p in enumerate(plan.params) if p.name in viewed}
    for k in views:
        p = plan.params[k]
        leaves = plan.args[p.first : p.first + p.count]
        if (
            not p.differentiable
            or p.direction != "in"
            or not all(plan.accumulates(a) and not a.call_dims and _one_array(p, a) for a in leaves)
        ):
            return set()
    return views if len(views) == len(viewed) else set()


def _one_array(p: ParamPlan, a: ArgPlan) -> bool:
    """Whether leaf ``a`` of parameter ``p`` is one array deep: a field of an array of structs'
    elements, the elements of an array, or an array field of a struct of arrays (of scalars
    or vectors)."""
    if not p.struct:
        return not a.path and bool(a.elem)
    if p.slang_type.endswith("]"):
        return len(a.path) == 1 and len(a.arrays) == 1 and len(a.arrays[0]) == 1
    return (
        p.slang_type.isidentifier()
        and len(a.path) == 1
        and not any(a.arrays)
        and 1 <= len(a.elem) <= 2
    )
