#!/usr/bin/env bash
# Sets up (idempotent) and runs the lint and the whole test suite: one pytest worker a core, as
# memory allows, each taking whole test files. Arguments go to pytest (`-n 0` runs in one process).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
.venv/bin/ruff check .
cores=$(nproc)
# A worker peaks at about 4 GB (a test file's devices and Slang sessions, one at a time).
by_memory=$(awk '/^MemTotal:/ { print int($2 / (5 * 1024 * 1024)) }' /proc/meminfo)
workers=$((cores < by_memory ? cores : by_memory))
workers=$((workers > 0 ? workers : 1))
# The cache tests' worker processes fork from one that has imported torch (tests/zygote.py).
export FORKED_TEST_WORKERS=1
.venv/bin/python -m pytest -n "$workers" --dist loadfile --durations=15 "$@"
