"""Train the quickstart's Slang model inside torch.compile(fullgraph=True): torch layers around
it, no graph break, and the same losses as eager mode.

    python examples/compiled.py [--device cuda|vulkan] [--steps 20]
"""

import argparse
from pathlib import Path

import torch

import slangspec

SHADER = Path(__file__).with_name("quickstart.slang")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    m = slangspec.load(SHADER, device=args.device)
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 256, device=tdev)
    target = torch.sin(2 * x)
    damping = torch.tensor([0.1], device=tdev)  # frozen
    head = torch.nn.Linear(1, 3, device=tdev)  # a torch layer that makes the model's coefficients
    opt = torch.optim.Adam(head.parameters(), lr=0.05)

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        coeffs = head(torch.ones(1, 1, device=x.device))  # (1, 3): one float3 for every x
        return ((m.model(coeffs, damping, x) - target) ** 2).mean()

    compiled = torch.compile(loss_of, fullgraph=True)
    explained = torch._dynamo.explain(loss_of)(x)
    print(f"graph breaks: {explained.graph_break_count}")
    for i in range(args.steps):
        with torch.no_grad():
            eager = loss_of(x).item()
        opt.zero_grad()
        loss = compiled(x)
        loss.backward()
        opt.step()
        if i % 5 == 0 or i == args.steps - 1:
            print(f"step {i:3d}  loss {loss.item():.6f}  (eager, same weights: {eager:.6f})")


if __name__ == "__main__":
    main()
