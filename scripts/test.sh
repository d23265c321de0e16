#!/usr/bin/env bash
# Sets up (idempotent) and runs the lint and the whole test suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
