"""Train a tiny MLP written in Slang to reproduce an image: the network maps a pixel's
coordinates to its colour, its weights are one struct argument, and torch's Adam trains them.
The same network in plain torch trains beside it from the same start; the two loss curves are
printed side by side.

    python examples/gallery/mlp_fit.py [--device cuda|vulkan] [--hidden 16] [--side 32]
                                         [--steps 60]
"""

from __future__ import annotations

from pathlib import Path

import torch
from fitting import Params, compare, main, torch_device

import slangspec

SHADER = Path(__file__).with_name("mlp.slang")


def start(hidden: int, device: str) -> Params:
    """Weights drawn at random, the first layer's large enough that the units differ."""
    seeded = torch.Generator().manual_seed(hidden)
    w1, b1, w2 = (
        torch.randn(*shape, generator=seeded) for shape in ((hidden, 2), (hidden,), (hidden, 3))
    )
    return {
        "w1": 4 * w1.to(device),
        "b1": 2 * b1.to(device),
        "w2": 0.3 * w2.to(device),
        "b2": torch.zeros(3, device=device),
    }


def colour_torch(m: Params, pixels: torch.Tensor) -> torch.Tensor:
    return torch.tanh(pixels @ m["w1"].T + m["b1"]) @ m["w2"] + m["b2"]


def run(
    device: str | None, hidden: int, side: int, steps: int, cache_dir: str | None = None
) -> tuple[list[float], list[float]]:
    m = slangspec.load(SHADER, device=device, cache_dir=cache_dir, defines={"HIDDEN": str(hidden)})
    return compare(m.colour, colour_torch, start(hidden, torch_device(m)), side, steps, 0.03)


if __name__ == "__main__":
    main(__doc__, "hidden", "hidden units", run)
