"""What one entry is: a row of plain JSON data sealed with a checksum, and the checks a row must
pass before any tier may serve it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import xxhash

from ..define import frozen
from .keys import canonical

FORWARD = "forward"
"""The label of a forward kernel; a backward kernel's label is its grad mask."""


def kernel_lease(key: str, label: str) -> str:
    """The name a kernel's compile lease goes by: the specialization's key for its forward
    kernel (that lease also covers building the entry), ``key:mask`` for a backward one."""
    return key if label == FORWARD else f"{key}:{label}"


def _checksum(row: dict[str, Any]) -> str:
    body = {k: v for k, v in row.items() if k != "checksum"}
    return xxhash.xxh3_64_hexdigest(canonical(body))


def seal(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its checksum set."""
    row = dict(row)
    row["checksum"] = _checksum(row)
    return row


def intact(row: Any) -> bool:
    """The value is a row whose checksum matches its content."""
    return isinstance(row, dict) and row.get("checksum") == _checksum(row)


Change = Callable[[dict[str, Any]], None]
"""An amendment of a stored row, in place."""


def kernel_added(
    label: str, name: str, seconds: float, binary: dict[str, Any] | None = None
) -> Change:
    """The kernel source ``name`` added under ``label``, with the time it took to build and
    its CUDA binary if it has one (in the same change: a process that finds the source stops
    waiting for the build)."""

    def change(row: dict[str, Any]) -> None:
        row["kernels"][label] = name
        row["meta"]["compile_s"] = row["meta"].get("compile_s", 0.0) + seconds
        if binary is not None:
            binary_added(label, binary)(row)

    return change


def binary_added(label: str, binary: dict[str, Any]) -> Change:
    """A kernel's CUDA binary (file name, parameter layout, group size) added under ``label``."""
    return lambda row: row.setdefault("binaries", {}).__setitem__(label, binary)


def binary_dropped(label: str) -> Change:
    return lambda row: row.get("binaries", {}).pop(label, None)


def blobs_of(row: dict[str, Any]) -> set[str]:
    """Names of every blob the row refers to: kernel sources and binaries."""
    names = set(row["kernels"].values())
    names.update(b["file"] for b in row.get("binaries", {}).values())
    return names


@frozen
class Entry:
    """One specialization as stored: its key, and its row (preimage, the plan as JSON, kernel
    module names by label, CUDA binaries by label, and, in the local tier, metadata)."""

    key: str
    row: dict[str, Any]
    far: bool = False
    """Whether it was read from a farther tier (whole: its blobs were checked there) and is not
    in the local one yet."""

    @property
    def plan_json(self) -> str:
        return self.row["plan"]

    @property
    def kernels(self) -> dict[str, str]:
        return self.row["kernels"]

    @property
    def binaries(self) -> dict[str, dict[str, Any]]:
        """Per label, a CUDA binary of that kernel: file name, parameter layout, group size."""
        return self.row.get("binaries", {})
