"""Plan -> Slang source for the forward and per-grad-mask backward kernels, and the layout of
those kernels' entry-point parameters (``uniforms``, imported by its path)."""

from .kernels import ENTRY_POINT, backward_source, forward_source, kernel_source

__all__ = ["ENTRY_POINT", "backward_source", "forward_source", "kernel_source"]
