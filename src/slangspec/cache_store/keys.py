"""Keys and content names: how the cache turns what it is handed into names.

A key is xxh3-128 of a preimage's canonical JSON; the caller builds the preimage (everything
that can change a kernel) and hands it in as data. Blobs are named by the hash of their content,
with a prefix that says what they hold, so a name checks its own content.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import xxhash

BlobKind = Literal["source", "binary", "module", "shaders"]
_PREFIX: dict[BlobKind, str] = {"source": "k_", "binary": "b_", "module": "m_", "shaders": "s_"}
"""Kernel sources, CUDA binaries, compiled Slang modules (which travel only between module
caches at one path: see ``module_cache_fact``) and snapshots of slangpy's shader cache (see
``shader_cache_fact``)."""


def canonical(value: Any) -> bytes:
    """The one JSON encoding that keys and checksums are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def key_of(preimage: dict[str, Any]) -> str:
    """xxh3-128 of the canonical preimage, as 32 hex digits."""
    return xxhash.xxh3_128_hexdigest(canonical(preimage))


def blob_name(kind: BlobKind, data: str | bytes) -> str:
    """The name of a blob: its kind's prefix and the hash of its content (text is hashed as
    UTF-8). A kernel source's name is also the Slang module name it is imported by."""
    raw = data.encode() if isinstance(data, str) else data
    return _PREFIX[kind] + xxhash.xxh3_64_hexdigest(raw)


def source_name(source: str | bytes) -> str:
    """The module name of a generated kernel source."""
    return blob_name("source", source)


def blob_kind(name: str) -> BlobKind:
    """What a blob of this name holds; ValueError for a name no blob can have."""
    for kind, prefix in _PREFIX.items():
        if name.startswith(prefix) and len(name) == len(prefix) + 16:
            return kind
    raise ValueError(f"{name!r} is not a blob name")


def is_blob_name(name: object, kind: BlobKind) -> bool:
    """Whether ``name`` is the name of a blob of ``kind``."""
    if not isinstance(name, str):
        return False
    try:
        return blob_kind(name) == kind
    except ValueError:
        return False


def names(name: str, data: bytes) -> bool:
    """Whether ``data`` is the content that ``name`` was given for."""
    return blob_name(blob_kind(name), data) == name


def module_facts(
    module: str, toolchain: dict[str, Any], sources: dict[str, str], defines: dict[str, str]
) -> tuple[str, str]:
    """The names of the facts kept about one module's content: which functions it has (with
    their descriptions), and the list of those it declares."""
    digest = key_of(
        {"functions_of": module, "toolchain": toolchain, "sources": sources, "defines": defines}
    )
    return "functions:" + digest, "names:" + digest


MODULES = "modules:"
"""The prefix of the facts that list a module cache's compiled modules on the remote tier."""


def module_cache_fact(module_cache: str, toolchain: dict[str, Any]) -> str:
    """The name of the fact that lists the compiled Slang modules of the module cache Slang
    reaches at ``module_cache`` (``module_cache.slang_path``, the same on every node) under
    ``toolchain``: Slang takes a compiled module only under the path it was compiled under."""
    return MODULES + key_of({"module_cache": module_cache, "toolchain": toolchain})


MODULE_PATH = r"[0-9a-f]{40}/[0-9]{1,4}/[A-Za-z0-9_.-]{1,200}\.slang-module"
"""``location.COMPILED_MODULE`` as a path read from the server must match it: a directory per
session digest, one per session of it, the module's file."""


_SHA256 = r"[0-9a-f]{64}"


def are_compiled_modules(value: dict[str, Any]) -> bool:
    """Whether a ``modules:`` fact has its shape: module cache paths to a compiled module's
    blob name and the SHA-256 of its content (which a fact's MAC covers, where names alone would
    not resist forgery)."""
    return all(
        isinstance(path, str)
        and re.fullmatch(MODULE_PATH, path)
        and isinstance(listed, list)
        and len(listed) == 2
        and is_blob_name(listed[0], "module")
        and isinstance(listed[1], str)
        and re.fullmatch(_SHA256, listed[1])
        for path, listed in value.items()
    )


SHADERS = "shaders:"
"""The prefix of the facts that name the newest snapshot of slangpy's shader cache."""
SNAPSHOT = "snapshot"


def shader_cache_fact(toolchain: dict[str, Any]) -> str:
    """The name of the fact that names the newest snapshot of slangpy's shader cache (Vulkan
    target code and pipelines) built with ``toolchain``. slangpy keys what it keeps by the
    programs' content and pipelines by the adapter, so one snapshot serves every node and path;
    what another adapter built is a miss there."""
    return SHADERS + key_of({"shader_cache": SNAPSHOT, "toolchain": toolchain})


def is_shader_listing(value: dict[str, Any]) -> bool:
    """Whether a ``shaders:`` fact has its shape: the snapshot's blob name and the SHA-256 of
    its content."""
    listed = value.get(SNAPSHOT)
    return (
        set(value) == {SNAPSHOT}
        and isinstance(listed, list)
        and len(listed) == 2
        and is_blob_name(listed[0], "shaders")
        and isinstance(listed[1], str)
        and re.fullmatch(_SHA256, listed[1]) is not None
    )


def entry_facts(preimage: dict[str, Any]) -> tuple[str, str]:
    """``module_facts`` of the module an entry's preimage was built from."""
    return module_facts(
        preimage["module"], preimage["toolchain"], preimage["sources"], preimage["defines"]
    )


def are_versions(value: dict[str, Any]) -> bool:
    """Whether a ``slangpy:`` fact has its shape: slangpy's version and Slang's build tag."""
    return set(value) == {"slangpy", "slang"} and all(isinstance(v, str) for v in value.values())
