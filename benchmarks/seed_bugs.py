"""Reproduce slangpy 0.43.1's autograd seed bugs, and run the same scenarios through slangspec.

    python benchmarks/seed_bugs.py          # needs CUDA: slangpy crashes on CPU torch tensors

Each scenario runs in its own process, since slangpy's mixed-requires_grad backward aborts the
process (CUDA_ERROR_ILLEGAL_ADDRESS).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).parent

PRELUDE = f"""
import torch
HERE = {str(HERE)!r}
def slangpy_module():
    import slangpy as spy
    device = spy.create_torch_device(type=spy.DeviceType.cuda, include_paths=[HERE])
    return spy.Module.load_from_file(device, HERE + "/bench.slang"), spy.grid
def slangspec_module():
    import tempfile, slangspec
    return slangspec.load(HERE + "/bench.slang", device="cuda",
                          cache_dir=tempfile.mkdtemp()), slangspec.grid
"""

NOGRAD_THEN_GRAD = """
m, _ = {make}()
a0, x0 = torch.randn(8, device="cuda"), torch.randn(8, device="cuda")
m.poly(a0, x0)
a = torch.randn(8, device="cuda", requires_grad=True)
x = torch.randn(8, device="cuda")
y = m.poly(a, x)
if y.grad_fn is None:
    print("BUG: grad_fn is None after a no-grad first call")
else:
    y.sum().backward()
    ok = torch.allclose(a.grad, x * x + 3)
    print("ok: grad_fn present, gradient correct" if ok else "BUG: wrong gradient")
"""

MIXED = """
m, grid = {make}()
n = 64
a = torch.randn(n, device="cuda", requires_grad={ga})
b = torch.randn(n, device="cuda", requires_grad={gb})
y = m.mix2(a, b, grid((n,)))
y.sum().backward()
torch.cuda.synchronize()
ok = (a.grad is None or torch.allclose(a.grad, b + 1)) and \\
     (b.grad is None or torch.allclose(b.grad, a.detach()))
ok = ok and (a.grad is None) != {ga} and (b.grad is None) != {gb}
print("ok: gradients correct" if ok else "BUG: wrong gradients")
"""

SCENARIOS = {
    "no-grad call, then grad call": NOGRAD_THEN_GRAD,
    "IDiffTensor yes/no": MIXED.replace("{ga}", "True").replace("{gb}", "False"),
    "IDiffTensor no/yes": MIXED.replace("{ga}", "False").replace("{gb}", "True"),
    "IDiffTensor yes/yes": MIXED.replace("{ga}", "True").replace("{gb}", "True"),
}


def outcome(code: str, make: str) -> str:
    script = PRELUDE + textwrap.dedent(code).replace("{make}", make)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("ok", "BUG"))]
    if proc.returncode != 0:
        return f"CRASH (exit {proc.returncode})"
    return lines[-1] if lines else "no result"


def main() -> None:
    print(f"{'scenario':32s} | {'slangpy 0.43.1':48s} | slangspec")
    for name, code in SCENARIOS.items():
        print(
            f"{name:32s} | {outcome(code, 'slangpy_module'):48s} | "
            f"{outcome(code, 'slangspec_module')}",
            flush=True,
        )


if __name__ == "__main__":
    main()
