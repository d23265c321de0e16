"""Which elementwise leaves calls share, so that a leaf's gradient is a sum over calls: read
from the extent classes of every argument's call dimensions, as the signature gives them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .plan import ArgPlan

CallClasses = Mapping[tuple[int, tuple[str, ...]], str]
"""Per leaf (its parameter's position and its path), the extent classes of its call
dimensions: ``signatures.text.extent_classes`` of them."""


def shared(leaves: Sequence[ArgPlan], call_rank: int, classes: CallClasses) -> tuple[ArgPlan, ...]:
    """``leaves``, each elementwise one marked ``broadcast`` where calls share its elements:
    along a call dimension it lacks or holds once (an extent of 1), some argument may give the
    call an extent past 1 (its class is not 1, or is unknown: a grid's, a generator's). A call
    whose extents are all 1 shares nothing, so its gradients are stored, never added."""

    def padded(a: ArgPlan) -> str:
        own = classes.get((a.index, a.path), "x" * a.call_dims)
        return "1" * (call_rank - a.call_dims) + own

    dims = [padded(a) for a in leaves]
    wide = [False] * call_rank
    for a, own in zip(leaves, dims, strict=True):
        if a.call_dims:
            for d, c in enumerate(own):
                wide[d] = wide[d] or c != "1"
    return tuple(
        replace(a, broadcast=any(w and c == "1" for w, c in zip(wide, own, strict=True)))
        if a.kind == "elementwise"
        else a
        for a, own in zip(leaves, dims, strict=True)
    )
