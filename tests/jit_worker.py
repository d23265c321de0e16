"""One process of the cache tests: call cached functions, check them against torch, report.

    python tests/jit_worker.py CACHE_DIR [--forbid-compile | --forbid-slang] [--signatures N]
                               [--lease-and-die] [--block-slangpy] [--build-only]

Prints one JSON line: the process's compile counts, whether every result was right, the
longest it waited on a compile lease, how long it waited on compile servers that then left it
to compile itself, and whether slangpy was imported.

With ``--build-only`` (and ``SLANGSPEC_DEVICE=cuda``, ``SLANGSPEC_CUDA_ARCH``) it builds each
case's kernels for that architecture and calls nothing, as on a machine without a GPU: what it
built is in the cache to check.
"""

import argparse
import json
import os
import resource
import signal
import sys
from pathlib import Path

import torch

import slangspec
from slangspec import codegen
from slangspec.cache_store import disk, remote
from slangspec.compile.server import client as server_client
from slangspec.runtime import backend, module
from slangspec.runtime.module_base import BuildModule, load_module
from slangspec.settings import compile_counts
from slangspec.signatures import call_signature

HERE = Path(__file__).parent
SHADERS = HERE / "shaders"


def forbid_compile() -> None:
    """Make every path that resolves types, generates code or reflects the user module raise."""

    def refuse(*_a, **_k):
        raise AssertionError("a warm process must not resolve, generate or reflect")

    codegen.kernel_source = refuse
    backend.SlangBackend.front_end = refuse
    module.Module.function_overloads = refuse


def forbid_slang() -> None:
    """Also make every path into Slang (sessions, module loads, kernel builds) raise."""
    from slangspec.compile.slang import vulkan_compiler

    forbid_compile()

    def refuse(*_a, **_k):
        raise AssertionError("a warm CUDA process must not start Slang")

    vulkan_compiler.Compiler.session = refuse
    vulkan_compiler.Compiler.load_module = refuse
    vulkan_compiler.Compiler.kernel = refuse


class BlockSlangpy:
    """A meta-path finder that makes ``import slangpy`` fail, as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "slangpy" or name.startswith("slangpy."):
            raise ImportError(f"{name} is blocked in this process")
        return None


def cases(n: int):
    """``n`` distinct specializations of poly, each called forward and backward."""
    shapes = [(7,), (7, 5), (3, 7, 5), (2, 3, 7, 5), (2, 2, 3, 7, 5)]
    for i in range(n):
        shape = shapes[i % len(shapes)]
        grad_x = i // len(shapes) % 2 == 1
        yield shape, grad_x


def build_only(cache_dir: str, signatures: int) -> None:
    """Build every kernel of each case's specialization of poly, calling nothing."""
    m = load_module(
        BuildModule,
        SHADERS / "cached.slang",
        include_paths=[HERE / "slang_lib"],
        cache=slangspec.Cache(cache_dir),
        device="cuda",
    )
    for shape, grad_x in cases(signatures):
        a = torch.ones(1, requires_grad=True)
        x = torch.ones(*shape, requires_grad=grad_x)
        m.poly.warm(call_signature(m.poly.id, (a, x)))


def called(args: argparse.Namespace) -> bool:
    """Call poly forward and backward in each case; whether every result matched torch's."""
    tdev = "cuda" if os.environ.get("SLANGSPEC_DEVICE") == "cuda" else "cpu"
    m = slangspec.load(
        SHADERS / "cached.slang", include_paths=[HERE / "slang_lib"], cache_dir=args.cache_dir
    )
    if args.lease_and_die:
        # The lease of the first case below, as a compile of it would hold it.
        shape, grad_x = next(cases(1))
        a = torch.ones(1, device=tdev, requires_grad=True)
        x = torch.ones(*shape, device=tdev, requires_grad=grad_x)
        key = m.poly.cache_key(m.poly.signature(a, x))
        with m.cache.leases.hold(key, lambda: False):
            print(json.dumps({"leased": key}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    if args.forbid_compile:
        forbid_compile()
    if args.forbid_slang:
        forbid_slang()
    ok = True
    for shape, grad_x in cases(args.signatures):
        a = torch.randn(1, device=tdev, requires_grad=True)
        x = torch.randn(*shape, device=tdev, requires_grad=grad_x)
        y = m.poly(a, x)
        y.sum().backward()
        ref_a = (x.detach() ** 2 + 3).sum().reshape(1)
        ok &= torch.allclose(y, (a * x * x + 3 * a).detach(), rtol=1e-5, atol=1e-5)
        ok &= torch.allclose(a.grad, ref_a, rtol=1e-4, atol=1e-4)
        if grad_x:
            ok &= torch.allclose(x.grad, (2 * a * x).detach(), rtol=1e-5, atol=1e-5)
    return bool(ok)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("cache_dir")
    p.add_argument("--forbid-compile", action="store_true")
    p.add_argument("--forbid-slang", action="store_true")
    p.add_argument("--signatures", type=int, default=2)
    p.add_argument("--lease-and-die", action="store_true")
    p.add_argument("--block-slangpy", action="store_true")
    p.add_argument("--build-only", action="store_true")
    args = p.parse_args()
    if args.block_slangpy:
        sys.meta_path.insert(0, BlockSlangpy())
    ok = True
    if args.build_only:
        build_only(args.cache_dir, args.signatures)
    else:
        ok = called(args)
    waited = max([*disk.lease_waits, *remote.lease_waits], default=0.0)
    report = {
        "counts": dict(compile_counts),
        "ok": ok,
        "lease_wait_s": waited,
        "server_wait_s": sum(server_client.fallback_waits),
        "slangpy_imported": "slangpy" in sys.modules,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(report), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
