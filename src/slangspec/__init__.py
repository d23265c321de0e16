"""slangspec: specialized, cached, differentiable Slang kernels for PyTorch."""

from .runtime import Function, Module, UnknownFunctionError, load, load_source
from .signature import SIGNATURE_FORMAT, call_signature, grid, signature
from .specializer import SpecializationPlan

__version__ = "0.1.0"

__all__ = [
    "SIGNATURE_FORMAT",
    "Function",
    "Module",
    "SpecializationPlan",
    "UnknownFunctionError",
    "__version__",
    "call_signature",
    "grid",
    "load",
    "load_source",
    "signature",
]
