"""slangspec: specialized, cached, differentiable Slang kernels for PyTorch."""

from ._version import __version__
from .cache import Cache
from .cache_store import CacheWarning, EntryFilter
from .runtime import Function, Module, UnknownFunctionError, load, load_source
from .signature import SIGNATURE_FORMAT, call_signature, grid, signature
from .specializer import SpecializationPlan

__all__ = [
    "SIGNATURE_FORMAT",
    "Cache",
    "CacheWarning",
    "EntryFilter",
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
