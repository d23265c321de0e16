"""Fit a differentiable Slang function to data from torch, with one parameter frozen, then show
what the disk cache buys a new process.

Run with scripts/demo.sh (or `python examples/quickstart.py` inside the venv).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import slangspec

SHADER = Path(__file__).with_name("quickstart.slang")


def problem(m: slangspec.Module):
    """Data from known coefficients, a frozen damping term and zero-initialized coefficients."""
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 256, device=tdev)
    damping = torch.tensor([0.1], device=tdev)  # frozen: no gradient buffer is ever made for it
    with torch.no_grad():
        target = m.model(torch.tensor([[0.5, -1.0, 2.0]], device=tdev), damping, x)
    target = target + 0.01 * torch.randn_like(x)
    coeffs = torch.zeros(1, 3, device=tdev, requires_grad=True)
    return x, damping, target, coeffs


def device_name(m: slangspec.Module) -> str:
    """The GPU's name: torch's CUDA device, or the adapter of slangpy's Vulkan device."""
    if m.device_kind == "cuda":
        return torch.cuda.get_device_name()
    return m.device.info.adapter_name


def step(m, x, damping, target, coeffs) -> tuple[float, float]:
    """One forward+backward; returns (loss, seconds)."""
    start = time.perf_counter()
    loss = ((m.model(coeffs, damping, x) - target) ** 2).mean()
    loss.backward()
    if x.is_cuda:
        torch.cuda.synchronize()
    return loss.item(), time.perf_counter() - start


def first_step_only(device: str | None, cache_dir: str) -> None:
    """In a fresh process: make the data and take the first training step, all from the cache."""
    m = slangspec.load(SHADER, device=device, cache_dir=cache_dir)
    start = time.perf_counter()
    step(m, *problem(m))
    print(json.dumps({"seconds": time.perf_counter() - start}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--cache-dir", default=None, help="kernel cache (default: a fresh temporary directory)"
    )
    parser.add_argument("--first-step-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_step_only:
        first_step_only(args.device, args.cache_dir)
    elif args.cache_dir:
        demo(args, args.cache_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="slangspec-demo-") as cache_dir:
            demo(args, cache_dir)


def demo(args: argparse.Namespace, cache_dir: str) -> None:
    """Train, then time a fresh process's first step against this one's, on ``cache_dir``."""
    m = slangspec.load(SHADER, device=args.device, cache_dir=cache_dir)
    print(f"device: {m.device_kind} ({device_name(m)}); cache: {cache_dir}")
    start = time.perf_counter()
    x, damping, target, coeffs = problem(m)
    setup = time.perf_counter() - start
    print(f"signature: {m.model.signature(coeffs, damping, x)}")
    opt = torch.optim.Adam([coeffs], lr=0.05)
    timings = []
    for i in range(args.steps):
        opt.zero_grad()
        loss, seconds = step(m, x, damping, target, coeffs)
        timings.append(seconds)
        opt.step()
        if i % 25 == 0 or i == args.steps - 1:
            print(f"step {i:4d}  loss {loss:.6f}")
    assert damping.grad is None
    fitted = ", ".join(f"{c:.3f}" for c in coeffs.detach().view(-1).tolist())
    print(f"fitted coeffs: [{fitted}]  (true: [0.500, -1.000, 2.000])")

    command = [sys.executable, __file__, "--first-step-only", "--cache-dir", cache_dir]
    if args.device:
        command += ["--device", args.device]
    warm = json.loads(
        subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    )
    later = sorted(timings[1:])[len(timings[1:]) // 2]
    cold, hot = (setup + timings[0]) * 1e3, warm["seconds"] * 1e3
    print("data + first training step:")
    print(f"  this process, cold cache (reflect, specialize, compile): {cold:8.1f} ms")
    print(f"  a new process, warm cache (every kernel a cache hit):    {hot:8.1f} ms")
    print(f"later steps (median, kernels in memory):                   {later * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
