"""Hot-call cost of slangspec against slangpy's functional API, same functions and tensors.

    SLANGPY_TORCH_BRIDGE=1 source .gpu/install.sh   # on the GPU machine: slangpy's native bridge
    python benchmarks/dispatch.py [--device cuda] [--json results.json]
    python benchmarks/dispatch.py --device cuda --baseline OLD/src [--repeat 2]

Measures, after warm-up, the mean wall time per call (host and device; synchronized at the end
of each timed batch) of a forward call, of forward+backward with a ready cotangent, and of a
training step (gradients cleared, output summed, backward; beside an autograd node that
launches nothing, the floor), at 1 and 1M elements, for an elementwise polynomial and a
grid-indexed IDiffTensor function, a struct with a matrix field (a dict) times a vector, and a
dot product of two ``float[5]`` arrays. The implementations take turns
over five rounds and each one's best batch counts, so drift in the machine's speed hits all
alike. slangpy takes torch tensors only on CUDA (it crashes on CPU tensors), so on Vulkan only
slangspec and torch are measured.

``--baseline`` compares this tree's slangspec with another's (the ``src`` directory of, say,
``git archive REV src``): fresh processes of each take turns, ``--repeat`` apiece, and each row's
median time is reported for both, with their ratio and its geometric mean over the rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from baseline_tree import tree_path

import slangspec

HERE = Path(__file__).parent


def calibrate(fn: Callable[[], object], sync: Callable[[], None], budget_s: float) -> int:
    """Calls per timed batch so that a batch lasts about ``budget_s``."""
    for _ in range(3):
        fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - start, 1e-7)
    return max(3, min(20000, int(budget_s / once)))


def timed(
    fns: dict[str, Callable[[], object]],
    sync: Callable[[], None],
    budget_s: float = 0.15,
    rounds: int = 5,
) -> dict[str, float]:
    """Mean seconds per call of each function: the best batch of ``rounds``, the functions taking
    turns within each round so that drift in the machine's speed hits them alike."""
    sizes = {name: calibrate(fn, sync, budget_s) for name, fn in fns.items()}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            n = sizes[name]
            sync()
            start = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return best


def slangpy_module(device_kind: str):
    if device_kind != "cuda":
        return None
    import slangpy as spy

    device = spy.create_torch_device(type=spy.DeviceType.cuda, include_paths=[str(HERE)])
    return spy.Module.load_from_file(device, str(HERE / "bench.slang"))


def cases(n: int, tdev: str):
    """(function, arguments, the tensors a training step trains, cotangent, torch twin)."""
    a = torch.randn(n, device=tdev, requires_grad=True)
    x = torch.randn(n, device=tdev, requires_grad=True)
    cot = torch.ones(n, device=tdev)
    m = torch.randn(n, 3, 3, device=tdev, requires_grad=True)
    v = torch.randn(n, 3, device=tdev, requires_grad=True)
    s = torch.randn(n, device=tdev)
    p = torch.randn(n, 5, device=tdev, requires_grad=True)
    q = torch.randn(n, 5, device=tdev, requires_grad=True)

    def poly_torch(a, x):
        return a * x * x + 3 * a

    def mix_torch(a, b, _):
        return a * b + a

    def xform_torch(f, v):
        return torch.einsum("nij,nj->ni", f["m"], v) * f["s"][:, None]

    def dot5_torch(p, q):
        return (p * q).sum(1)

    return [
        ("poly", (a, x), (a, x), cot, poly_torch),
        ("mix2", (a, x, "grid"), (a, x), cot, mix_torch),
        ("xform", ({"m": m, "s": s}, v), (m, v), torch.ones(n, 3, device=tdev), xform_torch),
        ("dot5", (p, q), (p, q), cot, dot5_torch),
    ]


class _Floor(torch.autograd.Function):
    """An autograd node that allocates its output and gradients and launches nothing: the
    least any autograd integration costs per step."""

    @staticmethod
    def forward(ctx, out, a, x):
        ctx.shapes = a.shape, x.shape
        return torch.empty_like(out)

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.shapes
        return None, grad.new_empty(a), grad.new_empty(x)


def floor_of(out: torch.Tensor, trained: tuple[torch.Tensor, ...]):
    """The floor of a function whose result is like ``out`` and which trains ``trained``."""
    empty = out.detach()
    return lambda *_: _Floor.apply(empty, *trained)


MODES = ("forward", "forward+backward", "training step")
"""forward: under no_grad; forward+backward: a ready cotangent; training step: gradients
cleared, the output reduced with ``sum`` and backpropagated, as a training loop does (the
cotangent torch then hands over is expanded from one element)."""


