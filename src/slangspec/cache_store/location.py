"""Where the cache lives and how it is laid out.

The root is ``cache_dir=``, else ``SLANGSPEC_CACHE_DIR``, else the user cache directory. Under it:

- ``index/``    the entry index (diskcache over SQLite, JSON values only)
- ``kernels/``  generated kernel sources, named by the hash of their content
- ``binaries/`` CUDA kernels compiled for this GPU (cubins), named by the hash of their content
- ``modules/``  modules given as source strings, by content hash
- ``slang/``    slangpy's module cache: the compiled IR of user and generated modules
- ``shaders/``  slangpy's shader cache: target code and pipelines
- ``scratch/``  short-lived files of builds in progress

Policy values read from the environment (size bound, lease length) live here too, as data.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import platformdirs

DEFAULT_SIZE_BYTES = 1 << 30
DEFAULT_LEASE_SECONDS = 120.0

INDEX = "index"
KERNELS = "kernels"
BINARIES = "binaries"
MODULES = "modules"
SLANG = "slang"
SHADERS = "shaders"
SCRATCH = "scratch"
PARTS = (INDEX, KERNELS, BINARIES, MODULES, SLANG, SHADERS)
"""The parts that hold data; ``scratch`` holds only what builds in progress leave there."""
SHADER_CACHE_MAX_BYTES = 128 << 20


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache root, created private to the user (mode 0700) when missing."""
    chosen = (
        cache_dir
        or os.environ.get("SLANGSPEC_CACHE_DIR")
        or platformdirs.user_cache_dir("slangspec")
    )
    root = Path(chosen).expanduser().resolve()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def part(root: Path, name: str) -> Path:
    """One part of the layout, created private when missing."""
    path = root / name
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def size_bound() -> int:
    """``SLANGSPEC_CACHE_SIZE`` in bytes, else 1 GiB."""
    text = os.environ.get("SLANGSPEC_CACHE_SIZE")
    if not text:
        return DEFAULT_SIZE_BYTES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"SLANGSPEC_CACHE_SIZE={text!r}: expected a size in bytes") from None
    if value <= 0:
        raise ValueError(f"SLANGSPEC_CACHE_SIZE={text!r}: expected a positive size in bytes")
    return value


def shader_cache_bytes() -> int:
    """slangpy's shader cache gets a quarter of the size bound, at most slangpy's own default."""
    return min(SHADER_CACHE_MAX_BYTES, size_bound() // 4)


def lease_seconds() -> float:
    """``SLANGSPEC_CACHE_LEASE``: how long a compile lock holds before others may take it."""
    text = os.environ.get("SLANGSPEC_CACHE_LEASE")
    return float(text) if text else DEFAULT_LEASE_SECONDS


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see either nothing or the whole file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def compiled_modules(root: Path, name: str) -> list[Path]:
    """slangpy's compiled IR of the module ``name``: one file per session configuration, two
    levels down in the module cache."""
    return list((root / SLANG).glob(f"*/*/{name}.slang-module"))


def file_bytes(paths: list[Path]) -> int:
    """Bytes of the files that still exist among ``paths``."""
    total = 0
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size
    return total


def tree_size(path: Path) -> int:
    """Bytes of every file under ``path``."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total
