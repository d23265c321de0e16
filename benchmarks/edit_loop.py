"""The edit-compile loop: a new or edited kernel's first forward+backward in a fresh process,
phase by phase.

    python benchmarks/edit_loop.py [--device cuda] [--repeat 5] [--baseline OTHER/src]

Modes, each a fresh process, taking turns so that a noisy host's drift hits them alike:

- ``empty``: a function never compiled, with an empty cache (``poly`` has no imports; ``mix2``
  takes ``IDiffTensor`` parameters, so its module imports slangpy's Slang library);
- ``new``: the same, in a module of a directory of its own, with a cache that has compiled
  something else before (slangpy's library is there as IR);
- ``edited``: in a module of ten such functions that imports slangpy, all ten built, one
  function's body edited; the edited function's first forward+backward, then the nine others'
  (with what they compiled).

Timing starts after ``import torch``, CUDA start-up and torch's own first backward (and on
Vulkan the opening of slangpy's device, as in ``startup.py``), and covers loading the module and
the first forward and backward (synchronized): on CUDA everything slangspec opens (its Slang
session, or a baseline tree's slangpy device) is inside it, and so is importing the modules
``slangspec.load`` brings in (their bytecode written first, and each tree's prepared files where
it has ``specialize prepare``, as an install leaves them: ``installed.py``). The phases are
summed over the process by ``phase_timer`` (inclusive: a Slang compile holds the front-end it
starts). ``--baseline`` runs every mode a second time with another tree's ``src`` first on
the path (phases its code lacks are not timed), interleaved with this one. Every tree builds
in-process (``SLANGSPEC_COMPILE_SERVER=off``) except ``--server``'s, a third run of this tree
whose caches have a compile server, started before the trial and warmed by the trial's first
builds (another module); its ``empty`` mode finds none, and starts one as a first miss does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baseline_tree import from_tree, tree_path

HERE = Path(__file__).parent
SRC = HERE.parent / "src"
N = 4096
TEN = 10
EDITED = 3
BODIES = {
    "poly": "[Differentiable]\nfloat poly(float a, float x) {{ return a * x * x + {c} * a; }}\n",
    "mix2": "import slangpy;\n[Differentiable]\nfloat mix2(IDiffTensor<float, 1> a, "
    "IDiffTensor<float, 1> b, int i) {{ return a[i] * b[i] + {c} * a[i]; }}\n",
}
TEN_FUNCTIONS = "import slangpy;\n" + "".join(
    f"[Differentiable]\nfloat f{k}(IDiffTensor<float, 1> a, IDiffTensor<float, 1> b, int i)"
    f" {{{{ return a[i] * b[i] + {{c{k}}} * a[i]; }}}}\n"
    for k in range(TEN)
)


def _first_forward_backward(fn, function: str, tdev: str, sync) -> dict[str, float]:
    import torch

    import slangspec

    a = torch.randn(N, device=tdev, requires_grad=True)
    x = torch.randn(N, device=tdev, requires_grad=True)
    args = (a, x) if function == "poly" else (a, x, slangspec.grid((N,)))
    sync()
    t0 = time.perf_counter()
    y = fn()(*args)
    sync()
    t1 = time.perf_counter()
    y.backward(torch.ones_like(y))
    sync()
    return {"forward": t1 - t0, "backward": time.perf_counter() - t1}


def child(path: str, functions: list[str], kind: str, cache: str, phases: str) -> dict:
    sys.path.insert(0, str(HERE))
    import phase_timer

    phase_timer.install(Path(phases))
    import torch

    tdev = "cuda" if kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
    warmup = torch.ones(2, device=tdev, requires_grad=True)
    (warmup * 2).backward(torch.ones_like(warmup))
    import slangspec

    compile_counts = from_tree("compile_counts", "slangspec.settings", "slangspec.counts")

    # On Vulkan, as benchmarks/startup.py, slangpy's device is opened before the timing starts;
    # on CUDA whatever slangspec opens (its Slang session, a baseline's slangpy device) is timed.
    if kind == "vulkan":
        opened = slangspec.Cache(cache)
        # A baseline tree's cache may hand out its shader cache itself.
        open_device = from_tree("open_device", "slangspec.runtime.devices", "slangspec.devices")
        open_device(kind, getattr(opened, "files", opened).shader_cache())
    sync()
    t0 = time.perf_counter()
    m = slangspec.load(path, device=kind, cache_dir=cache)
    load = time.perf_counter() - t0
    first = functions[0]
    shape = "poly" if first == "poly" else "mix2"
    times = _first_forward_backward(lambda: getattr(m, first), shape, tdev, sync)
    out: dict = {"load": load, **times, "total": load + times["forward"] + times["backward"]}
    out["phases"] = {
        phase: seconds for phase, seconds, _ in phase_timer.summary(Path(phases), 0.0, 1)[:-1]
    }
    if len(functions) > 1:
        compile_counts.clear()
        t1 = time.perf_counter()
        for name in functions[1:]:
            _first_forward_backward(lambda n=name: getattr(m, n), "mix2", tdev, sync)
        out["others"] = time.perf_counter() - t1
        out["others' compiles"] = dict(compile_counts)
    return out


def _tree_env(src: Path, server: str) -> dict[str, str]:
    return {**os.environ, **tree_path(src), "SLANGSPEC_COMPILE_SERVER": server}


def run_child(
    src: Path, path: Path, functions: list[str], kind: str, cache: Path, server: str = "off"
) -> dict:
    env = _tree_env(src, server)
    with tempfile.TemporaryDirectory() as phases:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                json.dumps([str(path), functions, kind, str(cache), phases]),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{path} {functions} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


class Trial:
    """One tree's modes, each call a fresh module (and a fresh cache where the mode says)."""

    def __init__(self, src: Path, kind: str, root: Path, server: bool = False) -> None:
        self.src, self.kind, self.root = src, kind, root
        self.server = "auto" if server else "off"
        self.count = 0
        self.used = self._place("used")
        self.ten = self._place("ten") / "ten.slang"
        self.ten_cache = self._place("ten cache")
        self.servers = [self._serve(c) for c in (self.used, self.ten_cache)] if server else []
        # A cache that has compiled something else: slangpy's library is in it.
        module = self._module("mix2", 9.0)
        self._run(module, ["mix2"], self.used)
        self.constants = {f"c{k}": f"{k + 1}.0" for k in range(TEN)}
        self.ten.write_text(TEN_FUNCTIONS.format(**self.constants))
        self._run(self.ten, [f"f{k}" for k in range(TEN)], self.ten_cache)

    def _run(self, path: Path, functions: list[str], cache: Path) -> dict:
        return run_child(self.src, path, functions, self.kind, cache, self.server)

    def _serve(self, cache: Path) -> subprocess.Popen:
        """A compile server of ``cache``, once it answers."""
        env = _tree_env(self.src, "off")
        command = [sys.executable, "-m", "slangspec.compile.server", "--cache-dir", str(cache)]
        proc = subprocess.Popen(command, env=env)  # its log goes to this one's stderr
        asking = "from slangspec.compile.server import client as c; import sys; "
        asking += "sys.exit(c.status(sys.argv[1]) is None)"
        while subprocess.run([sys.executable, "-c", asking, str(cache)], env=env).returncode:
            if proc.poll() is not None:
                raise RuntimeError(f"the compile server of {cache} left before it answered")
            time.sleep(0.2)
        return proc

    def close(self) -> None:
        """Stop every compile server of this trial's caches, those a first miss started too."""
        if self.server == "off":
            return
        for proc in self.servers:
            proc.kill()
        env = _tree_env(self.src, "off")
        stopping = "from slangspec.compile.server import client as c; import sys; "
        stopping += "[c.stop(p) for p in sys.argv[1:]]"
        places = [str(p) for p in self.root.iterdir()]
        subprocess.run([sys.executable, "-c", stopping, *places], env=env, check=False)

    def _place(self, what: str) -> Path:
        self.count += 1
        place = self.root / f"{self.count}-{what.replace(' ', '-')}"
        place.mkdir(parents=True)
        return place

    def _module(self, function: str, constant: float) -> Path:
        path = self._place(function) / f"{function}.slang"
        path.write_text(BODIES[function].format(c=f"{constant}"))
        return path

    def empty(self, function: str) -> dict:
        constant = 100.0 + self.count
        return self._run(self._module(function, constant), [function], self._place("c"))

    def new(self, function: str) -> dict:
        module = self._module(function, 100.0 + self.count)
        return self._run(module, [function], self.used)

    def edited(self) -> dict:
        self.constants[f"c{EDITED}"] = f"{100.0 + self.count}"
        self.count += 1
        self.ten.write_text(TEN_FUNCTIONS.format(**self.constants))
        order = [f"f{EDITED}", *(f"f{k}" for k in range(TEN) if k != EDITED)]
        return self._run(self.ten, order, self.ten_cache)


