"""Type resolution: call signature -> SpecializationPlan; reflection lives in ``reflect``, which
imports slangpy and so is imported only where a module must be reflected."""

from .info import FieldInfo, FunctionInfo, GenericParam, ParamInfo, TypeInfo
from .overloads import plan_from_signature
from .plan import ArgPlan, OutputPlan, ParamPlan, SpecializationPlan, device_problem
from .resolve import resolve

__all__ = [
    "ArgPlan",
    "FieldInfo",
    "FunctionInfo",
    "GenericParam",
    "OutputPlan",
    "ParamInfo",
    "ParamPlan",
    "SpecializationPlan",
    "TypeInfo",
    "device_problem",
    "plan_from_signature",
    "resolve",
]
