"""Where the cache lives and how it is laid out.

The root is ``cache_dir=``, else ``SLANGSPEC_CACHE_DIR``, else the user cache directory. Under it:

- ``index/``    the entry index (diskcache over SQLite, JSON values only)
- ``kernels/``  generated kernel sources, named by the hash of their content
- ``binaries/`` CUDA kernels compiled for this GPU (cubins), named by the hash of their content
- ``modules/``  modules given as source strings, by content hash
- ``slang/``    slangpy's module cache: the compiled IR of its library and included modules
- ``shaders/``  snapshots of slangpy's shader cache (Vulkan target code and pipelines)

The size bound and the lease length, both settings, are read here too.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path

from ..errors import SlangspecWarning
from ..settings import refusal, setting

INDEX = "index"
KERNELS = "kernels"
BINARIES = "binaries"
MODULES = "modules"
SLANG = "slang"
COMPILED_MODULE = "*/*/{name}.slang-module"
"""Where slangpy's module cache (``SLANG``) keeps a module's compiled IR: two levels down (a
session configuration's hash, then a number), named after the module."""
SHADERS = "shaders"
LEGACY_SCRATCH = "scratch"
"""Where builds of earlier versions left short-lived files; ``clear`` still removes it."""
PARTS = (INDEX, KERNELS, BINARIES, MODULES, SLANG, SHADERS)
SHADER_CACHE_MAX_BYTES = 128 << 20
SHADER_CACHE_MIN_BYTES = 4 << 20
"""slangpy cannot open a shader cache much smaller than this, whatever the size bound."""


class CacheWarning(SlangspecWarning):
    """A damaged or unusable piece of the cache was set aside; the process goes on without it."""


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache root, created private to the user (mode 0700) when missing; ValueError naming
    where it came from when it cannot be a directory."""
    given = os.fspath(cache_dir) if cache_dir else None
    chosen = setting("SLANGSPEC_CACHE_DIR", given, "cache_dir")
    root = Path(chosen or _user_cache_dir()).expanduser().resolve()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        why = f"{str(root)!r} is a file, not a directory"
    except OSError as exc:
        why = f"{str(root)!r} cannot be created: {exc.strerror}"
    else:
        return root
    if chosen is None:
        raise ValueError(f"the user cache directory {why}")
    raise refusal("SLANGSPEC_CACHE_DIR", chosen, "cache_dir" if given else None, why)


def _user_cache_dir() -> str:
    import platformdirs  # only where no directory is named

    return platformdirs.user_cache_dir("slangspec")


def root_problem(root: Path) -> str | None:
    """Why processes must not run kernels from ``root``, or None: it must be a directory this
    user owns and can write, that no one else can write (kernels from it run on the GPU)."""
    try:
        info = root.stat()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if info.st_uid != os.getuid():
        return f"it belongs to user {info.st_uid}, not to this user ({os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others can write to it (mode {stat.S_IMODE(info.st_mode):o}; run chmod 700)"
    if not os.access(root, os.W_OK | os.X_OK):
        return "this user cannot write to it"
    return None


_private: list[Path] = []


def private_root() -> Path:
    """A cache root of this process alone, removed when it exits."""
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="slangspec-")))
        atexit.register(shutil.rmtree, _private[0], True)
    return _private[0]


def part(root: Path, name: str) -> Path:
    """One part of the layout, created private when missing; a file standing where the part
    belongs is removed, with a warning."""
    path = root / name
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError:
        warnings.warn(
            f"slangspec cache part {path} is not a directory; replacing it",
            CacheWarning,
            stacklevel=2,
        )
        path.unlink(missing_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    return path


def size_bound() -> int:
    """``SLANGSPEC_CACHE_SIZE`` in bytes."""
    return setting("SLANGSPEC_CACHE_SIZE")


def shader_cache_bytes() -> int:
    """slangpy's shader cache gets a quarter of the size bound, at least 4 MiB and at most
    slangpy's own default."""
    return min(SHADER_CACHE_MAX_BYTES, max(SHADER_CACHE_MIN_BYTES, size_bound() // 4))


def lease_seconds() -> float:
    """``SLANGSPEC_CACHE_LEASE`` in seconds."""
    return setting("SLANGSPEC_CACHE_LEASE")


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` so readers see either nothing or the whole file: readable by
    this user alone, or with ``mode`` exactly, whatever the umask."""
    for attempt in range(3):
        try:
            # A concurrent ``cache clear`` may have removed the directory.
            put_in_place(opened_beside(path, mode), data)
            return
        except FileNotFoundError:
            if attempt == 2:
                raise


def opened_beside(path: Path, mode: int | None = None) -> tuple[int, Path, Path]:
    """A temporary file beside ``path`` (its directory made when missing), open for writing,
    readable by this user alone or with ``mode`` exactly: its descriptor, its path and
    ``path``, for ``put_in_place``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if mode is not None:
        try:
            os.fchmod(fd, mode)
        except OSError:
            os.close(fd)
            raise
    return fd, tmp, path


def put_in_place(opened: tuple[int, Path, Path], data: bytes) -> None:
    """Write ``data`` through a file ``opened_beside`` made, close it and put it in place."""
    fd, tmp, path = opened
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` of this host no longer runs (or is a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    stat = process_stat(pid)
    return stat is not None and stat[0] == "Z"


def process_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command's name, its state first; None
    where they cannot be read (no ``/proc``, or no such process)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields or None


def present(directory: Path, pattern: str) -> list[Path]:
    """What ``directory.glob(pattern)`` finds (``pattern``'s parts hold no ``**``), where a
    ``cache clear`` in another process may remove any directory on the way: a directory gone
    meanwhile holds nothing, where pathlib's glob raises FileNotFoundError."""
    found = [directory]
    for name in pattern.split("/"):
        deeper = []
        for parent in found:
            with (
                contextlib.suppress(FileNotFoundError, NotADirectoryError),
                os.scandir(parent) as entries,
            ):
                deeper += [parent / e.name for e in entries if fnmatch.fnmatchcase(e.name, name)]
        found = deeper
    return found


def compiled_modules(root: Path, name: str) -> list[Path]:
    """slangpy's compiled IR of the module ``name`` and the seals beside it: one file per
    session configuration, two levels down in the module cache."""
    return present(root / SLANG, COMPILED_MODULE.format(name=name) + "*")


def file_bytes(paths: list[Path]) -> int:
    """Bytes of the files that still exist among ``paths``."""
    total = 0
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size
    return total


def tree_size(path: Path) -> int:
    """Bytes of every file under ``path``."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total
