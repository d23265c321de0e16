"""Plan -> Slang source for the forward and per-grad-mask backward kernels."""

from .kernels import ENTRY_POINT, backward_source, forward_source, kernel_source

__all__ = ["ENTRY_POINT", "backward_source", "forward_source", "kernel_source"]
