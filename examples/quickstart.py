"""Fit a differentiable Slang function to data from torch, with one parameter frozen.

Run with scripts/demo.sh (or `python examples/quickstart.py` inside the venv).
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch

import slangspec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--cache-dir", default=None, help="kernel cache (default: a fresh temporary directory)"
    )
    args = parser.parse_args()

    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="slangspec-demo-")
    m = slangspec.load(
        Path(__file__).with_name("quickstart.slang"), device=args.device, cache_dir=cache_dir
    )
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    print(f"device: {m.device_kind} ({m.device.info.adapter_name}); cache: {cache_dir}")

    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 256, device=tdev)
    damping = torch.tensor([0.1], device=tdev)  # frozen: no gradient buffer is ever made for it
    true_coeffs = torch.tensor([[0.5, -1.0, 2.0]], device=tdev)
    target = m.model(true_coeffs, damping, x) + 0.01 * torch.randn_like(x)

    coeffs = torch.zeros(1, 3, device=tdev, requires_grad=True)
    opt = torch.optim.Adam([coeffs], lr=0.05)
    print(f"signature: {m.model.signature(coeffs, damping, x)}")

    timings = []
    for step in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss = ((m.model(coeffs, damping, x) - target) ** 2).mean()
        loss.backward()
        if tdev == "cuda":
            torch.cuda.synchronize()
        timings.append(time.perf_counter() - start)
        opt.step()
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.6f}")

    assert damping.grad is None
    fitted = ", ".join(f"{c:.3f}" for c in coeffs.detach().view(-1).tolist())
    print(f"fitted coeffs: [{fitted}]  (true: [0.500, -1.000, 2.000])")
    later = sorted(timings[1:])[len(timings[1:]) // 2] if len(timings) > 1 else float("nan")
    print(f"first step (specialize + compile forward and backward): {timings[0] * 1e3:8.1f} ms")
    print(f"later steps (median, cached kernels):                   {later * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