TIMES = ("load", "forward", "backward", "total")
MODES = [
    ("poly", "empty"),
    ("mix2", "empty"),
    ("poly", "new"),
    ("mix2", "new"),
    (f"f{EDITED} of ten", "edited"),
]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--baseline", type=Path, default=None, help="another tree's src directory")
    p.add_argument("--server", action="store_true", help="also this tree with compile servers")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(*json.loads(args.child))), flush=True)
        return
    kind = args.device or os.environ.get("SLANGSPEC_DEVICE") or "vulkan"
    trees = {"this tree": SRC}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    sys.path.insert(0, str(HERE))
    from installed import compile_packages, package_directory, prepare

    compile_packages(*trees.values(), package_directory("slangpy"))
    for src in trees.values():
        prepare(src)
    runs: dict[tuple[str, str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as root:
        trials = {tree: Trial(src, kind, Path(root) / tree) for tree, src in trees.items()}
        if args.server:
            trials["this tree, server"] = Trial(SRC, kind, Path(root) / "server", server=True)
        try:
            for _ in range(args.repeat):
                for function, mode in MODES:
                    for tree, trial in trials.items():
                        run = trial.edited if mode == "edited" else getattr(trial, mode)
                        result = run() if mode == "edited" else run(function)
                        runs.setdefault((function, mode, tree), []).append(result)
                        total = result["total"] * 1e3
                        print(f"{function} {mode} ({tree}): {total:.0f} ms", flush=True)
        finally:
            for trial in trials.values():
                trial.close()
    print(f"{kind}, medians of {args.repeat} fresh processes\n")
    print("| function | mode | tree | load | forward | backward | total | the nine others |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    table = []
    for (function, mode, tree), results in runs.items():
        med = {k: statistics.median(r[k] for r in results) for k in TIMES}
        others = ""
        if "others" in results[0]:
            seconds = statistics.median(r["others"] for r in results)
            compiled = results[-1]["others' compiles"]
            others = f"{seconds:.3f} s, compiled {compiled or 'nothing'}"
        phases = {
            name: statistics.median(r["phases"].get(name, 0.0) for r in results)
            for name in results[0]["phases"]
        }
        table.append({"function": function, "mode": mode, "tree": tree, **med, "phases": phases})
        print(
            f"| {function} | {mode} | {tree} | "
            + " | ".join(f"{med[k] * 1e3:.0f} ms" for k in TIMES)
            + f" | {others} |"
        )
    print("\nphases (medians, ms, inclusive)\n")
    for row in table:
        steps = ", ".join(f"{name} {s * 1e3:.0f}" for name, s in row["phases"].items())
        print(f"{row['function']} {row['mode']} ({row['tree']}): {steps}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
