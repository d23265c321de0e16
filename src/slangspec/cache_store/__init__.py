"""Where slangspec keeps generated modules, kernels and (later) compiled artifacts."""

from .location import cache_root

__all__ = ["cache_root"]
