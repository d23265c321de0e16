"""The formats and versions a cache key covers besides the user's code (the formats defined in
``signatures.preimage``), known without torch or slangpy, so that tools which only read or
export the cache import neither."""

from __future__ import annotations

from typing import Any

from ..formats import (
    BINARY_FORMAT,
    CACHE_FORMAT,
    CODEGEN_FORMAT,
    PLAN_FORMAT,
    SIGNATURE_FORMAT,
    VERSION,
)
from .slang.slangpy_install import VersionMemo, Versions, slangpy_versions

FORMATS = {
    "cache_format": CACHE_FORMAT,
    "signature_format": SIGNATURE_FORMAT,
    "plan_format": PLAN_FORMAT,
    "codegen_format": CODEGEN_FORMAT,
    "binary_format": BINARY_FORMAT,
}
"""slangspec's formats, as a toolchain names them."""

_slangpy: Versions | None = None


def toolchain(memo: VersionMemo | None = None) -> dict[str, Any]:
    """Formats and versions of everything in the chain; slangpy's are found once per process,
    through ``memo`` when it knows them (see ``slangpy_install``)."""
    global _slangpy
    if _slangpy is None:
        _slangpy = slangpy_versions(memo)
    return {**FORMATS, "slangspec": VERSION, **_slangpy}
