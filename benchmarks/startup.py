"""First-call latency in fresh processes: slangspec cold and warm, slangpy without and with its
own module and shader caches.

    python benchmarks/startup.py [--device cuda] [--repeat 3] [--json results.json]
                                 [--baseline OTHER/src] [--warm-only]
    python benchmarks/startup.py --whole [--device cuda] [--repeat 5] [--modes "slangspec warm"]

``--whole`` times the process as a user sees it: from just before ``exec`` to the first
forward+backward result (synchronized), imports, device start-up and all, for slangspec warm and
cold, slangpy with its caches (CUDA) and the same maths written in plain torch; medians, and
each beside torch alone; then the same from "torch ready" (after ``import torch``, CUDA
start-up and torch's own first backward, which every mode pays alike and which carry most of a
shared host's noise) to the result; then the median of each phase (milliseconds from the
previous mark; the first from exec). The modes take turns, so that drift hits them alike.

Without ``--whole``, every measurement is a new process; timing starts after imports, torch's
own first backward (which imports sympy) and the creation of slangpy's device for slangpy's modes
and for slangspec on Vulkan (slangspec on CUDA opens none: its Slang session is timed), and covers
loading the module, the first forward call (synchronized) and the first backward (synchronized).
``--baseline`` measures another tree's slangspec too, the two taking turns process by process.
The ``gc`` column is the part of ``total`` the cyclic garbage collector took (a full collection
walks every object of the process; it lands in whichever phase crosses its threshold).
The ``imports`` column is the part of ``load`` that imports slangspec's runtime (a warm process's
import time, which dataclass definitions and modules a hit does not use once grew by 20 ms).
Both packages' bytecode is written first, and slangspec's prepared files (``specialize
prepare``), as an install leaves them (``installed.py``).
"poly" lives in a module that does not import slangpy; "mix2" takes IDiffTensor parameters, so
its module imports slangpy's Slang library. slangpy takes torch tensors only on CUDA (it crashes
on CPU tensors), so on Vulkan only slangspec is measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from baseline_tree import from_tree, tree_path

HERE = Path(__file__).parent
MODULES = {"poly": HERE / "startup.slang", "mix2": HERE / "bench.slang"}
N = 4096


def _tensors(function: str, tdev: str, grid):
    import torch

    a = torch.randn(N, device=tdev, requires_grad=True)
    x = torch.randn(N, device=tdev, requires_grad=True)
    return (a, x, grid((N,))) if function == "mix2" else (a, x)


def _collector_time() -> Callable[[], float]:
    """Start adding up the seconds the cyclic garbage collector runs; the returned function
    stops and gives them. A full collection walks the whole heap (torch's, sympy's and
    slangpy's objects): tens of milliseconds that land in whichever phase allocates past the
    threshold, so they are shown apart."""
    spent = [0.0, 0.0]

    def note(phase: str, _info: dict) -> None:
        if phase == "start":
            spent[1] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - spent[1]

    gc.callbacks.append(note)

    def stop() -> float:
        gc.callbacks.remove(note)
        return spent[0]

    return stop


def child(mode: str, function: str, kind: str, cache: str) -> dict[str, float]:
    import torch

    tdev = "cuda" if kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    path = MODULES[function]
    # torch's first backward imports sympy (~0.7 s); that is torch's start-up, not ours.
    warmup = torch.ones(2, device=tdev, requires_grad=True)
    (warmup * 2).backward(torch.ones_like(warmup))
    if mode == "slangspec":
        import slangspec

        if kind == "vulkan":
            open_device = from_tree("open_device", "slangspec.runtime.devices", "slangspec.devices")
            open_device(kind, slangspec.Cache(cache).files.shader_cache())
        args = _tensors(function, tdev, slangspec.grid)
        sync()
        collected = _collector_time()
        t0 = time.perf_counter()
        import slangspec.runtime.module  # what ``load`` imports first, timed on its own

        t_imports = time.perf_counter()
        fn = getattr(slangspec.load(path, device=kind, cache_dir=cache), function)
    else:
        import slangpy as spy

        torch.cuda.init()
        handles = spy.get_cuda_current_context_native_handles()
        caching = {}
        if mode == "slangpy-cached":
            caching = {
                "module_cache_path": f"{cache}/modules",
                "shader_cache_path": f"{cache}/shaders",
            }
        device = spy.Device(
            type=spy.DeviceType.cuda,
            existing_device_handles=handles,
            compiler_options={"include_paths": [str(HERE), spy.SHADER_PATH]},
            **caching,
        )
        args = _tensors(function, tdev, spy.grid)
        sync()
        collected = _collector_time()
        t0 = t_imports = time.perf_counter()
        fn = getattr(spy.Module.load_from_file(device, str(path)), function)
    t_load = time.perf_counter()
    y = fn(*args)
    sync()
    t_fwd = time.perf_counter()
    y.backward(torch.ones_like(y))
    sync()
    t_bwd = time.perf_counter()
    return {
        "imports": t_imports - t0,
        "load": t_load - t0,
        "forward": t_fwd - t_load,
        "backward": t_bwd - t_fwd,
        "total": t_bwd - t0,
        "gc": collected(),
    }


WHOLE = {
    "torch": """
import torch
MARK("import torch")
READY()
a = torch.randn(N, device=DEV, requires_grad=True)
x = torch.randn(N, device=DEV, requires_grad=True)
y = (a * x * x + 3.0 * a) if FUNCTION == "poly" else (a * x + a)
MARK("forward")
""",
    "slangspec": """
import torch
MARK("import torch")
READY()
import slangspec
MARK("import slangspec")
m = slangspec.load(PATH, device=KIND, cache_dir=CACHE)
MARK("load")
a = torch.randn(N, device=DEV, requires_grad=True)
x = torch.randn(N, device=DEV, requires_grad=True)
args = (a, x) if FUNCTION == "poly" else (a, x, slangspec.grid((N,)))
y = getattr(m, FUNCTION)(*args)
MARK("forward")
""",
    "slangpy-cached": """
import torch
MARK("import torch")
READY()
import slangpy as spy
torch.cuda.init()
device = spy.Device(
    type=spy.DeviceType.cuda,
    existing_device_handles=spy.get_cuda_current_context_native_handles(),
    compiler_options={"include_paths": [HERE, spy.SHADER_PATH]},
    module_cache_path=CACHE + "/modules",
    shader_cache_path=CACHE + "/shaders",
)
MARK("load")
a = torch.randn(N, device=DEV, requires_grad=True)
x = torch.randn(N, device=DEV, requires_grad=True)
args = (a, x) if FUNCTION == "poly" else (a, x, spy.grid((N,)))
y = getattr(spy.Module.load_from_file(device, PATH), FUNCTION)(*args)
MARK("forward")
""",
}
_MARKS = """
import json, sys, time
MARKS = {}

def MARK(name):
    if "torch" in sys.modules and DEV == "cuda":
        sys.modules["torch"].cuda.synchronize()
    MARKS[name] = time.clock_gettime(time.CLOCK_MONOTONIC)

def READY():
    # CUDA start-up and torch's first backward with a gradient tensor (which imports sympy)
    # cost every mode the same.
    w = torch.ones(2, device=DEV, requires_grad=True)
    (w * 2).backward(torch.ones_like(w))
    MARK("torch ready")
"""
_DONE = """
y.backward(torch.ones_like(y))
MARK("backward")
print(json.dumps(MARKS))
"""
PHASES = ("import torch", "torch ready", "import slangspec", "load", "forward", "backward")


def whole(mode: str, function: str, kind: str, cache: str) -> dict[str, float]:
    """Seconds from just before exec to each mark of one process, the last being the first
    forward+backward result."""
    body = WHOLE["slangpy-cached" if mode == "slangpy" else mode]
    head = (
        f"N = {N}\nFUNCTION = {function!r}\nKIND = {kind!r}\nCACHE = {cache!r}\n"
        f"DEV = {'cuda' if kind == 'cuda' else 'cpu'!r}\nPATH = {str(MODULES[function])!r}\n"
        f"HERE = {str(HERE)!r}\n"
    )
    # Bytecode is cached, as it is for an installed package (the GPU image turns that off).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.clock_gettime(time.CLOCK_MONOTONIC)
    out = subprocess.run(
        [sys.executable, "-c", head + _MARKS + body + _DONE],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} {function} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    marks = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: t - start for name, t in marks.items()}


WHOLE_MODES = ("torch", "slangspec warm", "slangspec cold", "slangpy")


def whole_process(kind: str, repeat: int, only: list[str] | None = None) -> None:
    modes = [m for m in WHOLE_MODES if m != "slangpy" or kind == "cuda"]
    modes = ["torch", *(m for m in modes if m != "torch" and (not only or m in only))]
    print(
        f"{'function':8s} {'mode':15s} {'whole':>9s} {'over torch':>11s} {'after ready':>10s} "
        f"{'over torch':>10s}   phases (medians, ms)"
    )
    for function in MODULES:
        warm_cache, slangpy_cache = tempfile.mkdtemp(), tempfile.mkdtemp()
        whole("slangspec", function, kind, warm_cache)  # fills the warm cache, unmeasured
        if "slangpy" in modes:
            whole("slangpy", function, kind, slangpy_cache)
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for _ in range(repeat):
            for mode in modes:
                cache = {"slangspec warm": warm_cache, "slangpy": slangpy_cache}.get(
                    mode, tempfile.mkdtemp()
                )
                runs[mode].append(whole(mode.split()[0], function, kind, cache))
        torch_alone = statistics.median(r["backward"] for r in runs["torch"])
        torch_own = statistics.median(r["backward"] - r["torch ready"] for r in runs["torch"])
        for mode in modes:
            med = statistics.median(r["backward"] for r in runs[mode])
            own = statistics.median(r["backward"] - r["torch ready"] for r in runs[mode])
            over = "" if mode == "torch" else f"{(med - torch_alone) * 1e3:+9.0f}ms"
            own_over = "" if mode == "torch" else f"{(own - torch_own) * 1e3:+8.1f}ms"
            present = [name for name in PHASES if name in runs[mode][0]]
            steps = []
            for previous, name in zip([None, *present], present, strict=False):
                took = [r[name] - (r[previous] if previous else 0.0) for r in runs[mode]]
                steps.append(f"{name} {statistics.median(took) * 1e3:.0f}")
            print(
                f"{function:8s} {mode:15s} {med * 1e3:7.0f}ms {over:>11s} "
                f"{own * 1e3:8.1f}ms {own_over:>10s}   " + ", ".join(steps)
            )


def measure(
    mode: str, function: str, kind: str, cache: str, src: Path | None = None
) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            mode,
            "--function",
            function,
            "--device",
            kind,
            "--cache",
            cache,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **tree_path(src)},
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} {function} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def fresh_and_reused(
    cold: str | None,
    warm: str,
    function: str,
    kind: str,
    repeat: int,
    trees: dict[str, Path | None],
) -> dict[str, tuple[dict[str, float] | None, dict[str, float]]]:
    """For each tree (a ``src`` directory, None for the installed one): medians of ``cold``
    runs, each with an empty cache (None where ``cold`` is), and of ``warm`` runs sharing a
    cache that one unmeasured ``warm`` run of that tree filled. The trees take turns, so that
    drift hits them alike."""
    fresh: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
    reused: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
    caches = {tree: tempfile.mkdtemp() for tree in trees}
    for _ in range(repeat if cold else 0):
        for tree, src in trees.items():
            fresh[tree].append(measure(cold, function, kind, tempfile.mkdtemp(), src))
    for tree, src in trees.items():
        measure(warm, function, kind, caches[tree], src)
    for _ in range(repeat):
        for tree, src in trees.items():
            reused[tree].append(measure(warm, function, kind, caches[tree], src))
    return {
        tree: (median(fresh[tree]) if fresh[tree] else None, median(reused[tree])) for tree in trees
    }


def main() -> None:
    # Each process builds its own misses, as measured before the compile server existed
    # (edit_loop.py --server measures the server).
    os.environ.setdefault("SLANGSPEC_COMPILE_SERVER", "off")
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another tree's src directory: its slangspec modes too, taking turns with this one",
    )
    p.add_argument("--whole", action="store_true", help="time whole processes from exec")
    p.add_argument(
        "--modes",
        nargs="+",
        choices=WHOLE_MODES[1:],
        default=None,
        help="with --whole: only these modes beside torch (default: all)",
    )
    p.add_argument(
        "--warm-only",
        action="store_true",
        help="only slangspec's warm window (of each tree): no cold processes, no slangpy",
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--function", default="poly", help=argparse.SUPPRESS)
    p.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    kind = args.device or os.environ.get("SLANGSPEC_DEVICE") or "vulkan"
    if args.child:
        print(json.dumps(child(args.child, args.function, kind, args.cache)), flush=True)
        return
    sys.path.insert(0, str(HERE))
    from installed import compile_packages, package_directory, prepare

    trees: dict[str, Path | None] = {"": None}
    if args.baseline:
        trees[" (baseline)"] = args.baseline.resolve()
    compile_packages(package_directory("slangspec"), package_directory("slangpy"), args.baseline)
    prepare(package_directory("slangspec").parent)
    if args.baseline:
        prepare(args.baseline.resolve())
    if args.whole:
        whole_process(kind, args.repeat, args.modes)
        return
    starts = ("warm",) if args.warm_only else ("cold", "warm")
    modes = [f"slangspec {m}{tree}" for tree in trees for m in starts]
    if kind == "cuda" and not args.warm_only:
        modes += ["slangpy no cache", "slangpy cached"]
    phases = ("imports", "load", "forward", "backward", "total", "gc")
    print(f"{'function':8s} {'mode':29s} " + " ".join(f"{k:>9s}" for k in phases), flush=True)
    rows = []
    for function in MODULES:
        results = {}
        cold = None if args.warm_only else "slangspec"
        for tree, (fresh, reused) in fresh_and_reused(
            cold, "slangspec", function, kind, args.repeat, trees
        ).items():
            results[f"slangspec cold{tree}"], results[f"slangspec warm{tree}"] = fresh, reused
        if kind == "cuda" and not args.warm_only:
            (results["slangpy no cache"], results["slangpy cached"]) = fresh_and_reused(
                "slangpy", "slangpy-cached", function, kind, args.repeat, {"": None}
            )[""]
        for mode in modes:
            r = {"function": function, "mode": mode, **results[mode]}
            rows.append(r)
            # Printed as measured, so that a run cut short still shows what it measured.
            times = " ".join(f"{r[k] * 1e3:7.1f}ms" for k in phases)
            print(f"{function:8s} {mode:29s} {times}", flush=True)
    if not args.warm_only:
        for function in MODULES:
            by = {r["mode"]: r["total"] for r in rows if r["function"] == function}
            line = f"{function}: warm/cold {by['slangspec warm'] / by['slangspec cold']:.3f}"
            if "slangpy cached" in by:
                warm = by["slangspec warm"]
                line += f", warm/slangpy-cached {warm / by['slangpy cached']:.3f}"
                line += f", warm/slangpy-no-cache {warm / by['slangpy no cache']:.3f}"
            print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
