"""Machines sharing one Redis server, simulated as processes with separate local caches: how
long each takes to its first forward+backward of a cold `mix2` (a function whose module imports
slangpy's Slang library, the slow case to compile).

    python benchmarks/cluster.py [--device cuda] [--nodes 8] [--repeat 3] [--warm-jobs 16]

Each round starts a fresh redis-server and fresh local caches, then times:
- all cold: one node with no remote tier, which is what every node pays without one;
- together: ``--nodes`` nodes starting at once on the cold key (how many compiled, the time of
  the one that did, and the slowest of the others);
- after: one more node starting once they are done, served by the remote tier.
Each time runs from "torch ready" (after ``import torch``, CUDA start-up and torch's own first
backward) to the node's first forward+backward result; medians over the rounds. Bytecode is
cached, as for an installed package.

With ``--warm-jobs J``, also the 24-specialization manifest of ``warm_jobs.py``: the wall time
of one ``specialize warm --jobs J`` alone, against two at once with separate local caches
sharing one server (the slower of the two), which split the manifest between them. Where the
host has 2·J cores, each run is held to J of its own, as on two machines, and where it has two
GPUs, each run has one of its own (the run alone the first). Two machines do not share caches,
memory bandwidth or power as two halves of one host do, so each round also times two runs at
once that share nothing (no server): one machine's time with a neighbour loading the host as
the second machine of the sharing pair does. ``--nodes 0`` times the warm runs only.

The remote tier shares cubins, so the gain is CUDA's: on Vulkan a node served by the remote is
spared type resolution, code generation, slangpy's library (its compiled modules travel) and
the pipelines another node created (shader-cache snapshots travel), and still links the shared
sources through slangpy.
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
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from phase_timer import timeline  # noqa: E402
from redis_server import RedisServer  # noqa: E402  (the tests' real redis-server)
from warm_jobs import TIMED_CLI, installed_env, manifest  # noqa: E402

NODE = """
import json, sys, time
import torch
cache, remote, kind = sys.argv[1:4]
dev = "cuda" if kind == "cuda" else "cpu"
w = torch.ones(2, device=dev, requires_grad=True)
(w * 2).backward(torch.ones_like(w))
if dev == "cuda":
    torch.cuda.synchronize()
start = time.perf_counter()
import slangspec
from slangspec.settings import compile_counts
m = slangspec.load(sys.argv[4], device=kind, cache_dir=cache, remote=remote or None)
a = torch.randn(4096, device=dev, requires_grad=True)
b = torch.randn(4096, device=dev, requires_grad=True)
y = m.mix2(a, b, slangspec.grid((4096,)))
if dev == "cuda":
    torch.cuda.synchronize()
forward = time.perf_counter() - start
y.backward(torch.ones_like(y))
if dev == "cuda":
    torch.cuda.synchronize()
seconds = time.perf_counter() - start
ok = torch.allclose(a.grad, b.detach() + 1) and torch.allclose(b.grad, a.detach())
from slangspec.cache_store import disk, remote
print(json.dumps({
    "seconds": seconds, "forward": forward, "ok": bool(ok), "counts": dict(compile_counts),
    "waits": [round(w, 3) for w in disk.lease_waits + remote.lease_waits],
    "slangpy": "slangpy" in sys.modules,
}))
"""


def node_env(remote: str) -> dict[str, str]:
    """The environment of a node: its remote tier, if any, the cluster's secret (without one,
    a remote tier is refused), and bytecode cached as it is for an installed package."""
    env = installed_env()
    env.pop("SLANGSPEC_REMOTE", None)
    env["SLANGSPEC_REMOTE_SECRET"] = "the secret of the benchmark cluster"
    if remote:
        env["SLANGSPEC_REMOTE"] = remote
    return env


def start_node(cache: Path, remote: str, kind: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", NODE, str(cache), remote, kind, str(HERE / "bench.slang")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=node_env(""),
    )


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"a node failed ({proc.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    if not result["ok"]:
        raise RuntimeError("a node computed a wrong gradient")
    return result


def one_round(kind: str, nodes: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="slangspec-cluster-"))
    cold = finish(start_node(root / "alone", "", kind))["seconds"]
    server = RedisServer(root / "redis").start()
    try:
        procs = [start_node(root / f"node{i}", server.url, kind) for i in range(nodes)]
        results = [finish(p) for p in procs]
        after = finish(start_node(root / "late", server.url, kind))
    finally:
        server.stop()
    compiled = [r for r in results if r["counts"].get("specialize", 0)]
    others = [r["seconds"] for r in results if not r["counts"].get("specialize", 0)]
    for r in sorted(results, key=lambda r: r["seconds"]):
        print(f"  node: {json.dumps(r)}")
    return {
        "all cold": cold,
        "compiled": len(compiled),
        "first": max(r["seconds"] for r in compiled) if compiled else float("nan"),
        "others, slowest": max(others) if others else float("nan"),
        "after": after["seconds"],
        "after compiled": after["counts"].get("specialize", 0) + after["counts"].get("codegen", 0),
    }


def machine_cores(i: int, jobs: int) -> set[int] | None:
    """The CPU cores of simulated machine ``i``: its own ``jobs`` of this host's, when the
    host has enough for two; else None (the machines share every core)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 * jobs:
        return None
    return set(cores[i * jobs : (i + 1) * jobs])


