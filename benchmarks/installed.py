"""The packages a benchmark's fresh processes import, as an install leaves them:

- bytecode: where the environment sets ``PYTHONDONTWRITEBYTECODE`` (the GPU image does) and a
  package was unpacked rather than installed, every fresh process would otherwise compile each
  of its modules from source again (about 0.1 s for slangspec's on the H200 host), inside the
  window a benchmark times;
- slangspec's prepared files (``specialize prepare``, which ``scripts/setup.sh`` runs): without
  them, a first CUDA miss into an empty cache compiles slangpy's Slang library itself.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import subprocess
import sys
from pathlib import Path


def package_directory(name: str) -> Path | None:
    """Where the package ``name`` is, without importing it; None when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def compile_packages(*directories: Path | None) -> None:
    """Write bytecode for every module under each directory given (None ones skipped)."""
    for directory in directories:
        if directory is not None:
            compileall.compile_dir(directory, quiet=1, workers=0)


def prepare(src: Path) -> bool:
    """Run ``specialize prepare`` of the slangspec tree at ``src`` (a ``src`` directory), into
    its package as an install does; False for a tree that has no such command."""
    if not (src / "slangspec" / "compile" / "prepared.py").is_file():
        return False
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("SLANGSPEC_PREPARED_DIR", None)
    subprocess.run([sys.executable, "-m", "slangspec", "prepare"], check=True, env=env)
    return True
