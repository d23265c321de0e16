#!/usr/bin/env bash
# Idempotent setup on Debian 12 as root: a Vulkan driver when no GPU is usable, redis-server for
# the remote-tier tests, then .venv with torch (CPU build) and slangspec in editable mode with its
# dev extras.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

lavapipe_icd=/usr/share/vulkan/icd.d/lvp_icd.json
lavapipe_ok() {
  [ -f "$lavapipe_icd" ] || return 1
  # bookworm's own mesa (22.x) lacks an extension slangpy needs; backports carries 25.x.
  local v
  v=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo 0)
  dpkg --compare-versions "$v" ge 25
}

if ! have_gpu && ! lavapipe_ok; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ] && ! grep -qE '^Suites:.*bookworm-backports' "$src"; then
    sed -i -E 's/^(Suites: bookworm bookworm-updates)$/\1 bookworm-backports/' "$src"
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q -t bookworm-backports mesa-vulkan-drivers libvulkan1
fi

# The remote-tier tests start a real redis-server of their own, TLS too (openssl makes its
# certificates).
if ! command -v redis-server >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server openssl
fi

if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
py=.venv/bin/python
# uv installs and byte-compiles in parallel: a fresh environment in about a third of pip's time.
if ! "$py" -m uv --version >/dev/null 2>&1; then
  "$py" -m pip install -q uv
fi
install=("$py" -m uv pip install -q --compile-bytecode --python "$py")
if [ -n "${PIP_FIND_LINKS:-}" ]; then
  install+=(--find-links "$PIP_FIND_LINKS")
fi
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
  # The CPU build lies on this machine's disk; a bare `torch` would pull a multi-GB CUDA build.
  "${install[@]}" torch==2.13.0
fi
# The editable install again only when pyproject.toml changed since it last ran, or it is gone.
stamp=.venv/.slangspec-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
  || ! "$py" -c 'import slangspec, pytest, ruff, redis, hypothesis, mkdocs' >/dev/null 2>&1; then
  "${install[@]}" -e '.[dev]'
  echo "$want" > "$stamp"
fi
# slangpy's Slang library as IR and Slang's CUDA prelude, made once here instead of in a first
# CUDA miss of every cache (a no-op when they are already whole).
.venv/bin/specialize prepare
