"""Per-tensor cost of slangspec.signature, the first step of every call.

python benchmarks/signature_cost.py
"""

import timeit

import torch

import slangspec


def per_call_us(fn, number: int = 200_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    cases = {
        "(1024, 3) float32 grad": torch.zeros(1024, 3, requires_grad=True),
        "(8, 5) float16": torch.zeros(8, 5, dtype=torch.float16),
        "() float32": torch.zeros(()),
        "(2, 3, 4, 5, 6) float32": torch.zeros(2, 3, 4, 5, 6),
    }
    print(f"{'tensor':28s} {'signature':24s} {'us/call':>8s}")
    for name, t in cases.items():
        sig = slangspec.signature(t)
        print(f"{name:28s} {sig:24s} {per_call_us(lambda t=t: slangspec.signature(t)):8.3f}")


if __name__ == "__main__":
    main()
