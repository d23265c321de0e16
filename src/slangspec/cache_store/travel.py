"""An entry that travels between machines, in a bundle file or through the remote tier: its
parts, how it is sealed with a secret, and the check it must pass before anything it names is
used.

A travelling entry is a JSON object of the shared parts of an entry (preimage, plan, kernel
source names by label, CUDA binaries by label) and, when the sender holds a secret, a ``mac``:
HMAC-SHA256 over the canonical JSON of those parts and the SHA-256 of each blob they name, in
name order. Blob names use a fast hash that is not meant to resist forgery, so the MAC covers
each blob's SHA-256, never only its name. Use counts and times stay with each machine.

The check is the same wherever an entry comes from: the parts have their shape, every blob name
is one a blob can have and every blob hashes to its name, then (with a secret) the MAC holds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import Error
from .entry import blobs_of, intact
from .keys import canonical, is_blob_name, names

PARTS = ("preimage", "plan", "kernels", "binaries")
MAC = "mac"


class Refused(Error, ValueError):
    """A travelling entry that must not be used: which part (empty for the whole) and why."""

    def __init__(self, part: str, why: str) -> None:
        super().__init__(f"{part}: {why}" if part else why)
        self.part = part
        self.why = why


def loaded(text: str | bytes) -> Any:
    """JSON that came from elsewhere (an entry, a fact, a plan), decoded: a ValueError for
    any text that is not JSON, nested deeper than the decoder goes (a RecursionError) too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def shared(row: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a stored row that travel (a row without binaries travels with none)."""
    return {"binaries": {}, **{part: row[part] for part in PARTS if part in row}}


def installed(entry: Mapping[str, Any], local: Any = None) -> dict[str, Any]:
    """The local row of an entry that travelled here: its shared parts, merged with the kernels
    and binaries of ``local`` when that is an intact row for the same preimage (whose counts and
    times it keeps), else new and marked as pulled."""
    row = shared(entry)
    if intact(local) and local["preimage"] == row["preimage"]:
        row["kernels"] = {**row["kernels"], **local["kernels"]}
        row["binaries"] = {**row["binaries"], **local.get("binaries", {})}
        return {**row, "meta": local["meta"]}
    now = time.time()
    return {**row, "meta": {"created": now, "last_used": now, "hits": 0, "pulled": True}}


def parts(stored: Any) -> dict[str, Any]:
    """The shared parts of a travelling entry as read from elsewhere; ``Refused`` naming the
    first part that does not have its shape."""
    if not isinstance(stored, dict):
        raise Refused("", "expected an object")
    entry = shared({k: v for k, v in stored.items() if k in PARTS})
    pre = entry.get("preimage")
    if not isinstance(pre, dict):
        raise Refused("preimage", "expected an object")
    for name in ("toolchain", "device", "sources", "defines"):
        if not isinstance(pre.get(name), dict):
            raise Refused(f"preimage.{name}", "expected an object")
    for name in ("module", "function", "signature"):
        if not isinstance(pre.get(name), str):
            raise Refused(f"preimage.{name}", "expected a string")
    if not isinstance(pre["device"].get("kind"), str):
        raise Refused("preimage.device.kind", "expected a string")
    if not isinstance(entry.get("plan"), str):
        raise Refused("plan", "expected a plan as a JSON string")
    kernels = entry.get("kernels")
    if not (
        isinstance(kernels, dict)
        and "forward" in kernels
        and all(isinstance(k, str) and isinstance(v, str) for k, v in kernels.items())
    ):
        raise Refused("kernels", 'expected an object of kernel names with "forward"')
    if not isinstance(entry["binaries"], dict):
        raise Refused("binaries", "expected an object")
    for label, b in entry["binaries"].items():
        if not (
            isinstance(b, dict)
            and isinstance(b.get("file"), str)
            and isinstance(b.get("group"), int)
            and "layout" in b
        ):
            raise Refused(
                f"binaries.{label}", "expected an object with a file, a group size and a layout"
            )
    for label, name in entry["kernels"].items():
        if not is_blob_name(name, "source"):
            raise Refused(f"kernels.{label}", f"{name!r} is not a kernel source name")
    for label, b in entry["binaries"].items():
        if not is_blob_name(b["file"], "binary"):
            raise Refused(f"binaries.{label}.file", f"{b['file']!r} is not a binary name")
    return entry


def mac(secret: bytes, what: Any, blobs: Iterable[bytes] = ()) -> str:
    """HMAC-SHA256 over the canonical JSON of ``what`` and the SHA-256 of each blob, in order."""
    code = hmac.new(secret, canonical(what), hashlib.sha256)
    for blob in blobs:
        code.update(hashlib.sha256(blob).digest())
    return code.hexdigest()


def holds(secret: bytes, what: Any, blobs: Iterable[bytes], given: Any) -> bool:
    """Whether ``given`` is the MAC of ``what`` and ``blobs``, compared in constant time."""
    return isinstance(given, str) and hmac.compare_digest(mac(secret, what, blobs), given)


def _entry_mac(secret: bytes, entry: dict[str, Any], blobs: Mapping[str, bytes]) -> str:
    return mac(secret, entry, (blobs[name] for name in sorted(blobs_of(entry))))


def sealed(
    entry: Mapping[str, Any], blobs: Mapping[str, bytes], secret: bytes | None
) -> dict[str, Any]:
    """The travelling form of an entry: its shared parts, with a MAC when there is a secret."""
    out = shared(entry)
    if secret is not None:
        out[MAC] = _entry_mac(secret, out, blobs)
    return out


def check(stored: Any, blobs: Mapping[str, bytes | None], secret: bytes | None) -> dict[str, Any]:
    """The shared parts of a travelling entry when its blobs (by name; None for one that could
    not be had) are whole and match their names, then, with a secret, its MAC holds;
    ``Refused`` saying which check failed first."""
    entry = parts(stored)
    wanted = sorted(blobs_of(entry))
    missing = [n for n in wanted if blobs.get(n) is None]
    if missing:
        raise Refused("", f"blob {missing[0]} is missing")
    damaged = [n for n in wanted if not names(n, blobs[n])]
    if damaged:
        raise Refused("", f"blob {damaged[0]} does not match its name")
    whole = [blobs[n] for n in wanted]
    if secret is not None and not holds(secret, entry, whole, stored.get(MAC)):
        raise Refused("", "its MAC does not hold under this machine's secret")
    return entry
