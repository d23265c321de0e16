"""Options, parsers and output helpers shared by the commands."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from .. import settings
from ..errors import Error
from ..settings import DEVICE_KINDS


class UsageProblem(Error, click.ClickException):
    """Bad input from the user: a malformed manifest, key or signature. Exits with 2."""

    exit_code = 2


_DEVICE_KINDS = click.Choice(DEVICE_KINDS)
device_option = click.option(
    "--device",
    type=_DEVICE_KINDS,
    default=None,
    help="Device kind (default: SLANGSPEC_DEVICE, else CUDA, else Vulkan).",
)
device_filter_option = click.option(
    "--device", type=_DEVICE_KINDS, default=None, help="Only this device kind."
)
module_filter_option = click.option("--module", default=None, help="Only this module.")
function_filter_option = click.option("--function", default=None, help="Only this function.")
cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Cache directory (default: SLANGSPEC_CACHE_DIR, else the user cache directory).",
)
_json_flag = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``; with it, what native code prints while the command runs goes to stderr
    (slangpy's logger prints its warnings on stdout), so stdout holds the JSON alone."""

    @functools.wraps(command)
    def run(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        if not as_json:
            return command(*args, as_json=as_json, **kwargs)
        with _native_stdout_to_stderr():
            return command(*args, as_json=as_json, **kwargs)

    return _json_flag(run)


@contextlib.contextmanager
def _native_stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the block, and ``sys.stdout`` at a copy of the
    old one; nothing changes where ``sys.stdout`` is not descriptor 1 (a test's capture)."""
    try:
        real = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        real = False
    if not real:
        yield
        return
    stdout = sys.stdout
    stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(saved, "w", encoding=stdout.encoding, closefd=False)  # noqa: SIM115
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
        os.dup2(saved, 1)
        os.close(saved)


def remote_option(
    instead: str | None = None, note: str | None = None
) -> Callable[[Callable[..., Any]], Any]:
    """``--remote URL``: the shared remote tier a command uses, or, given ``instead`` (what the
    command then does, as in 'Evict from'), the one it acts on instead of the local cache,
    with ``note`` on what it then takes."""
    if instead is None:
        text = "The shared remote tier, redis://host:port/db (default: SLANGSPEC_REMOTE)."
    else:
        more = f"; {note}" if note else ""
        text = f"{instead} the shared remote tier at URL instead (redis://host:port/db){more}."
    return click.option("--remote", default=None, metavar="URL", help=text)


def _parsed(parse: Callable[[str], Any], param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def parse_duration(_ctx: Any, param: click.Parameter, value: str | None) -> float | None:
    """'90', '90s', '15m', '12h', '7d' or '2w' -> seconds."""
    return _parsed(settings.parse_duration, param, value)


def parse_size(_ctx: Any, param: click.Parameter, value: str | None) -> int | None:
    """'1048576', '512K', '500M', '2G' (or 500MiB, 2GB) -> bytes."""
    return _parsed(settings.parse_size, param, value)


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def ago(t: float) -> str:
    seconds = max(0.0, time.time() - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)
