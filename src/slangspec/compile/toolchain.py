"""The formats and versions a cache key covers besides the user's code, known without torch or
slangpy, so that tools which only read or export the cache import neither."""

from __future__ import annotations

from typing import Any

from .._version import __version__
from ..signature_text import SIGNATURE_FORMAT
from .slangpy_install import VersionMemo, Versions, slangpy_versions

CACHE_FORMAT = 1
"""Bumped whenever the entry layout or the preimage changes shape."""
PLAN_FORMAT = 7
"""Bumped whenever a specialization plan's fields or meaning change."""
CODEGEN_FORMAT = 4
"""Bumped whenever generated sources change for the same plan."""

_slangpy: Versions | None = None


def toolchain(memo: VersionMemo | None = None) -> dict[str, Any]:
    """Formats and versions of everything in the chain; slangpy's are found once per process,
    through ``memo`` when it knows them (see ``slangpy_install``)."""
    global _slangpy
    if _slangpy is None:
        _slangpy = slangpy_versions(memo)
    return {
        "cache_format": CACHE_FORMAT,
        "signature_format": SIGNATURE_FORMAT,
        "plan_format": PLAN_FORMAT,
        "codegen_format": CODEGEN_FORMAT,
        "slangspec": __version__,
        **_slangpy,
    }
