"""The only way rows leave SQLite: as JSON, from the database or from a value file inside the
index directory.

diskcache's ``JSONDisk`` falls back to pickle for a row whose key is not raw or whose value mode
says pickle, and deletes any file a row names, inside its directory or not. A row crafted that
way would run code in every process that opens the cache, or delete files elsewhere; here it is
refused as garbled instead.
"""

from __future__ import annotations

import os
from typing import Any

import diskcache
from diskcache.core import MODE_BINARY, MODE_RAW

UNREADABLE_KEY = "\0unreadable"
"""What a key that is not raw JSON reads as: no prefix the cache uses matches it."""


class JSONOnlyDisk(diskcache.JSONDisk):
    """``JSONDisk`` that never unpickles and never touches a file outside its directory."""

    def _inside(self, filename: Any) -> bool:
        if not isinstance(filename, str) or not filename:
            return False
        root = os.path.realpath(self._directory)
        return os.path.realpath(os.path.join(root, filename)).startswith(root + os.sep)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            return UNREADABLE_KEY
        try:
            return super().get(key, raw)
        except (ValueError, TypeError, OSError, UnicodeDecodeError):
            return UNREADABLE_KEY

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        if mode == MODE_RAW or (mode == MODE_BINARY and self._inside(filename)):
            return super().fetch(mode, filename, value, read)
        raise ValueError(f"a stored value of mode {mode} is not JSON this cache wrote")

    def remove(self, file_path: str) -> None:
        if self._inside(file_path):
            super().remove(file_path)
