"""The shape rules every call path shares (``runtime/shapes.py``): plain functions, no device."""

import pytest
import torch

from slangspec.runtime.shapes import added_strides, broadcast, contiguous_strides, gradient_copies


@pytest.mark.parametrize(
    "shapes", [[(3, 1), (1, 4)], [(5,), (2, 1, 5)], [(1,), (1,)], [(0, 1), (3,)], [()]]
)
def test_broadcast_is_torchs_rule(shapes):
    assert broadcast(shapes) == tuple(torch.broadcast_shapes(*shapes))


def test_clashing_extents_are_refused_naming_both():
    with pytest.raises(ValueError, match="extent 3 does not broadcast against 4"):
        broadcast([(4,), (3,)])


@pytest.mark.parametrize("shape", [(2, 3, 4), (1,), (0, 5), (), (7, 1, 2)])
def test_contiguous_strides_are_torchs(shape):
    assert contiguous_strides(shape) == torch.empty(shape).stride()


def test_added_strides_are_zero_where_calls_share_an_element():
    """A (1, 5, 3) gradient of an argument with two call dimensions, in a call of three: the
    missing dimension and the extent of 1 are shared by calls; the rest are its own strides."""
    assert added_strides((1, 5, 3), 2, 3) == [0, 0, 3, 1]
    assert added_strides((4, 2), 1, 1) == [2, 1]


@pytest.mark.parametrize(
    ("calls", "shape", "storage", "copy"),
    [
        (300, (1,), (1,), [320, 0]),
        (4096, (4096,), (4096,), [4096, 0]),  # mix2's warm window: nothing for torch to sum
        (8191, (7,), (7,), [8192, 0]),
        (20000, (5,), (4, 5), [5024, 5]),
        (1 << 20, (99,), (256, 99), [4096, 99]),  # the MLP workload's weights
        (1 << 24, (1 << 19,), (2, 1 << 19), [1 << 23, 1 << 19]),  # 2^20 elements in all
    ],
)
def test_gradient_copies_take_whole_warps_and_4096_calls_or_more(calls, shape, storage, copy):
    """Calls spread over copies of a gradient 4,096 or more to a copy (so that a call of fewer
    than 8,192 adds into one, which torch need not sum), at most 1,024 copies and 2^20
    elements in all, each copy's calls whole warps."""
    assert gradient_copies(calls, shape) == (storage, copy)
    assert copy[0] % 32 == 0
