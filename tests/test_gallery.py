"""The gallery's programs (examples/gallery) at a small size: each fit through slangspec follows
the same program in plain torch step for step, and lowers the loss."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "examples" / "gallery"))

import mlp_fit
import splat_fit


@pytest.mark.parametrize(
    "program, size",
    [(splat_fit, 6), (mlp_fit, 8)],
    ids=["gaussian splatting", "mlp"],
)
def test_a_gallery_fit_follows_torch_step_for_step_and_lowers_the_loss(
    program, size, kind, cache_dir
):
    ours, theirs = program.run(kind, size, side=12, steps=12, cache_dir=cache_dir)
    # float32 sums in another order: a step's loss agrees to 1e-4 of itself.
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-7), f"step {step}"
    assert ours[-1] < 0.8 * ours[0]
