"""Travel times around a wall by the eikonal equation, iterated to convergence: a Slang function
makes one Jacobi sweep over every cell of the grid (``slangspec.grid`` gives each call its
cell), and the sweeps repeat until no cell changes. The same sweep written in plain torch runs
beside it; the two fields and their sweep counts are printed side by side.

    python examples/gallery/eikonal_solve.py [--device cuda|vulkan] [--side 64]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from fitting import torch_device

import slangspec

SHADER = Path(__file__).with_name("eikonal.slang")
UNREACHED = 1e10
Sweep = Callable[[torch.Tensor], torch.Tensor]


def scene(side: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Slowness 1 but for a wall across the middle column (slowness 50) with a gap near the
    bottom, and one source cell in the upper left."""
    slowness = torch.ones(side, side, device=device)
    slowness[: side * 3 // 4, side // 2] = 50.0
    source = torch.zeros(side, side, dtype=torch.int32, device=device)
    source[side // 4, side // 4] = 1
    return slowness, source


def sweep_torch(slowness: torch.Tensor, source: torch.Tensor, h: float) -> Sweep:
    def sweep(u: torch.Tensor) -> torch.Tensor:
        around = F.pad(u, (1, 1, 1, 1), value=UNREACHED)
        a = torch.minimum(around[:-2, 1:-1], around[2:, 1:-1])
        b = torch.minimum(around[1:-1, :-2], around[1:-1, 2:])
        step = h * slowness
        both = 0.5 * (a + b + (2.0 * step * step - (a - b) * (a - b)).clamp(min=0).sqrt())
        nxt = torch.where((a - b).abs() >= step, torch.minimum(a, b) + step, both)
        return torch.where(source != 0, 0.0, torch.minimum(u, nxt))

    return sweep


def converge(
    sweep: Sweep, side: int, device: str, check_every: int = 8
) -> tuple[torch.Tensor, int]:
    """Sweeps from every cell unreached until a round of ``check_every`` changes no cell; the
    field and the sweeps made."""
    u, sweeps = torch.full((side, side), UNREACHED, device=device), 0
    while True:
        before = u
        for _ in range(check_every):
            u = sweep(u)
        sweeps += check_every
        if torch.equal(u, before):
            return u, sweeps


def run(
    device: str | None, side: int, cache_dir: str | None = None
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Both solvers on the scene: the two fields and their sweep counts."""
    h = 1.0 / side
    m = slangspec.load(
        SHADER, device=device, cache_dir=cache_dir, defines={"SIDE": str(side), "H": repr(h)}
    )
    dev = torch_device(m)
    slowness, source = scene(side, dev)
    cells = slangspec.grid((side, side))
    begun = time.perf_counter()
    ours, our_sweeps = converge(lambda u: m.eikonal_step(cells, u, slowness, source), side, dev)
    took = time.perf_counter() - begun
    theirs, their_sweeps = converge(sweep_torch(slowness, source, h), side, dev)
    far = (side - 1, side - 1)
    print(f"{side}x{side} cells: {our_sweeps} sweeps to converge, {took:.2f} s")
    print(f"torch: {their_sweeps} sweeps")
    print(f"largest difference from torch: {(ours - theirs).abs().max().item():.2e}")
    print(f"time to the far corner {ours[far].item():.4f} (torch {theirs[far].item():.4f})")
    return ours, theirs, our_sweeps, their_sweeps


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--side", type=int, default=64)
    args = p.parse_args()
    run(args.device, args.side)
