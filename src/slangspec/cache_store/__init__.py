"""The content-addressed cache, beside the pipeline: where (location, files), what (keys,
entries, the travelling form), how (storage tiers behind one interface, leases over them) and
policy (filters, eviction, verification, remote administration), with ``Cache`` as its face.
Nothing here knows how kernels are made."""

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
