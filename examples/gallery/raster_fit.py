"""Fit soft triangles to an image with Adam, through a backward pass written in Slang: the
forward kernel reads the triangles as a plain tensor, the backward kernel runs Slang's
``bwd_diff`` per pixel and triangle and adds the results into one gradient tensor through an
``AtomicTensor``; a ``torch.autograd.Function`` joins the two. The same rasterizer in plain torch
(torch's autograd) runs beside it from the same start; the two loss curves are printed side by
side.

    python examples/gallery/raster_fit.py [--device cuda|vulkan] [--count 16] [--side 32]
                                            [--steps 60]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch
from fitting import Params, compare, main, torch_device

import slangspec

SHADER = Path(__file__).with_name("raster.slang")
SOFTNESS = 0.02


def start(count: int, device: str) -> Params:
    """Equilateral triangles at random places and turns, corners counter-clockwise, grey."""
    g = torch.Generator().manual_seed(count)
    centre = torch.rand(count, 1, 2, generator=g)
    angle = 2 * math.pi * (torch.rand(count, 1, generator=g) + torch.tensor([0.0, 1 / 3, 2 / 3]))
    corners = centre + 0.15 * torch.stack([angle.cos(), angle.sin()], dim=-1)
    grey = torch.full((count, 3), 0.3)
    return {"tris": torch.cat([corners.reshape(count, 6), grey], dim=1).to(device)}


def raster_torch(p: Params, pixels: torch.Tensor) -> torch.Tensor:
    tris = p["tris"]
    a, b, c, color = tris[:, 0:2], tris[:, 2:4], tris[:, 4:6], tris[:, 6:9]
    x = pixels[..., None, :]

    def cross(u: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return u[..., 0] * w[..., 1] - u[..., 1] * w[..., 0]

    turn = torch.where(cross(b - a, c - a) >= 0, 1.0, -1.0).detach()

    def inside(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(turn * cross(q - p, x - p) / (q - p).norm(dim=-1) / SOFTNESS)

    return ((inside(a, b) * inside(b, c) * inside(c, a))[..., None] * color).sum(-2)


def rasterizer(m: slangspec.Module) -> Callable[[Params, torch.Tensor], torch.Tensor]:
    """The Slang rasterizer as a function of torch tensors with a gradient."""

    class Raster(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tris: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(tris, pixels)
            return m.raster(tris.detach(), pixels)

        @staticmethod
        def backward(ctx, dcolor: torch.Tensor) -> tuple[torch.Tensor, None]:
            tris, pixels = ctx.saved_tensors
            grad = torch.zeros_like(tris)
            m.raster_grad(tris.detach(), pixels, dcolor.contiguous(), grad)
            return grad, None

    return lambda p, pixels: Raster.apply(p["tris"], pixels)


def run(
    device: str | None, count: int, side: int, steps: int, cache_dir: str | None = None
) -> tuple[list[float], list[float]]:
    m = slangspec.load(SHADER, device=device, cache_dir=cache_dir, defines={"COUNT": str(count)})
    return compare(rasterizer(m), raster_torch, start(count, torch_device(m)), side, steps, 0.01)


if __name__ == "__main__":
    main(__doc__, "count", "triangles", run)
