"""Shape rules every call path shares: torch's broadcasting, its row-major strides, the
largest extent a kernel indexes, and the copies of a gradient that calls add into."""

from __future__ import annotations

import math

MAX_EXTENT = 2**31 - 1
"""The largest call-shape extent and element stride: kernels take them as 32-bit ``int``."""

_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """torch's row-major strides of ``shape``; memoized, as a process's call shapes are few."""
    strides = _STRIDES.get(shape)
    if strides is None:
        out, step = [], 1
        for d in reversed(shape):
            out.append(step)
            step *= max(d, 1)
        strides = tuple(reversed(out))
        if len(_STRIDES) < 4096:
            _STRIDES[shape] = strides
    return strides


def added_strides(shape: tuple[int, ...], call_dims: int, rank: int) -> list[int]:
    """The strides at which calls add into a gradient of ``shape``, an argument whose first
    ``call_dims`` dimensions are the last of the call's ``rank``: per call dimension (0 along
    those it is broadcast over: missing, or of extent 1), then per element dimension."""
    own = contiguous_strides(tuple(shape))
    strides = [0] * (rank - call_dims)
    strides += [0 if shape[d] == 1 else own[d] for d in range(call_dims)]
    return strides + list(own[call_dims:])


def broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """torch's broadcasting rule; ValueError when two extents clash."""
    if not shapes:
        return ()
    first = shapes[0]
    for s in shapes:
        if s != first:
            break
    else:
        return tuple(first)
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        offset = rank - len(s)
        for d, extent in enumerate(s):
            current = out[offset + d]
            if extent != current:
                if current == 1:
                    out[offset + d] = extent
                elif extent != 1:
                    raise ValueError(f"extent {extent} does not broadcast against {current}")
    return tuple(out)


GRADIENT_COPIES = (1024, 1 << 20, 4096)
"""At most how many copies of a gradient a backward kernel's calls add into (a whole tensor's
where ``SpecializationPlan.sums_per_warp``, a broadcast leaf's where it ``accumulates``), in
how many elements in all, and the fewest calls that share a copy."""


def gradient_copies(n: int, shape: tuple[int, ...]) -> tuple[tuple[int, ...], list[int]]:
    """How ``n`` calls spread their parts of a gradient of ``shape`` over copies of it, so that
    fewer warps add into each element: the shape of the storage (``shape`` itself for one
    copy, else the copies stacked along a new first dimension) and the kernel's
    ``parameter_names.gradient_copy`` uniform (the calls that add into each copy, whole warps,
    and the elements between copies, 0 for one copy)."""
    numel = math.prod(shape)
    most, budget, fewest = GRADIENT_COPIES
    copies = max(1, min(most, budget // max(numel, 1), n // fewest))
    calls = -(-n // copies)
    calls = max(32, -(-calls // 32) * 32)
    if -(-n // calls) > 1:
        return (-(-n // calls), *shape), [calls, numel]
    return tuple(shape), [calls, 0]
