"""The gallery's programs (examples/gallery) at a small size: each fit through slangspec follows
the same program in plain torch step for step and lowers the loss; the eikonal solver converges
to torch's field in as many sweeps."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "gallery"))

import eikonal_solve
import mlp_fit
import raster_fit
import splat_fit


@pytest.mark.parametrize(
    "program, size",
    [(splat_fit, 6), (raster_fit, 6), (mlp_fit, 8)],
    ids=["gaussian splatting", "soft rasterizer", "mlp"],
)
def test_a_gallery_fit_follows_torch_step_for_step_and_lowers_the_loss(
    program, size, kind, cache_dir
):
    ours, theirs = program.run(kind, size, side=12, steps=12, cache_dir=cache_dir)
    # float32 sums in another order: a step's loss agrees to 1e-4 of itself.
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-7), f"step {step}"
    assert ours[-1] < 0.8 * ours[0]


def test_the_eikonal_solver_converges_to_torchs_travel_times_around_the_wall(kind, cache_dir):
    side = 16
    ours, theirs, our_sweeps, their_sweeps = eikonal_solve.run(kind, side, cache_dir=cache_dir)
    assert our_sweeps == their_sweeps
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    h, source, far = 1.0 / side, (side // 4, side // 4), (side - 1, side - 1)
    assert ours[source[0], source[1] + 1].item() == pytest.approx(h)
    # The wall stands between the source and the far corner: the way round is longer.
    assert ours[far].item() > 1.1 * h * math.dist(source, far)
