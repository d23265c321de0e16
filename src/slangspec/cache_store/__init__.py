"""The content-addressed cache, beside the pipeline: where (location, files), what (keys,
entries, the travelling form), how (storage tiers behind one interface, leases over them) and
policy (filters, eviction, verification, remote administration), with ``CacheStore`` as its face.
Nothing here knows how kernels are made.

What the rest of slangspec uses of it is named here, and only here: no module outside the
package imports one of its modules by path. ``remote_admin``, ``shipped`` and ``travel`` are
named whole, as the families of functions they are. Each is imported on first use: a warm
process reads kernels without the modules that evict, report, verify or reach a server. The
settings it reads, as every room does, are the foundation's (``slangspec.settings``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..define import lazy_face

if TYPE_CHECKING:
    from . import remote_admin as remote_admin
    from . import shipped as shipped
    from . import travel as travel
    from .cache import CacheStore as CacheStore
    from .entry import FORWARD as FORWARD
    from .entry import Entry as Entry
    from .entry import binary_added as binary_added
    from .entry import binary_dropped as binary_dropped
    from .entry import blobs_of as blobs_of
    from .entry import kernel_added as kernel_added
    from .entry import kernel_lease as kernel_lease
    from .keys import are_versions as are_versions
    from .keys import canonical as canonical
    from .keys import entry_facts as entry_facts
    from .keys import key_of as key_of
    from .keys import module_facts as module_facts
    from .keys import source_name as source_name
    from .location import CacheWarning as CacheWarning
    from .location import cache_root as cache_root
    from .location import lease_seconds as lease_seconds
    from .location import process_gone as process_gone
    from .location import process_stat as process_stat
    from .location import write_atomic as write_atomic
    from .module_cache import ModuleCacheGuard as ModuleCacheGuard
    from .module_cache import make_room_for_slots as make_room_for_slots
    from .module_seals import ModuleSeals as ModuleSeals
    from .policy import EntryFilter as EntryFilter
    from .policy import Regenerate as Regenerate
    from .policy import regenerated as regenerated
    from .policy import select as select
    from .remote import RemoteTier as RemoteTier
    from .remote_config import remote_settings as remote_settings
    from .shader_snapshots import ShaderSnapshots as ShaderSnapshots
    from .tier import Tier as Tier

_WHOLE = {"remote_admin": ".remote_admin", "shipped": ".shipped", "travel": ".travel"}
_HOME = {
    "CacheStore": ".cache",
    "Entry": ".entry",
    "FORWARD": ".entry",
    "binary_added": ".entry",
    "binary_dropped": ".entry",
    "blobs_of": ".entry",
    "kernel_added": ".entry",
    "kernel_lease": ".entry",
    "are_versions": ".keys",
    "canonical": ".keys",
    "entry_facts": ".keys",
    "key_of": ".keys",
    "module_facts": ".keys",
    "source_name": ".keys",
    "CacheWarning": ".location",
    "cache_root": ".location",
    "lease_seconds": ".location",
    "process_gone": ".location",
    "process_stat": ".location",
    "write_atomic": ".location",
    "ModuleCacheGuard": ".module_cache",
    "make_room_for_slots": ".module_cache",
    "ModuleSeals": ".module_seals",
    "EntryFilter": ".policy",
    "Regenerate": ".policy",
    "regenerated": ".policy",
    "select": ".policy",
    "RemoteTier": ".remote",
    "remote_settings": ".remote_config",
    "ShaderSnapshots": ".shader_snapshots",
    "Tier": ".tier",
}

__all__ = sorted([*_WHOLE, *_HOME])

__getattr__, __dir__ = lazy_face(globals(), _HOME, _WHOLE)
