"""The content-addressed disk cache: where (location), what (preimage), how (store) and
policy (eviction, verification), with ``Cache`` as its public face."""

from .cache import Cache
from .location import cache_root
from .store import CacheWarning

__all__ = ["Cache", "CacheWarning", "cache_root"]
