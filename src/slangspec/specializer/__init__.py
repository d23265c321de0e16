"""Type resolution: call signature -> SpecializationPlan; reflection lives in ``reflect``, which
imports slangpy and so is imported only where a module must be reflected.

Each name is imported on first use: a warm process reads its plans from the cache and so
imports the plan's data and never the resolver that makes one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..define import lazy_face

if TYPE_CHECKING:
    from .info import FieldInfo as FieldInfo
    from .info import FunctionInfo as FunctionInfo
    from .info import GenericParam as GenericParam
    from .info import ParamInfo as ParamInfo
    from .info import TypeInfo as TypeInfo
    from .overloads import plan_from_signature as plan_from_signature
    from .plan import ArgPlan as ArgPlan
    from .plan import OutputPlan as OutputPlan
    from .plan import ParamPlan as ParamPlan
    from .plan import SpecializationPlan as SpecializationPlan
    from .plan import device_problem as device_problem
    from .resolve import resolve as resolve

_HOME = {
    "FieldInfo": ".info",
    "FunctionInfo": ".info",
    "GenericParam": ".info",
    "ParamInfo": ".info",
    "TypeInfo": ".info",
    "plan_from_signature": ".overloads",
    "ArgPlan": ".plan",
    "OutputPlan": ".plan",
    "ParamPlan": ".plan",
    "SpecializationPlan": ".plan",
    "device_problem": ".plan",
    "resolve": ".resolve",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_face(globals(), _HOME)
