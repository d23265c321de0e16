"""What torch's first launch of a kernel costs a process: each op timed on its first call and
on its second (synchronized), in fresh processes, after CUDA start-up and torch's first
backward, as ``startup.py`` starts its window. A backward that has torch sum gradient copies
(``sum(0)``) pays the first in the warm window.

    python benchmarks/torch_first_kernels.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def child() -> None:
    import torch

    w = torch.ones(2, device="cuda", requires_grad=True)
    (w * 2).backward(torch.ones_like(w))
    copies = torch.randn(4, 4096, device="cuda")
    one = torch.randn(4096, device="cuda")
    torch.cuda.synchronize()
    ops = {
        "sum(0) of four copies": lambda: copies.sum(0),
        "sum() of one": lambda: one.sum(),
        "add_": lambda: one.add_(one),
        "zeros": lambda: torch.zeros(4096, device="cuda"),
    }
    for name, op in ops.items():
        took = []
        for _ in range(2):
            start = time.perf_counter()
            op()
            torch.cuda.synchronize()
            took.append(time.perf_counter() - start)
        print(f"{name:24s} first {took[0] * 1e3:8.2f} ms   second {took[1] * 1e3:6.2f} ms")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child()
        return
    for i in range(args.repeat):
        print(f"process {i + 1}", flush=True)
        subprocess.run([sys.executable, __file__, "--child"], check=True)


if __name__ == "__main__":
    main()
