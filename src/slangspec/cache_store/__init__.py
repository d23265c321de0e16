"""The content-addressed cache, beside the pipeline: where (location, files), what (keys,
entries, the travelling form), how (storage tiers behind one interface, leases over them) and
policy (filters, eviction, verification, remote administration), with ``Cache`` as its face.
Nothing here knows how kernels are made.

What the rest of slangspec uses of it is named here, and only here: no module outside the
package imports one of its modules by path. ``remote_admin``, ``shipped``, ``travel`` and
``units`` are named whole, as the families of functions they are."""

from . import remote_admin, shipped, travel, units
from .cache import Cache
from .entry import (
    FORWARD,
    Entry,
    binary_added,
    binary_dropped,
    blobs_of,
    kernel_added,
    kernel_lease,
)
from .keys import are_versions, canonical, entry_facts, key_of, module_facts, source_name
from .location import (
    CacheWarning,
    cache_root,
    lease_seconds,
    process_gone,
    process_stat,
    write_atomic,
)
from .module_cache import ModuleCacheGuard, make_room_for_slots
from .module_seals import ModuleSeals
from .policy import EntryFilter, Regenerate, regenerated, select
from .remote import RemoteTier, remote_settings
from .settings import DEVICE_KINDS, check_all, setting
from .shader_snapshots import ShaderSnapshots
from .tier import Tier

__all__ = [
    "DEVICE_KINDS",
    "FORWARD",
    "Cache",
    "CacheWarning",
    "Entry",
    "EntryFilter",
    "ModuleCacheGuard",
    "ModuleSeals",
    "Regenerate",
    "RemoteTier",
    "ShaderSnapshots",
    "Tier",
    "are_versions",
    "binary_added",
    "binary_dropped",
    "blobs_of",
    "cache_root",
    "canonical",
    "check_all",
    "entry_facts",
    "kernel_added",
    "kernel_lease",
    "key_of",
    "lease_seconds",
    "make_room_for_slots",
    "module_facts",
    "process_gone",
    "process_stat",
    "regenerated",
    "remote_admin",
    "remote_settings",
    "select",
    "setting",
    "shipped",
    "source_name",
    "travel",
    "units",
    "write_atomic",
]
