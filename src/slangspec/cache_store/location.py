"""Where the cache lives: ``cache_dir=``, else ``SLANGSPEC_CACHE_DIR``, else the user cache dir."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


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


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see either nothing or the whole file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