def run(device_kind: str | None) -> list[dict]:
    m = slangspec.load(
        HERE / "bench.slang",
        device=device_kind,
        cache_dir=tempfile.mkdtemp(prefix="slangspec-bench-"),
    )
    tdev = "cuda" if m.device_kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    spy_module = slangpy_module(m.device_kind)
    rows = []
    for n in (1, 1 << 20):
        for name, args, trained, cot, ref in cases(n, tdev):
            impls = {"slangspec": (getattr(m, name), slangspec.grid((n,))), "torch": (ref, None)}
            if spy_module is not None:
                import slangpy as spy

                impls["slangpy"] = (getattr(spy_module, name), spy.grid((n,)))
            for mode in MODES:
                calls = {}
                if mode == "training step":
                    with torch.no_grad():
                        like = ref(*args)
                    chosen = {**impls, "floor": (floor_of(like, trained), None)}
                else:
                    chosen = impls
                for impl, (fn, grid) in chosen.items():
                    call_args = tuple(grid if a == "grid" else a for a in args)

                    def call(fn=fn, call_args=call_args, mode=mode, cot=cot, trained=trained):
                        if mode == "forward":
                            with torch.no_grad():
                                return fn(*call_args)
                        out = fn(*call_args)
                        if mode == "training step":
                            for t in trained:
                                t.grad = None
                            out.sum().backward()
                        else:
                            out.backward(cot)
                        return out

                    calls[impl] = call
                rows.append({"function": name, "elements": n, "mode": mode, **timed(calls, sync)})
    return rows


def against_baseline(device: str | None, baseline: Path, repeat: int) -> list[dict]:
    """Each row's median slangspec time in fresh processes of this tree (``head``) and of the
    tree at ``baseline`` (``base``), the two taking turns; on CUDA also slangpy's, measured
    beside the head's."""
    times: dict[str, dict[tuple, list[float]]] = {"head": {}, "base": {}, "slangpy": {}}
    rows: list[dict] = []
    for _ in range(repeat):
        for tree in ("head", "base"):
            env = {**os.environ, **tree_path(baseline if tree == "base" else None)}
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "rows.json"
                command = [sys.executable, __file__, "--json", str(out)]
                command += ["--device", device] if device else []
                subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
                rows = json.loads(out.read_text())
            for r in rows:
                key = (r["function"], r["elements"], r["mode"])
                times[tree].setdefault(key, []).append(r["slangspec"])
                if tree == "head" and "slangpy" in r:
                    times["slangpy"].setdefault(key, []).append(r["slangpy"])
    order = [(r["function"], r["elements"], r["mode"]) for r in rows]
    return [
        {"function": f, "elements": n, "mode": m}
        | {name: statistics.median(t[(f, n, m)]) for name, t in times.items() if t}
        for f, n, m in order
    ]


def print_against_baseline(rows: list[dict]) -> None:
    has_spy = "slangpy" in rows[0]
    head = (
        f"{'function':8s} {'elements':>9s} {'mode':17s} {'head':>11s} {'base':>11s} {'ratio':>6s}"
    )
    print(head + (f" {'/slangpy':>8s}" if has_spy else ""))
    for r in rows:
        line = f"{r['function']:8s} {r['elements']:9d} {r['mode']:17s}"
        line += f" {r['head'] * 1e6:9.1f}us {r['base'] * 1e6:9.1f}us {r['head'] / r['base']:6.3f}"
        print(line + (f" {r['head'] / r['slangpy']:8.2f}" if has_spy else ""))
    ratios = [r["head"] / r["base"] for r in rows]
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"ratio = this tree's slangspec / the baseline's (medians); geometric mean {mean:.3f}")
    if has_spy:
        print("/slangpy = this tree's slangspec / slangpy, both medians of the head's processes")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--side-stream",
        action="store_true",
        help="run every call on a torch stream other than the default one",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another tree's src directory: its slangspec against this one's, in fresh processes",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        choices=range(1, 11),
        default=2,
        metavar="1-10",
        help="with --baseline: processes a tree",
    )
    args = parser.parse_args()
    if args.baseline:
        if not (args.baseline / "slangspec" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: expected a src directory holding slangspec/")
        if args.side_stream:
            parser.error("--side-stream is not passed on to --baseline's processes")
        rows = against_baseline(args.device, args.baseline.resolve(), args.repeat)
        print_against_baseline(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return
    if args.side_stream:
        if args.device == "vulkan" or not torch.cuda.is_available():
            parser.error("--side-stream needs CUDA")
        with torch.cuda.stream(torch.cuda.Stream()):
            rows = run(args.device)
    else:
        rows = run(args.device)
    has_spy = "slangpy" in rows[0]
    head = f"{'function':8s} {'elements':>9s} {'mode':17s} {'slangspec':>11s}"
    head += f" {'slangpy':>11s} {'ratio':>6s}" if has_spy else ""
    print(head + f" {'torch':>11s} {'/torch':>6s} {'floor':>11s}")
    for r in rows:
        line = f"{r['function']:8s} {r['elements']:9d} {r['mode']:17s}"
        line += f" {r['slangspec'] * 1e6:9.1f}us"
        if has_spy:
            line += f" {r['slangpy'] * 1e6:9.1f}us {r['slangspec'] / r['slangpy']:6.2f}"
        line += f" {r['torch'] * 1e6:9.1f}us {r['slangspec'] / r['torch']:6.2f}"
        print(line + (f" {r['floor'] * 1e6:9.1f}us" if "floor" in r else ""))
    if has_spy:
        print("ratio = slangspec / slangpy (below 1: slangspec is faster)")
    print("/torch = slangspec / torch; floor: an autograd node that launches nothing")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
