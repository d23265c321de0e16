"""Call signatures as text: how argument signatures compose into a call signature and split
back. This half of the format needs no torch, so tools that list the cache read signatures
without importing it; ``signatures.py`` owns the argument forms and re-exports these.
"""

from __future__ import annotations

from collections.abc import Iterable

SIGNATURE_FORMAT = 1
"""Bumped whenever any form in ``signatures.py`` changes, so old cache entries are never
served."""

CALL_MODE = "call"


def compose_call_signature(function_id: str, arg_signatures: Iterable[str]) -> str:
    """The call signature of ``function_id`` and one argument signature per argument."""
    return " ".join((function_id, CALL_MODE, *arg_signatures))


def call_arguments(call_signature: str) -> str:
    """The argument signatures of a call signature, as it writes them; "" when there are none."""
    return "".join(call_signature.split(" ", 2)[2:])


def has_numpy(call_signature: str) -> bool:
    """Whether any argument of the call is a numpy array."""
    return "np[" in call_signature
