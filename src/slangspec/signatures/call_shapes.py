"""What gives a call its shape besides its tensors: ``slangspec.grid``, a per-call index
source, and the call shape that ``_result=`` gives a call whose arguments are generators."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..define import frozen


@frozen
class grid:
    """A per-call index source: the call runs once per point of ``shape``, and the point's
    value in dimension ``d`` is ``offset[d] + index[d] * stride[d]`` (offset 0, stride 1 unless
    given, one entry per dimension). An extent of -1 takes the call's extent in that dimension
    from the other arguments (``_result=`` among them), as slangpy's ``grid`` does; where none
    gives one, the dimension has one point."""

    shape: tuple[int, ...]
    """The extents, 1 where -1 was given (an extent that broadcasts as the call's)."""
    offset: tuple[int, ...]
    stride: tuple[int, ...]
    open: bool
    """Whether an extent was -1: the call's shape comes from other arguments, ``_result=``
    included, as with a generator."""

    def __init__(
        self,
        shape: int | Sequence[int],
        offset: Sequence[int] | None = None,
        stride: Sequence[int] | None = None,
    ) -> None:
        # A size torch traces symbolically (SymInt) stands for an int.
        dims = (shape,) if isinstance(shape, int | torch.SymInt) else _entries(shape)
        if not dims or not all(
            isinstance(d, int | torch.SymInt) and not isinstance(d, bool) and d >= -1 for d in dims
        ):
            raise ValueError(
                "grid shape must be a non-negative int or a sequence of one or more (-1 for an "
                f"extent the other arguments give), got {shape!r}"
            )
        object.__setattr__(self, "open", any(isinstance(d, int) and d == -1 for d in dims))
        object.__setattr__(self, "shape", tuple(1 if self.open and d == -1 else d for d in dims))
        object.__setattr__(self, "offset", _grid_entries("offset", offset, len(dims), 0))
        object.__setattr__(self, "stride", _grid_entries("stride", stride, len(dims), 1))

    @property
    def strided(self) -> bool:
        """Whether its values are not the plain call index: an offset or a stride is given."""
        n = len(self.shape)
        return self.offset != (0,) * n or self.stride != (1,) * n

    def words(self) -> list[int]:
        """The offsets, then the strides, as the uniform words of a strided grid hold them."""
        return [v % 2**32 for v in (*self.offset, *self.stride)]


def _entries(given: Any) -> tuple[Any, ...]:
    """The entries of a sequence (a tuple, list, ``torch.Size``); none for anything else (a
    string is no sequence of ints)."""
    if isinstance(given, str | bytes) or not isinstance(given, Sequence | torch.Size):
        return ()
    return tuple(given)


def _grid_entries(name: str, given: Sequence[int] | None, n: int, default: int) -> tuple[int, ...]:
    if given is None:
        return (default,) * n
    entries = (given,) if isinstance(given, int) else _entries(given)
    if len(entries) != n or not all(
        isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31 for v in entries
    ):
        raise ValueError(
            f"grid {name} must be {n} int{'s' if n > 1 else ''} (one per dimension of the "
            f"shape) from {-(2**31)} to {2**31 - 1}, got {given!r}"
        )
    return entries


class result_shape:
    """The call shape a ``_result=`` tensor gives a call whose generators have no shape of their
    own: its dimensions before the result's element shape."""

    def __init__(self, shape: Sequence[int]) -> None:
        self.shape = tuple(shape)
