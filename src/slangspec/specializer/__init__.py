"""Reflection and type resolution: call signature -> SpecializationPlan."""

from .plan import ArgPlan, ReturnPlan, SpecializationPlan, plan_from_signature, resolve
from .reflect import FunctionInfo, ParamInfo, TypeInfo, function_info, has_function

__all__ = [
    "ArgPlan",
    "FunctionInfo",
    "ParamInfo",
    "ReturnPlan",
    "SpecializationPlan",
    "TypeInfo",
    "function_info",
    "has_function",
    "plan_from_signature",
    "resolve",
]
