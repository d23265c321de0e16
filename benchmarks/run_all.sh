#!/usr/bin/env bash
# Runs the CUDA test suite and every benchmark behind docs/benchmarks.md, writing logs to OUTDIR.
#   benchmarks/run_all.sh OUTDIR
# Expects slangpy (with SLANGPY_TORCH_BRIDGE=1 for fair dispatch ratios), torch with CUDA,
# slangspec importable, and redis-server on PATH for the cluster step (REDIS=1 with the GPU
# bundle). Where slangpy's install leaves out its test shaders, SLANGPY_TESTS_DIR names a copy of
# its wheel's slangpy/tests/slangpy_tests, or the files ported from its tests skip (-rs lists why).
set -uo pipefail
out=${1:?usage: benchmarks/run_all.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
run() { local name=$1; shift; echo "== $name: $*"; "$@" 2>&1 | grep -v WARN | tee "$out/$name.log"; }
SLANGSPEC_DEVICE=cuda run tests python3 -m pytest -q -n 16 --dist worksteal tests -p no:cacheprovider -rfEs
run dispatch python3 benchmarks/dispatch.py --device cuda --json "$out/dispatch.json"
run dispatch-side-stream python3 benchmarks/dispatch.py --device cuda --side-stream
run startup python3 benchmarks/startup.py --device cuda --repeat 3 --json "$out/startup.json"
run startup-whole python3 benchmarks/startup.py --whole --device cuda --repeat 5
run driver-launch python3 benchmarks/driver_launch.py
run cluster python3 benchmarks/cluster.py --device cuda --nodes 8 --repeat 3 --warm-jobs 8
run breakdown python3 benchmarks/dispatch_breakdown.py --device cuda
run phases python3 benchmarks/first_call_phases.py --device cuda
run warm-jobs python3 benchmarks/warm_jobs.py --device cuda --jobs 1 4 8 16
run seed-bugs python3 benchmarks/seed_bugs.py
run workloads python3 benchmarks/workloads.py --device cuda --only splat128 mlp --iters 5
run unroll-probe python3 benchmarks/unroll_probe.py --device cuda
run torture python3 benchmarks/torture.py --device cuda --processes 16 --markdown "$out/torture.md"
