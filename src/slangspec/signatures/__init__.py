"""Python values to composed signatures: the signature format as text (``text``), the table of
Python values with one row per kind of value (``values``, ``value_row`` and the ``value_*``
rows), the composer (``compose``), call shapes, generators, scalars, and what a key covers of
the user's code (``function_ref``, ``module_text``, ``preimage``, ``reach``). It reads only the
foundation: nothing here knows plans, kernels, devices or the cache.

The composer's names are imported on first use, as it imports torch: a process that only reads
signatures as text (the command line, the compile server) never does. Every other module of the
room is imported by its path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..define import lazy_face

if TYPE_CHECKING:
    from .call_shapes import grid as grid
    from .call_shapes import result_shape as result_shape
    from .compose import ArgumentError as ArgumentError
    from .compose import ArgumentTypeError as ArgumentTypeError
    from .compose import ArgumentValueError as ArgumentValueError
    from .compose import call_signature as call_signature
    from .compose import signature as signature
    from .compose import tensor_signature as tensor_signature

_HOME = {
    "grid": ".call_shapes",
    "result_shape": ".call_shapes",
    "ArgumentError": ".compose",
    "ArgumentTypeError": ".compose",
    "ArgumentValueError": ".compose",
    "call_signature": ".compose",
    "signature": ".compose",
    "tensor_signature": ".compose",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_face(globals(), _HOME)
