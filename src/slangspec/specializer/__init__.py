"""Reflection and type resolution: call signature -> SpecializationPlan."""

from .plan import ArgPlan, ReturnPlan, SpecializationPlan, plan_from_signature, resolve
from .reflect import FunctionInfo, ParamInfo, TypeInfo, function_info

__all__ = [
    "ArgPlan",
    "FunctionInfo",
    "ParamInfo",
    "ReturnPlan",
    "SpecializationPlan",
    "TypeInfo",
    "function_info",
    "plan_from_signature",
    "resolve",
]
