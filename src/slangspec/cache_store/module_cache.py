"""slangpy's module cache as a build uses it: sealed (``module_seals``), and shared through the
remote tier. Slang takes a compiled module only in the module cache it was compiled in, so the
remote tier lists each cache root path's compiled modules under a fact of their own
(``keys.module_cache_fact``): a node whose cache root is that path fetches what its module cache
lacks before Slang reads it, instead of compiling slangpy's Slang library again, and publishes
what Slang compiled for it. A node at another path finds nothing and compiles as before.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .location import write_atomic
from .module_seals import ModuleSeals
from .remote import RemoteTier


class ModuleCacheGuard:
    """The module cache at ``seals.root``, with the remote tier ``remote`` (None: local only)
    listing it under the fact ``fact``."""

    def __init__(self, seals: ModuleSeals, remote: RemoteTier | None, fact: str) -> None:
        self.seals = seals
        self.remote = remote
        self.fact = fact

    @property
    def root(self) -> Path:
        return self.seals.root

    def check(self) -> None:
        """Before Slang reads the module cache: remove what is damaged, then fetch what the
        remote tier has that it lacks."""
        self.seals.remove_damaged()
        if self.remote is None:
            return
        fetched = self.remote.compiled_modules(self.fact, lambda p: not (self.root / p).exists())
        for path, data in fetched.items():
            with contextlib.suppress(OSError):  # compiled here instead
                write_atomic(self.root / path, data)
        if fetched:
            self.seals.seal()

    def seal(self) -> None:
        """After loads: seal what Slang wrote, and publish it."""
        sealed = self.seals.seal()
        if self.remote is None or not self.remote.writable or not sealed:
            return
        modules = {}
        for path in sealed:
            with contextlib.suppress(OSError):
                modules[path.relative_to(self.root).as_posix()] = path.read_bytes()
        self.remote.share_compiled_modules(self.fact, modules)
