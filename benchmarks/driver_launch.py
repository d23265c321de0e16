"""The CUDA driver calls of a dispatch, through slangspec's ctypes declarations
(``runtime/cuda_driver.py``) and through NVIDIA's ``cuda-bindings``: the same cached kernel,
parameter block and stream, in one process.

    python benchmarks/driver_launch.py [--launches 20000] [--rounds 7]

Prints the import cost of ``cuda.bindings.driver``, and the median over rounds of the mean cost
per call of: making the context current, launching the packed kernel (handles converted once,
the best case for the bindings), and launching it with the stream handle converted per call as
a dispatch on torch's current stream must. Needs a CUDA GPU and ``cuda-bindings``.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
import time
from pathlib import Path

import torch

import slangspec
from slangspec.runtime import cuda_api, cuda_driver

HERE = Path(__file__).parent


def per_call(fn, launches: int, rounds: int) -> float:
    """Median over ``rounds`` of the mean seconds per call of ``fn``, the GPU drained after each."""
    means = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        means.append((time.perf_counter() - start) / launches)
        torch.cuda.synchronize()
    return statistics.median(means)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--launches", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    start = time.perf_counter()
    from cuda.bindings import driver as nv

    import_s = time.perf_counter() - start

    m = slangspec.load(HERE / "startup.slang", device="cuda", cache_dir=tempfile.mkdtemp())
    a = torch.randn(1, device="cuda")
    x = torch.randn(4096, device="cuda")
    seen = {}
    real_launch = cuda_driver.DriverKernel.launch

    def capture(self, n, kwargs, stream):
        seen.update(kernel=self, n=n, kwargs=dict(kwargs), stream=stream)
        real_launch(self, n, kwargs, stream)

    cuda_driver.DriverKernel.launch = capture
    m.poly(a, x)
    cuda_driver.DriverKernel.launch = real_launch
    kernel, n, kw, stream = seen["kernel"], seen["n"], seen["kwargs"], seen["stream"]
    groups = (n + kernel._group - 1) // kernel._group
    context = m.context

    function = nv.CUfunction(kernel._function.value)
    nv_stream = nv.CUstream(stream)
    nv_context = nv.CUcontext(context)
    extra = ctypes.addressof(kernel._extra)

    def bindings_launch() -> None:
        kernel.block.pack_into(kernel._buffer, kw)
        nv.cuLaunchKernel(function, groups, 1, 1, kernel._group, 1, 1, 0, nv_stream, None, extra)

    def bindings_launch_on_stream() -> None:
        kernel.block.pack_into(kernel._buffer, kw)
        nv.cuLaunchKernel(
            function, groups, 1, 1, kernel._group, 1, 1, 0, nv.CUstream(stream), None, extra
        )

    results = {
        "make current, ctypes": per_call(
            lambda: cuda_api.make_current(context), args.launches, args.rounds
        ),
        "make current, cuda-bindings": per_call(
            lambda: nv.cuCtxSetCurrent(nv_context), args.launches, args.rounds
        ),
        "launch, ctypes": per_call(
            lambda: kernel.launch(n, kw, stream), args.launches, args.rounds
        ),
        "launch, cuda-bindings": per_call(bindings_launch, args.launches, args.rounds),
        "launch on a stream, cuda-bindings": per_call(
            bindings_launch_on_stream, args.launches, args.rounds
        ),
    }
    out = m.poly(a, x)
    torch.testing.assert_close(out, a * x * x + 3 * a)
    print(f"import cuda.bindings.driver: {import_s * 1e3:.1f} ms")
    for name, seconds in results.items():
        print(f"{name:36s} {seconds * 1e6:6.2f} us")
    for what in ("make current", "launch"):
        ratio = results[f"{what}, cuda-bindings"] / results[f"{what}, ctypes"]
        print(f"{what}: cuda-bindings / ctypes = {ratio:.2f}")


if __name__ == "__main__":
    main()
