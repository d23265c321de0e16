"""Keyed signatures on what one machine's cache hands another.

Plans and kernel sources from elsewhere are checked by regenerating them here; compiled binaries
cannot be, so a binary from elsewhere is taken only with an HMAC-SHA256 made with a secret that
both machines hold (``SLANGSPEC_SECRET``). Blob names use a fast hash that is not meant to resist
forgery, so a signature covers each binary's SHA-256, never only its name.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from typing import Any

from .keys import canonical

SECRET_ENV = "SLANGSPEC_SECRET"
MIN_SECRET_BYTES = 16


def secret() -> bytes | None:
    """``SLANGSPEC_SECRET`` as bytes, None when unset; ValueError naming the variable when it is
    too short to be a key."""
    text = os.environ.get(SECRET_ENV)
    if not text:
        return None
    key = text.encode()
    if len(key) < MIN_SECRET_BYTES:
        raise ValueError(
            f"{SECRET_ENV} is {len(key)} bytes long: expected at least {MIN_SECRET_BYTES} "
            "(a random string, like the output of `openssl rand -hex 32`)"
        )
    return key


def sign(key: bytes, what: Any, blobs: Iterable[bytes]) -> str:
    """HMAC-SHA256 over the canonical JSON of ``what`` and the SHA-256 of each blob, in order."""
    mac = hmac.new(key, canonical(what), hashlib.sha256)
    for blob in blobs:
        mac.update(hashlib.sha256(blob).digest())
    return mac.hexdigest()


def signed(key: bytes, what: Any, blobs: Iterable[bytes], signature: Any) -> bool:
    """Whether ``signature`` is ``sign(key, what, blobs)``, compared in constant time."""
    return isinstance(signature, str) and hmac.compare_digest(sign(key, what, blobs), signature)
