"""A small training step with a Slang activation, eager and under torch.compile, each beside the
same model with the activation written in torch.

    python benchmarks/compiled.py [--device cuda|vulkan] [--batch 256] [--width 256]

The step: linear -> activation -> linear -> MSE loss (the part compiled), backward, SGD step.
Rows:
- eager: no compilation;
- compiled, graph break: torch.compile around a slangspec call torch cannot see into (the
  call wrapped in ``torch.compiler.disable``, as calls were before they became operators);
- fullgraph: torch.compile(fullgraph=True);
- reduce-overhead: fullgraph in CUDA graphs (CUDA only).
Mean time per step after warm-up: the best batch of five rounds, the rows taking turns.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from dispatch import timed

import slangspec

HERE = Path(__file__).parent


def model(width: int, tdev: str, activation: Callable[[torch.Tensor], torch.Tensor]):
    torch.manual_seed(0)
    first = torch.nn.Linear(width, width, device=tdev)
    second = torch.nn.Linear(width, width, device=tdev)
    params = [*first.parameters(), *second.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)

    def loss_of(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(second(activation(first(x))), target)

    def train(x: torch.Tensor, target: torch.Tensor, compiled_loss) -> None:
        opt.zero_grad(set_to_none=True)
        compiled_loss(x, target).backward()
        opt.step()

    return loss_of, train


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args()
    m = slangspec.load(HERE / "activation.slang", device=args.device)
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    x = torch.randn(args.batch, args.width, device=tdev)
    target = torch.randn(args.batch, args.width, device=tdev)

    hidden = torch.compiler.disable(m.silu)
    variants = {"slangspec": m.silu, "torch": torch.nn.functional.silu}
    modes: dict[str, Callable] = {
        "eager": lambda f: f,
        "compiled, graph break": lambda f: torch.compile(f),
        "fullgraph": lambda f: torch.compile(f, fullgraph=True),
    }
    if tdev == "cuda":
        modes["reduce-overhead"] = lambda f: torch.compile(
            f, fullgraph=True, mode="reduce-overhead"
        )

    fns = {}
    for mode, wrap in modes.items():
        for name, activation in variants.items():
            if mode == "compiled, graph break" and name == "slangspec":
                activation = hidden
            elif mode == "compiled, graph break":
                continue  # torch's own activation has no break to show
            loss_of, train = model(args.width, tdev, activation)
            compiled = wrap(loss_of)
            fns[(mode, name)] = lambda train=train, compiled=compiled: train(x, target, compiled)
    per_step = timed({k: v for k, v in fns.items()}, sync)
    torch_eager = per_step[("eager", "torch")]
    print(f"{'mode':<24s} {'slangspec':>11s} {'torch':>11s} {'ratio':>6s} {'/ torch eager':>13s}")
    for mode in modes:
        ours = per_step[(mode, "slangspec")]
        theirs = per_step.get((mode, "torch"), per_step[("fullgraph", "torch")])
        print(
            f"{mode:<24s} {ours * 1e6:9.1f}us {theirs * 1e6:9.1f}us {ours / theirs:6.2f} "
            f"{ours / torch_eager:13.2f}"
        )
    print("ratio: slangspec / torch in the same mode (the graph-break row against torch fullgraph)")


if __name__ == "__main__":
    main()
