"""Sizes and durations as people write them, for settings and command-line options alike.

Standard library only: everything above the cache store may use it, and the cache store's own
settings (``SLANGSPEC_CACHE_SIZE``, ``SLANGSPEC_CACHE_LEASE``) parse with it too.
"""

from __future__ import annotations

import math
import re

SIZE_EXAMPLE = "a size like 1048576, 500M or 2G"
DURATION_EXAMPLE = "a duration like 90s, 15m, 12h or 7d"

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _scaled(text: str, units: dict[str, int], suffix: str, example: str) -> float:
    """A non-negative number with an optional unit letter (and ``suffix`` after it), scaled;
    ValueError saying what was expected."""
    m = re.fullmatch(rf"(\d+(?:\.\d+)?)\s*([{''.join(units)}]?){suffix}", text.strip().lower())
    value = float(m.group(1)) * units[m.group(2)] if m else math.nan
    if not math.isfinite(value):
        raise ValueError(f"{text!r}: expected {example}")
    return value


def parse_size(text: str) -> int:
    """Bytes: '1048576', '512K', '500M', '2G', '1T', also '500MiB' and '2GB' (binary units,
    any case)."""
    return int(_scaled(text, _SIZE_UNITS, "i?b?", SIZE_EXAMPLE))


def parse_duration(text: str) -> float:
    """Seconds: '90', '90s', '15m', '12h', '7d' or '2w' (any case)."""
    return _scaled(text, _DURATION_UNITS, "", DURATION_EXAMPLE)
