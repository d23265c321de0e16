"""Plan -> Slang source for the forward and per-grad-mask backward kernels, and the layout of
those kernels' entry-point parameters (``uniforms``, imported by its path).

Each name is imported on first use: a warm process binds and launches kernels by their
parameters' names and layouts, and never writes one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..define import lazy_face

if TYPE_CHECKING:
    from .kernels import backward_source as backward_source
    from .kernels import forward_source as forward_source
    from .kernels import kernel_source as kernel_source
    from .parameter_names import ENTRY_POINT as ENTRY_POINT

_HOME = {
    "ENTRY_POINT": ".parameter_names",
    "backward_source": ".kernels",
    "forward_source": ".kernels",
    "kernel_source": ".kernels",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_face(globals(), _HOME)
