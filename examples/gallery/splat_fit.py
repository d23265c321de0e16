"""Fit 2D Gaussians to an image with Adam: a Slang function renders every pixel, the Gaussians
are one array of structs, and torch's autograd and optimizer do the rest. The same program in
plain torch runs beside it from the same start; the two loss curves are printed side by side.

    python examples/gallery/splat_fit.py [--device cuda|vulkan] [--count 16] [--side 32]
                                           [--steps 60]
"""

from __future__ import annotations

from pathlib import Path

import torch
from fitting import Params, compare, main, torch_device

import slangspec

SHADER = Path(__file__).with_name("splat.slang")


def start(count: int, device: str) -> Params:
    """Gaussians spread at random over the image, grey, of one sharpness."""
    g = torch.Generator().manual_seed(count)
    return {
        "center": torch.rand(count, 2, generator=g).to(device),
        "sharpness": torch.full((count,), 60.0, device=device),
        "color": torch.full((count, 3), 0.3, device=device),
    }


def render_torch(g: Params, pixels: torch.Tensor) -> torch.Tensor:
    d = pixels[..., None, :] - g["center"]
    weight = torch.exp(-(d * d).sum(-1) * g["sharpness"])
    return (weight[..., None] * g["color"]).sum(-2)


def sharp_enough(g: Params) -> None:
    g["sharpness"].clamp_(min=1.0)


def run(
    device: str | None, count: int, side: int, steps: int, cache_dir: str | None = None
) -> tuple[list[float], list[float]]:
    m = slangspec.load(SHADER, device=device, cache_dir=cache_dir, defines={"COUNT": str(count)})
    return compare(
        m.splat, render_torch, start(count, torch_device(m)), side, steps, 0.02, sharp_enough
    )


if __name__ == "__main__":
    main(__doc__, "count", "Gaussians", run)
