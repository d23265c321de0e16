"""Where slangpy's own test shaders are, for the files that port its tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import slangpy

WHEEL_TESTS = Path(
    os.environ.get("SLANGPY_TESTS_DIR") or Path(slangpy.__file__).parent / "tests" / "slangpy_tests"
)
"""Where slangpy's test shaders are: its wheel's, or a copy where an install leaves them out."""


def wheel_shader(name: str) -> Path:
    """slangpy's test shader ``name``; the calling test file is skipped where it is missing."""
    path = WHEEL_TESTS / name
    if not path.is_file():
        pytest.skip(
            f"slangpy's test shaders are not at {WHEEL_TESTS} (set SLANGPY_TESTS_DIR)",
            allow_module_level=True,
        )
    return path
