"""Where a broadcast array of structs spends its backward: Slang's own ``bwd_diff`` of the
splatting workload's ``broadcast_form`` (a loop reading ``g[i]`` of a ``Gaussian[NG]``), with
every gradient summed into one float per pixel and nothing accumulated, against the same
function with its loop under ``[ForceUnroll]``; then both forms' forward+backward through
slangspec, and the tensor form's. The rows take turns, as ``dispatch.py``'s do (its ``timed``).

    python benchmarks/unroll_probe.py [--device cuda] [--gaussians 128] [--side 1024]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable

import torch
from dispatch import timed
from workloads import _gaussians, pixels, splat_source

import slangspec

PROBE = """
[Differentiable]
float3 unrolled_form(Gaussian g[NG], no_diff float2 pix)
{
    float3 c = float3(0.0);
    [ForceUnroll]
    for (int i = 0; i < NG; i++)
    {
        float2 d = pix - g[i].center;
        c += g[i].color * exp(-dot(d, d) * g[i].scale);
    }
    return c;
}

float total(Gaussian.Differential d[NG])
{
    float s = 0.0;
    for (int k = 0; k < NG; k++)
    {
        s += d[k].center.x + d[k].center.y + d[k].scale;
        s += d[k].color.x + d[k].color.y + d[k].color.z;
    }
    return s;
}

float looped(Gaussian g[NG], float2 pix)
{
    var dp = diffPair(g);
    bwd_diff(broadcast_form)(dp, pix, float3(1.0));
    return total(dp.d);
}

float unrolled(Gaussian g[NG], float2 pix)
{
    var dp = diffPair(g);
    bwd_diff(unrolled_form)(dp, pix, float3(1.0));
    return total(dp.d);
}
"""


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--gaussians", type=int, default=128)
    p.add_argument("--side", type=int, default=1024)
    args = p.parse_args()
    kind = args.device or ("cuda" if torch.cuda.is_available() else "vulkan")
    dev = "cuda" if kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    n = args.gaussians
    source = splat_source(n) + PROBE
    m = slangspec.load_source(f"unroll_probe{n}", source, device=kind, cache_dir=tempfile.mkdtemp())
    frozen = _gaussians(n, dev)
    trained = {k: v.clone().requires_grad_(True) for k, v in frozen.items()}
    pix = pixels(args.side, dev)
    looped, unrolled = m.looped(frozen, pix), m.unrolled(frozen, pix)
    torch.testing.assert_close(looped, unrolled, rtol=1e-3, atol=1e-3)

    def step(form: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            for t in trained.values():
                t.grad = None
            form().sum().backward()

        return run

    rows = {
        "Slang's bwd_diff alone, loop": lambda: m.looped(frozen, pix),
        "Slang's bwd_diff alone, [ForceUnroll]": lambda: m.unrolled(frozen, pix),
        "broadcast form, loop": step(lambda: m.broadcast_form(trained, pix)),
        "broadcast form, [ForceUnroll]": step(lambda: m.unrolled_form(trained, pix)),
        "tensor form": step(
            lambda: m.tensor_form(trained["center"], trained["scale"], trained["color"], pix)
        ),
    }
    print(f"{n} Gaussians, {args.side}² pixels, {kind}; forward+backward where a form is named")
    for name, seconds in timed(rows, sync).items():
        print(f"{name:40s} {seconds * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
