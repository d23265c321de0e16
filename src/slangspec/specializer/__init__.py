"""Type resolution: call signature -> SpecializationPlan; reflection lives in ``reflect``, which
imports slangpy and so is imported only where a module must be reflected."""

from .info import FieldInfo, FunctionInfo, GenericParam, ParamInfo, TypeInfo
from .plan import (
    ArgPlan,
    OutputPlan,
    ParamPlan,
    SpecializationPlan,
    device_problem,
    plan_from_signature,
    resolve,
)

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