def machine_gpu(i: int) -> dict[str, str]:
    """The environment that gives simulated machine ``i`` a GPU of its own, when the host has
    two (asked of the kernel driver, which starts no CUDA here); else nothing."""
    gpus = Path("/proc/driver/nvidia/gpus")
    count = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    return {"CUDA_VISIBLE_DEVICES": str(i)} if count >= 2 else {}


def warm_run(
    work: Path, name: str, jobs: int, kind: str, remote: str, machine: int
) -> subprocess.Popen:
    command = [sys.executable, "-c", TIMED_CLI, str(HERE), str(work / f"{name}.phases")]
    command += ["warm", str(manifest(work)), "--jobs", str(jobs)]
    command += ["--cache-dir", str(work / name), "--device", kind, "--json"]
    cores = machine_cores(machine, jobs)
    pin = None if cores is None else lambda: os.sched_setaffinity(0, cores)
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**node_env(remote), **machine_gpu(machine)},
        preexec_fn=pin,
    )


def finished(proc: subprocess.Popen) -> dict[str, int]:
    """How many items of a warm run ended in each status."""
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"a warm run failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    statuses: dict[str, int] = {}
    for result in json.loads(out):
        statuses[result["status"]] = statuses.get(result["status"], 0) + 1
    return statuses


def when_of(phases: Path, began: float) -> dict[str, float]:
    return {k: round(v, 2) for k, v in timeline(phases, began).items()}


def two_at_once(
    work: Path, name: str, jobs: int, kind: str, remote: str
) -> tuple[float, list, list]:
    """Seconds until the slower of two warm runs started together is done, how many items
    each built, and each one's timeline (phase_timer)."""
    began, start = time.time(), time.perf_counter()
    procs = [warm_run(work, f"{name}{i}", jobs, kind, remote, i) for i in range(2)]
    built = [finished(p).get("built", 0) for p in procs]
    when = [when_of(work / f"{name}{i}.phases", began) for i in range(2)]
    return time.perf_counter() - start, built, when


def warm_round(kind: str, jobs: int) -> dict[str, Any]:
    """Seconds of one warm run alone, of the slower of two sharing nothing, and of the slower
    of two sharing one server, with how many items each of those two built and when each
    first compiled and last finished a phase (and when the run alone did)."""
    work = Path(tempfile.mkdtemp(prefix="slangspec-cluster-warm-"))
    began, start = time.time(), time.perf_counter()
    finished(warm_run(work, "alone", jobs, kind, "", 0))
    alone = time.perf_counter() - start
    alone_when = when_of(work / "alone.phases", began)
    neighbours, _, _ = two_at_once(work, "apart", jobs, kind, "")
    server = RedisServer(work / "redis").start()
    try:
        together, built, when = two_at_once(work, "node", jobs, kind, server.url)
    finally:
        server.stop()
    return {
        "alone": alone,
        "timeline alone": alone_when,
        "beside a neighbour": neighbours,
        "two sharing": together,
        "built by each": built,
        "timeline of each": when,
    }


def main() -> None:
    # Each process builds its own misses, as measured before the compile server existed
    # (edit_loop.py --server measures the server).
    os.environ.setdefault("SLANGSPEC_COMPILE_SERVER", "off")
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warm-jobs", type=int, default=None, help="also time the warm manifest")
    args = p.parse_args()
    kind = args.device or os.environ.get("SLANGSPEC_DEVICE") or "vulkan"
    # Bytecode written once before timing, as installing a package does.
    modules = "import slangpy, slangspec.runtime.module, slangspec.cli"
    subprocess.run([sys.executable, "-c", modules], env=node_env(""), check=True)
    if args.nodes:
        rounds = []
        for _ in range(args.repeat):
            start = time.monotonic()
            rounds.append(one_round(kind, args.nodes))
            print(
                f"round {len(rounds)}: {json.dumps(rounds[-1])} ({time.monotonic() - start:.0f} s)"
            )
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        print(f"\n{kind}, {args.nodes} nodes, median of {args.repeat} rounds")
        print(f"all cold (no remote)           {med['all cold'] * 1e3:9.1f} ms")
        print(f"together: nodes that compiled  {med['compiled']:9.0f}")
        print(f"together: the one compiling    {med['first'] * 1e3:9.1f} ms")
        print(
            f"together: slowest of the rest  {med['others, slowest'] * 1e3:9.1f} ms "
            f"(+{(med['others, slowest'] - med['first']) * 1e3:.1f} ms)"
        )
        print(
            f"after: a remote hit            {med['after'] * 1e3:9.1f} ms "
            f"(1/{med['all cold'] / med['after']:.0f} of all cold)"
        )
    if args.warm_jobs:
        warms = []
        for _ in range(args.repeat):
            warms.append(warm_round(kind, args.warm_jobs))
            print(f"warm round {len(warms)}: {json.dumps(warms[-1])}", flush=True)
        alone = statistics.median(w["alone"] for w in warms)
        apart = statistics.median(w["beside a neighbour"] for w in warms)
        shared = statistics.median(w["two sharing"] for w in warms)
        print(f"warm --jobs {args.warm_jobs}, one alone                 {alone:9.1f} s")
        print(f"warm --jobs {args.warm_jobs}, one beside a neighbour    {apart:9.1f} s")
        print(
            f"warm --jobs {args.warm_jobs}, two sharing a server      {shared:9.1f} s "
            f"({shared / alone:.2f} of one alone, {shared / apart:.2f} of one beside a neighbour)"
        )


if __name__ == "__main__":
    main()
