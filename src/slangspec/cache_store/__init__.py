"""The content-addressed cache, beside the pipeline: where (location), what (keys, entries), how
(storage tiers behind one interface) and policy (filters, eviction, verification), with
``Cache`` as its face. Nothing here knows how kernels are made."""

from .cache import Cache
from .entry import FORWARD, Entry, kernel_lease
from .keys import key_of
from .location import CacheWarning
from .policy import EntryFilter, Regenerate
from .shader_snapshots import ShaderSnapshots
from .tier import Tier

__all__ = [
    "FORWARD",
    "Cache",
    "CacheWarning",
    "Entry",
    "EntryFilter",
    "Regenerate",
    "ShaderSnapshots",
    "Tier",
    "kernel_lease",
    "key_of",
]
