"""``slangspec.Cache``: the cache store joined to the code generator, so that verification can
rebuild a missing kernel source from the plan stored beside it."""

from __future__ import annotations

from . import cache_store
from .codegen import kernel_source
from .specializer import SpecializationPlan


def regenerate_source(plan_json: str, label: str) -> str:
    """The kernel source a stored plan generates for ``label``."""
    return kernel_source(SpecializationPlan.from_json(plan_json), label)


class Cache(cache_store.Cache):
    __doc__ = cache_store.Cache.__doc__
    regenerate = staticmethod(regenerate_source)
