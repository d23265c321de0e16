"""Checks on slangpy's own artifacts before slangpy opens them.

slangpy keeps its shader cache in LMDB, which maps the file into memory: a truncated data file
kills the process with SIGBUS instead of raising. Before a device opens the cache, the newest
LMDB meta page is read and the file must hold every page it names; a cache that fails is
removed (with a warning) and slangpy starts an empty one. Each directory is checked once per
process: after that a device may have it open.
"""

from __future__ import annotations

import shutil
import struct
import warnings
from pathlib import Path

from .location import CacheWarning

_MAGIC = 0xBEEFC0DE
_META = struct.Struct("<II")  # magic, version; at offset 16 of a meta page
_PAGE_SIZE_AT = 40  # the free-list database's md_pad holds the page size
_LAST_PAGE_AT = 136  # mm_last_pg, then mm_txnid
_checked: set[Path] = set()


def _lmdb_whole(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(2 * 4096)
        size = f.seek(0, 2)
    if len(head) < 4096:
        return False
    page = struct.unpack_from("<I", head, _PAGE_SIZE_AT)[0]
    if page < 512 or page & (page - 1) or size < 2 * page:
        return False
    with path.open("rb") as f:
        f.seek(page)
        second = f.read(160)
    metas = []
    for data in (head[:160], second):
        if len(data) < 152:
            continue
        magic, _ = _META.unpack_from(data, 16)
        if magic != _MAGIC:
            continue
        metas.append(struct.unpack_from("<QQ", data, _LAST_PAGE_AT))
    if not metas:
        return False
    last_page, _ = max(metas, key=lambda m: m[1])
    return size >= (last_page + 1) * page


def check_shader_cache(directory: Path) -> bool:
    """True when every LMDB data file under ``directory`` is whole (or this process checked it
    before); else clears it."""
    if directory in _checked:
        return True
    _checked.add(directory)
    for data in directory.rglob("data.mdb"):
        try:
            whole = _lmdb_whole(data)
        except OSError:
            whole = False
        if not whole:
            warnings.warn(
                f"slangpy shader cache {data.parent} is damaged; starting an empty one",
                CacheWarning,
                stacklevel=2,
            )
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(mode=0o700, exist_ok=True)
            return False
    return True
