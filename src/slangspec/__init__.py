"""slangspec: specialized, cached, differentiable Slang kernels for PyTorch.

Names are imported on first use: ``import slangspec`` brings in neither torch nor slangpy, so
tools that only read the cache start in a fraction of a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .define import lazy_face
from .formats import VERSION as __version__

if TYPE_CHECKING:
    from .cache_store import CacheWarning as CacheWarning
    from .cache_store import EntryFilter as EntryFilter
    from .compile import SlangCompileError as SlangCompileError
    from .errors import Error as Error
    from .errors import SlangspecWarning as SlangspecWarning
    from .formats import SIGNATURE_FORMAT as SIGNATURE_FORMAT
    from .runtime.backend import SlangUnavailableError as SlangUnavailableError
    from .runtime.backend import StillCompilingWarning as StillCompilingWarning
    from .runtime.cache import Cache as Cache
    from .runtime.devices import DeviceUnavailableError as DeviceUnavailableError
    from .runtime.instances import InstanceList as InstanceList
    from .runtime.module import Function as Function
    from .runtime.module import Module as Module
    from .runtime.module import load as load
    from .runtime.module import load_source as load_source
    from .runtime.module_base import UnknownFunctionError as UnknownFunctionError
    from .settings import SettingWarning as SettingWarning
    from .signatures import ArgumentError as ArgumentError
    from .signatures import ArgumentTypeError as ArgumentTypeError
    from .signatures import ArgumentValueError as ArgumentValueError
    from .signatures import call_signature as call_signature
    from .signatures import grid as grid
    from .signatures import signature as signature
    from .signatures.generators import call_id as call_id
    from .signatures.generators import rand_float as rand_float
    from .signatures.generators import thread_id as thread_id
    from .signatures.generators import wang_hash as wang_hash
    from .specializer import SpecializationPlan as SpecializationPlan

_HOME = {
    "SIGNATURE_FORMAT": ".formats",
    "Error": ".errors",
    "SlangspecWarning": ".errors",
    "Cache": ".runtime.cache",
    "CacheWarning": ".cache_store",
    "DeviceUnavailableError": ".runtime.devices",
    "EntryFilter": ".cache_store",
    "InstanceList": ".runtime.instances",
    "Function": ".runtime.module",
    "Module": ".runtime.module",
    "SlangCompileError": ".compile",
    "SettingWarning": ".settings",
    "SlangUnavailableError": ".runtime.backend",
    "StillCompilingWarning": ".runtime.backend",
    "SpecializationPlan": ".specializer",
    "UnknownFunctionError": ".runtime.module_base",
    "ArgumentError": ".signatures",
    "ArgumentTypeError": ".signatures",
    "ArgumentValueError": ".signatures",
    "call_id": ".signatures.generators",
    "call_signature": ".signatures",
    "grid": ".signatures",
    "load": ".runtime.module",
    "load_source": ".runtime.module",
    "rand_float": ".signatures.generators",
    "signature": ".signatures",
    "thread_id": ".signatures.generators",
    "wang_hash": ".signatures.generators",
}

__all__ = ["__version__", *_HOME]

__getattr__, __dir__ = lazy_face(globals(), _HOME)
