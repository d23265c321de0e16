"""Kernels a Python package ships in its own files: a read-only tier, consulted after the local
cache and before any compile or server.

A shipped directory (written by ``specialize cache export --for-package``) holds ``index.json``
(entries in the travelling form by key, and the facts a fresh process would otherwise ask Slang
or slangpy for) and ``blobs/``, the CUDA binaries those entries name.

A package's kernels are trusted as its Python code is, which the process already runs: whoever
can change one can change the other. So a directory is used only where that holds: it and
everything in it belong to this user or to root, no one else can write them, and none of it is
a link. Everything else is checked as a bundle import checks it: the index, whole, has the shape
an export writes (else nothing in it is used, with a warning naming the field); an entry is
served only when its parts have their shape, its plan is one for its call and generates exactly
the kernels it names (which are served as generated here, never read from the package), and
each binary matches its name.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..formats import SHIPPED_FORMAT, SHIPPED_VERSION
from . import travel
from .entry import blobs_of
from .keys import names
from .location import CacheWarning
from .policy import Regenerate, Replan, regenerated, verify_entries
from .tier import Found, Unavailable, Unusable

INDEX = "index.json"
BLOBS = "blobs"


def shipped_problem(directory: Path) -> str | None:
    """Why kernels shipped in ``directory`` must not run here, or None."""
    trusted = {os.getuid(), 0}
    try:
        top = directory.lstat()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(top.st_mode):
        return "it is not a directory"
    paths = [directory]
    for parent, dirs, files in os.walk(directory):
        paths += [Path(parent, n) for n in (*dirs, *files)]
    for path in paths:
        info = path.lstat()
        where = "it" if path == directory else path.relative_to(directory).as_posix()
        if stat.S_ISLNK(info.st_mode):
            return f"{where} is a link"
        if info.st_uid not in trusted:
            return f"{where} belongs to user {info.st_uid}, neither this user nor root"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"others can write to {where} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _expect(ok: bool, field: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{field}: expected {what}")


def read_index(directory: Path) -> dict[str, Any]:
    """The index of a shipped directory, checked whole; ValueError saying why it is not used."""
    problem = shipped_problem(directory)
    if problem is not None:
        raise ValueError(problem)
    try:
        index = json.loads((directory / INDEX).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{INDEX} cannot be read ({exc})") from None
    _expect(isinstance(index, dict), INDEX, "an object")
    _expect(index.get("format") == SHIPPED_FORMAT, "format", repr(SHIPPED_FORMAT))
    _expect(index.get("version") == SHIPPED_VERSION, "version", str(SHIPPED_VERSION))
    entries, facts = index.get("entries"), index.get("facts")
    _expect(isinstance(entries, dict), "entries", "an object")
    _expect(isinstance(facts, dict), "facts", "an object")
    for name, value in facts.items():
        _expect(isinstance(value, dict), f"facts.{name}", "an object")
    for key, entry in entries.items():
        try:
            travel.parts(entry)
        except travel.Refused as exc:
            at = f"entries.{key}" + (f".{exc.part}" if exc.part else "")
            raise ValueError(f"{at}: {exc.why}") from None
    return index


class ShippedTier:
    """The kernels shipped in ``directory``; entries are served once ``regenerate`` proves
    their plans (without it, none is)."""

    writable = False
    shared = False
    proven = True

    def __init__(self, directory: Path, regenerate: Regenerate | None) -> None:
        self.directory = directory
        self._regenerate = regenerate
        self._index: dict[str, Any] | None = None
        self._checked: dict[str, Found | Unusable] = {}

    def __repr__(self) -> str:
        return f"<slangspec shipped kernels {self.directory}>"

    def _read(self) -> dict[str, Any]:
        if self._index is None:
            try:
                self._index = read_index(self.directory)
            except ValueError as exc:
                warnings.warn(
                    f"slangspec kernels shipped in {self.directory} are not used: {exc}",
                    CacheWarning,
                    stacklevel=4,
                )
                self._index = {"entries": {}, "facts": {}}
        return self._index

    def get(self, key: str) -> Found | Unusable | None:
        stored = self._read()["entries"].get(key)
        if stored is None:
            return None
        got = self._checked.get(key)
        if got is None:
            got = self._checked[key] = self._check(stored)
        return got

    def _check(self, stored: dict[str, Any]) -> Found | Unusable:
        entry = travel.parts(stored)
        if self._regenerate is None:
            return Unusable("its plan cannot be checked by this process")
        try:
            sources, changed = regenerated(entry, self._regenerate)
        except ValueError as exc:
            return Unusable(f"its plan is not one for its call ({exc})")
        if changed:
            return Unusable(f"kernel {changed[0]} is not the source its plan generates")
        by_name = {entry["kernels"][label]: text.encode() for label, text in sources.items()}
        return Found(entry, lambda: self._blobs(entry, by_name))

    def _blobs(
        self, entry: dict[str, Any], sources: Mapping[str, bytes]
    ) -> dict[str, bytes] | None:
        found = dict(sources)
        for name in blobs_of(entry) - found.keys():
            try:
                data = (self.directory / BLOBS / name).read_bytes()
            except OSError:
                data = None
            if data is None or not names(name, data):
                warnings.warn(
                    f"slangspec kernels shipped in {self.directory}: binary {name} is "
                    f"{'missing' if data is None else 'damaged'}; building here",
                    CacheWarning,
                    stacklevel=5,
                )
                return None
            found[name] = data
        return found

    def put(self, key: str, row: dict[str, Any], blobs: Mapping[str, bytes]) -> None:
        return None

    def delete(self, key: str) -> None:
        return None

    def entry_keys(self) -> list[str]:
        return sorted(self._read()["entries"])

    def fact(self, name: str) -> dict[str, Any]:
        return self._read()["facts"].get(name, {})

    def fact_names(self, prefix: str) -> list[str]:
        return sorted(n for n in self._read()["facts"] if n.startswith(prefix))

    def delete_fact(self, name: str) -> None:
        return None

    def note_fact(self, name: str, value: dict[str, Any]) -> None:
        return None

    def lease(
        self, name: str, done: Callable[[], bool], seconds: float
    ) -> contextlib.AbstractContextManager[None]:
        raise Unavailable("shipped kernels are read-only")


def verify(directory: Path, regenerate: Regenerate, replan: Replan | None) -> dict[str, Any]:
    """Check what ``directory`` ships as a process serving it would, and more: the directory
    and its index whole, then every entry (its shape, its key against its preimage, its plan
    against its kernels and against type resolution, its binaries against their names) and
    every fact. For a package's author, before a release."""
    try:
        read_index(directory)
    except ValueError as exc:
        return {"checked": 0, "problems": [{"key": "", "problem": f"not used: {exc}"}]}
    report = verify_entries(ShippedTier(directory, regenerate), False, regenerate, replan)
    return {"checked": report["checked"], "problems": report["problems"]}
