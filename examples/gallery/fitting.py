"""What the gallery's image fits share: pixel coordinates, the target image, an Adam loop, and a
report of slangspec's losses beside plain torch's."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

Params = dict[str, torch.Tensor]


def pixel_centres(side: int, device: str) -> torch.Tensor:
    """(side, side, 2) coordinates of the pixel centres in the unit square."""
    axis = (torch.arange(side, device=device, dtype=torch.float32) + 0.5) / side
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1)


def target_image(side: int, device: str) -> torch.Tensor:
    """A ring and a bar in three colours: what every fit is fitted to."""
    p = pixel_centres(side, device)
    r = ((p - 0.5) ** 2).sum(-1).sqrt()
    ring = torch.exp(-(((r - 0.3) / 0.06) ** 2))
    bar = torch.exp(-(((p[..., 0] - 0.7) / 0.08) ** 2)) * (p[..., 1] > 0.25) * (p[..., 1] < 0.75)
    return torch.stack([ring, 0.5 * ring + bar, bar], dim=-1)


def fit(
    render: Callable[[Params, torch.Tensor], torch.Tensor],
    start: Params,
    pixels: torch.Tensor,
    target: torch.Tensor,
    steps: int,
    lr: float,
    keep: Callable[[Params], None] = lambda params: None,
) -> list[float]:
    """Adam on every tensor of ``start`` (copied), ``keep`` applied after each step; the loss
    before each step."""
    params = {k: v.detach().clone().requires_grad_() for k, v in start.items()}
    opt = torch.optim.Adam(params.values(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((render(params, pixels) - target) ** 2).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            keep(params)
        losses.append(loss.item())
    return losses


def compare(
    ours: Callable[[Params, torch.Tensor], torch.Tensor],
    theirs: Callable[[Params, torch.Tensor], torch.Tensor],
    start: Params,
    side: int,
    steps: int,
    lr: float,
    keep: Callable[[Params], None] = lambda params: None,
) -> tuple[list[float], list[float]]:
    """The fit through ``ours`` (timed) and through ``theirs`` from the same start, printed side
    by side; both loss curves."""
    device = next(iter(start.values())).device.type
    pixels, target = pixel_centres(side, device), target_image(side, device)
    begun = time.perf_counter()
    slang = fit(ours, start, pixels, target, steps, lr, keep)
    took = time.perf_counter() - begun
    plain = fit(theirs, start, pixels, target, steps, lr, keep)
    for step in range(0, steps, max(1, steps // 6)):
        print(f"step {step:4d}: loss {slang[step]:.5f} (torch {plain[step]:.5f})")
    print(f"final loss {slang[-1]:.5f} (torch {plain[-1]:.5f}), {slang[0] / slang[-1]:.1f}x lower")
    print(f"{side}x{side} pixels, {steps} steps in {took:.2f} s")
    return slang, plain


def torch_device(module: object) -> str:
    """Where the tensors of a module's calls live."""
    return "cuda" if module.device_kind == "cuda" else "cpu"


def main(doc: str, size: str, what: str, run: Callable[..., object]) -> None:
    """A program's command line: ``--device``, its size (``--count``, ``--hidden``: how many
    ``what``), ``--side`` of the image and ``--steps``; then ``run`` on them."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument(f"--{size}", type=int, default=16)
    p.add_argument("--side", type=int, default=32)
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    print(f"{getattr(args, size)} {what}")
    run(args.device, getattr(args, size), args.side, args.steps)
