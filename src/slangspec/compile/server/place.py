"""Where the compile server of a cache root listens: a Unix socket in a directory only this
user can open, named by the root, with the lock that keeps one server per root and its log."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

import xxhash

from ...define import frozen
from ...errors import Error

_SOCKET_PATH_BYTES = 107


class UnsafePlace(Error):
    """The server's directory is not this user's alone, or its socket cannot be made there."""


@frozen
class ServerPlace:
    socket: Path
    lock: Path
    log: Path


def runtime_directory() -> Path:
    """``$XDG_RUNTIME_DIR/slangspec``, else ``slangspec-UID`` in the temporary directory: made
    0700 if missing; UnsafePlace when another user owns it or others may enter it."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        path = Path(base) / "slangspec"
    else:
        path = Path(tempfile.gettempdir()) / f"slangspec-{os.getuid()}"
    with contextlib.suppress(FileExistsError):  # a file, or a link to nowhere, holds the name
        path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePlace(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafePlace(f"{path} belongs to user {info.st_uid}, not {os.getuid()}")
    if info.st_mode & 0o077:
        raise UnsafePlace(f"{path} may be entered by others (mode {info.st_mode & 0o777:o})")
    return path


def server_place(cache_root: Path) -> ServerPlace:
    """Where the server of ``cache_root`` listens, locks and logs (UnsafePlace as above)."""
    name = xxhash.xxh3_64_hexdigest(str(Path(cache_root).resolve()).encode())
    directory = runtime_directory()
    socket = directory / f"{name}.sock"
    if len(os.fsencode(socket)) > _SOCKET_PATH_BYTES:
        raise UnsafePlace(f"{socket} is longer than a Unix socket's path may be")
    return ServerPlace(socket, directory / f"{name}.lock", directory / f"{name}.log")
