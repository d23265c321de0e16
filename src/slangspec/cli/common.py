"""Options, parsers and output helpers shared by the commands."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import click


class UsageProblem(click.ClickException):
    """Bad input from the user: a malformed manifest, key or signature. Exits with 2."""

    exit_code = 2


device_option = click.option(
    "--device",
    type=click.Choice(["cuda", "vulkan"]),
    default=None,
    help="Device kind (default: SLANGSPEC_DEVICE, else CUDA, else Vulkan).",
)
cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Cache directory (default: SLANGSPEC_CACHE_DIR, else the user cache directory).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")

_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _scaled(
    value: str, units: dict[str, int], suffix: str, example: str, param: click.Parameter
) -> float:
    """A number with an optional unit letter (and ``suffix`` letters after it), scaled."""
    m = re.fullmatch(rf"(\d+(?:\.\d+)?)\s*([{''.join(units)}]?){suffix}", value.strip().lower())
    if not m:
        raise click.BadParameter(f"{value!r}: expected {example}", param=param)
    return float(m.group(1)) * units[m.group(2)]


def parse_duration(_ctx: Any, param: click.Parameter, value: str | None) -> float | None:
    """'90', '90s', '15m', '12h', '7d' or '2w' -> seconds."""
    if value is None:
        return None
    return _scaled(value, _DURATION_UNITS, "", "a duration like 90s, 15m, 12h or 7d", param)


def parse_size(_ctx: Any, param: click.Parameter, value: str | None) -> int | None:
    """'1048576', '512K', '500M', '2G' (or 500MiB, 2GB) -> bytes."""
    if value is None:
        return None
    return int(_scaled(value, _SIZE_UNITS, "i?b?", "a size like 1048576, 500M or 2G", param))


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
