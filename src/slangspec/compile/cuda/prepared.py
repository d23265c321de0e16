"""What every CUDA build of a toolchain reads and no cache need make again: slangpy's Slang
library as IR (2 s or more for Slang to make) and the CUDA prelude Slang writes, made once when
the package is installed (``specialize prepare``) and read by a first miss into an empty cache.

A directory per toolchain holds the two files and ``prepared.json``, which names the toolchain
and each file's xxh3-128 digest. A file is read only when the directory's toolchain is the one
asked for and its digest matches: anything else (half a copy, another release, damage) reads as
not prepared, and the build makes what it needs as it would without.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xxhash

from ...cache_store import canonical, write_atomic
from ...define import frozen
from ...signatures.module_text import ModuleText
from .source import LIBRARY_FILE, KernelSource, cuda_source, slangpy_library, split_prelude

PRELUDE_FILE = "slang-cuda-prelude.h"
MANIFEST = "prepared.json"
FILES = (LIBRARY_FILE, PRELUDE_FILE)
DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "_prepared"
"""Inside the installed package, where an install writes it: ``SLANGSPEC_PREPARED_DIR`` moves it."""

_MODULE = "slangspec_prepare"
_KERNEL = f"""import {_MODULE};
[shader("compute")]
[numthreads(1, 1, 1)]
void slangspec_main(uint3 tid: SV_DispatchThreadID, RWStructuredBuffer<float> out)
{{
    out[tid.x] = twice(out[tid.x]);
}}
"""


@frozen
class Prepared:
    """The prepared files of one toolchain, each checked against its digest when read."""

    directory: Path
    digests: Mapping[str, str]

    def read(self, name: str) -> bytes | None:
        """The file ``name`` (``LIBRARY_FILE`` or ``PRELUDE_FILE``); None when it is missing
        or not what was prepared."""
        try:
            data = (self.directory / name).read_bytes()
        except OSError:
            return None
        return data if xxhash.xxh3_128_hexdigest(data) == self.digests.get(name) else None


def directory_of(root: Path, toolchain: Mapping[str, Any]) -> Path:
    """The directory under ``root`` of ``toolchain``'s prepared files."""
    return root / hashlib.sha1(canonical(dict(toolchain))).hexdigest()


def prepared(root: Path, toolchain: Mapping[str, Any]) -> Prepared | None:
    """``toolchain``'s prepared files under ``root``; None when none were prepared for it."""
    directory = directory_of(root, toolchain)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("toolchain") != dict(toolchain):
        return None
    digests = manifest.get("files")
    if not isinstance(digests, dict) or not all(isinstance(d, str) for d in digests.values()):
        return None
    return Prepared(directory, digests)


def prelude_text() -> str:
    """The CUDA prelude Slang writes at the head of every CUDA source of this release: cut
    from a one-line kernel's source."""
    with tempfile.TemporaryDirectory(prefix="slangspec-prepare-") as scratch:
        directory = Path(scratch)
        module = ModuleText(
            _MODULE, directory / f"{_MODULE}.slang", "float twice(float x) { return 2 * x; }\n"
        )
        kernel = KernelSource("slangspec_prepared", _KERNEL, directory / "slangspec_prepared.slang")
        return split_prelude(cuda_source(module, [kernel]).text)[0]


def prepare(root: Path, toolchain: Mapping[str, Any]) -> dict[str, int]:
    """Make ``toolchain``'s prepared files under ``root`` (the manifest written last, so that
    a reader sees all of them or none); their sizes by name. OSError when ``root`` cannot be
    written, found before the seconds of compiling."""
    directory = directory_of(root, toolchain)
    directory.mkdir(parents=True, exist_ok=True)
    tempfile.TemporaryFile(dir=directory).close()
    made = {LIBRARY_FILE: slangpy_library(), PRELUDE_FILE: prelude_text().encode()}
    (directory / MANIFEST).unlink(missing_ok=True)
    for name, data in made.items():
        write_atomic(directory / name, data, mode=0o644)
    manifest = {
        "toolchain": dict(toolchain),
        "files": {name: xxhash.xxh3_128_hexdigest(data) for name, data in made.items()},
    }
    write_atomic(directory / MANIFEST, canonical(manifest), mode=0o644)
    return {name: len(data) for name, data in made.items()}
