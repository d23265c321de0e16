"""Why would a call miss? The key of a specialization, and how the nearest stored entries differ."""

from __future__ import annotations

from typing import Any

from ..cache_store import key_of
from ..signatures.reach import REACHED
from ..signatures.text import (
    TYPE_KEY,
    DictForm,
    TensorForm,
    argument_label,
    format_arg,
    parse_call_signature,
)


def _describe_argument(what: str, old: Any, new: Any) -> list[str]:
    """How argument (or field) ``what`` differs, stored ``old`` against asked ``new``."""
    if isinstance(old, TensorForm) and isinstance(new, TensorForm):
        out = []
        if old.grad != new.grad:
            out.append(f"grad bit of {what}: G{int(old.grad)} stored, G{int(new.grad)} asked")
        if old.rank != new.rank:
            out.append(f"rank of {what}: {old.rank} stored, {new.rank} asked")
        if old.dtype != new.dtype:
            out.append(f"dtype of {what}: {old.dtype} stored, {new.dtype} asked")
        if old.extents != new.extents and old.rank == new.rank:
            out.append(f"extent classes of {what}: {old.extents} stored, {new.extents} asked")
        if old.numpy != new.numpy:
            out.append(f"{what} is a numpy array in one and a tensor in the other")
        return out
    if isinstance(old, DictForm) and isinstance(new, DictForm):
        a, b = dict(old.fields), dict(new.fields)
        named = [getattr(d.get(TYPE_KEY), "name", "(none)") for d in (a, b)]
        if named[0] != named[1]:
            return [f"struct {what} names: {named[0]} stored, {named[1]} asked"]
        if set(a) != set(b):
            return [f"fields of {what}: {', '.join(a)} stored, {', '.join(b)} asked"]
        out = []
        for name, form in a.items():
            if form != b[name]:
                out.extend(_describe_argument(f"{what} field {name}", form, b[name]))
        return out
    return [f"kind of {what}: {format_arg(old)} stored, {format_arg(new)} asked"]


def _signature_differences(old: str, new: str) -> list[str]:
    a, b = parse_call_signature(old), parse_call_signature(new)
    if len(a.args) != len(b.args):
        return [f"argument count: {len(a.args)} stored, {len(b.args)} asked"]
    out = []
    for i, (x, y) in enumerate(zip(a.args, b.args, strict=True)):
        if x != y:
            out.extend(_describe_argument(argument_label(i), x, y))
    return out


def differences(stored: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """Each preimage component that differs, in words. A module's own file is keyed by what
    the function reaches in it (``signatures.reach``): ``asked`` must hold the sources as they key
    ``stored``'s function now for a file's difference to mean that it changed."""
    out = []
    for name in sorted(set(stored["toolchain"]) | set(asked["toolchain"])):
        old, new = stored["toolchain"].get(name), asked["toolchain"].get(name)
        if old != new:
            out.append(f"{name} version: {old} stored, {new} here")
    if stored["device"] != asked["device"]:
        for name in sorted(set(stored["device"]) | set(asked["device"])):
            old, new = stored["device"].get(name), asked["device"].get(name)
            if old != new:
                out.append(f"device {name}: {old} stored, {new} here")
    if stored["module"] != asked["module"]:
        out.append(f"module: {stored['module']} stored, {asked['module']} asked")
    for file in sorted(set(stored["sources"]) | set(asked["sources"])):
        if file not in asked["sources"]:
            out.append(f"imported file {file} is no longer imported")
        elif file not in stored["sources"]:
            out.append(f"imported file {file} is new")
        elif stored["sources"][file] != asked["sources"][file]:
            hashes = (stored["sources"][file], asked["sources"][file])
            reached = all(h.startswith(REACHED) for h in hashes)
            where = f" in what {stored['function']} reaches" if reached else ""
            out.append(f"Slang file {file} changed{where}")
    if stored["defines"] != asked["defines"]:
        out.append(f"defines: {stored['defines']} stored, {asked['defines']} asked")
    if stored["function"] != asked["function"]:
        out.append(f"function: {stored['function']} stored, {asked['function']} asked")
    if stored["signature"] != asked["signature"]:
        out.extend(_signature_differences(stored["signature"], asked["signature"]))
    return out


def explain(fn: Any, signature: str, nearest: int = 3) -> dict[str, Any]:
    """The key ``fn`` (a slangspec Function) would use for ``signature``, whether it is stored,
    and on a miss the stored entries of the module that differ least, those of ``fn`` first,
    with how (each against what its own function would key now)."""
    m = fn.module
    asked = m.preimage(fn.name, signature)
    key = key_of(asked)
    entry = m.cache.lookup(key, asked)
    result: dict[str, Any] = {
        "key": key,
        "signature": signature,
        "hit": entry is not None,
        "kernels": sorted(entry.kernels) if entry else [],
        "nearest": [],
    }
    if entry is not None:
        return result
    candidates = []
    for other, row in m.cache.rows():
        if row is None or row["preimage"]["module"] != m.name:
            continue
        stored = row["preimage"]
        diff = differences(stored, {**asked, "sources": m.function_sources(stored["function"])})
        same_function = stored["function"] == fn.name
        candidates.append((not same_function, len(diff), other, stored["signature"], diff))
    candidates.sort()
    result["nearest"] = [
        {"key": k, "signature": s, "differences": d} for _, _, k, s, d in candidates[:nearest]
    ]
    return result
