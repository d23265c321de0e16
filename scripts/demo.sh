#!/usr/bin/env bash
# Sets up (idempotent) and runs the quickstart: a Slang kernel trained from torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
.venv/bin/python examples/quickstart.py "$@"
