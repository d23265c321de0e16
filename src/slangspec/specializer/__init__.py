"""Type resolution: call signature -> SpecializationPlan; reflection lives in ``reflect``, which
imports slangpy and so is imported only where a module must be reflected."""

from .info import FunctionInfo, ParamInfo, TypeInfo
from .plan import ArgPlan, ReturnPlan, SpecializationPlan, plan_from_signature, resolve

__all__ = [
    "ArgPlan",
    "FunctionInfo",
    "ParamInfo",
    "ReturnPlan",
    "SpecializationPlan",
    "TypeInfo",
    "plan_from_signature",
    "resolve",
]
