"""Administration of the shared remote tier, for tools: list, evict and verify what the server
holds, and push or pull a whole local cache. Each entry is checked exactly as a lookup checks
it; the hot path never comes here."""

from __future__ import annotations

import time
from typing import Any

from . import report, travel
from .disk import DiskTier
from .entry import blobs_of, intact
from .keys import MODULES, SHADERS, SNAPSHOT, are_compiled_modules, is_shader_listing, key_of
from .policy import EntryFilter, Regenerate, Replan, proven, rows, verify_entries
from .remote import RemoteTier


def _matches(where: EntryFilter | None, key: str, entry: dict[str, Any] | None, now: float) -> bool:
    """Whether a remote entry (None: one that does not decode) passes ``where``: the server
    keeps no times, so only module, function, key and device filters can tell."""
    if where is None:
        return True
    if entry is None:
        return where.matches(key, None, now)
    row = {"preimage": entry["preimage"], "meta": {"created": now, "last_used": now}}
    return where.matches(key, row, now)


def entries(remote: RemoteTier, where: EntryFilter | None = None) -> list[dict[str, Any]]:
    """One dict per remote entry ``where`` matches (module, function, key, device kind), as
    stored there; one that does not decode is listed as damaged."""
    now = time.time()
    out: list[dict[str, Any]] = []
    for key, entry in remote.listing():
        if not _matches(where, key, entry, now):
            continue
        if entry is None:
            out.append({"key": key, "damaged": True})
            continue
        out.append(
            {
                **report.described(key, entry["preimage"]),
                "kernels": sorted(entry["kernels"]),
                "binaries": sorted(entry["binaries"]),
            }
        )
    return out


def evict(remote: RemoteTier, where: EntryFilter) -> list[str]:
    """Remove the remote entries ``where`` matches, then the blobs no entry names and no fact
    lists (a module cache's compiled modules, the newest shader-cache snapshot)."""
    _writable(remote)
    gone = [e["key"] for e in entries(remote, where)]
    for key in gone:
        remote.delete(key)
    referenced: set[str] = set()
    for _, entry in remote.listing():
        if entry is not None:
            referenced |= blobs_of(entry)
    for name in remote.fact_names(MODULES):
        value = remote.fact(name)
        if are_compiled_modules(value):
            referenced |= {blob for blob, _ in value.values()}
    for name in remote.fact_names(SHADERS):
        value = remote.fact(name)
        if is_shader_listing(value):
            referenced.add(value[SNAPSHOT][0])
    remote.drop_unreferenced_blobs(referenced)
    return gone


def verify(
    remote: RemoteTier,
    repair: bool = False,
    regenerate: Regenerate | None = None,
    replan: Replan | None = None,
) -> dict[str, Any]:
    """Check every remote entry and fact (``policy.verify_entries``: the travelling form's
    check, with the MAC where a secret is set, then the key, the plan and the facts);
    ``repair`` removes what fails from the server."""
    return verify_entries(remote, repair, regenerate, replan)


def push(local: DiskTier, remote: RemoteTier) -> dict[str, int]:
    """Publish every whole entry of the ``local`` tier, and every fact it notes, to
    ``remote``; counts of what was pushed and of what was not whole."""
    _writable(remote)
    pushed = skipped = 0
    for key, row in rows(local):
        blobs = None if row is None else local.read_blobs(blobs_of(row))
        if blobs is None:
            skipped += 1
            continue
        remote.put(key, row, blobs)  # type: ignore[arg-type]
        pushed += 1
    for name in local.fact_names(""):
        remote.note_fact(name, local.fact(name))
    return {"entries": pushed, "skipped": skipped}


def pull(
    local: DiskTier,
    remote: RemoteTier,
    where: EntryFilter | None = None,
    regenerate: Regenerate | None = None,
    replan: Replan | None = None,
) -> dict[str, int]:
    """Fetch the entries of ``remote`` that ``where`` matches (module, function and device
    kind) into the ``local`` tier, each checked as a lookup would (from a server without a
    secret, cut to what ``policy.proven`` proves with ``regenerate`` and ``replan``), and, from
    a server with a secret, every fact it notes; counts of entries pulled, already here, and
    refused."""
    counts = {"pulled": 0, "present": 0, "refused": 0}
    now = time.time()
    for key in remote.entry_keys():
        if intact(local.row(key)):
            counts["present"] += 1
            continue
        got = remote.get(key)
        if got is not None and got.usable and not remote.proven:
            got = proven(got, remote, regenerate, replan)
        blobs = got.blobs() if got is not None and got.usable else None
        if blobs is None or key_of(got.row["preimage"]) != key:  # type: ignore[union-attr]
            counts["refused"] += 1
            continue
        if not _matches(where, key, got.row, now):  # type: ignore[union-attr]
            continue
        local.put(key, travel.installed(got.row), blobs)  # type: ignore[union-attr]
        counts["pulled"] += 1
    # What a server without a secret says is not kept (see Cache.fact).
    for name in remote.fact_names("") if remote.proven else ():
        if not name.startswith(MODULES):  # they list blobs of the server's, not of a cache
            local.note_fact(name, remote.fact(name))
    return counts


def _writable(remote: RemoteTier) -> None:
    if not remote.writable:
        raise ValueError(
            f"remote tier {remote.settings.shown} is read-only for this process "
            "(see SLANGSPEC_REMOTE_MODE)"
        )
