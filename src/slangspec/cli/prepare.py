"""``specialize prepare``: make, once per toolchain, what every CUDA build reads (slangpy's
Slang library as IR and Slang's CUDA prelude), so that no cache has to make it in a first miss.

Run it where the package is installed (``scripts/setup.sh`` does, and so should an image's
build): it needs Slang alone, no GPU, no CUDA driver and no NVRTC.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..settings import setting
from .common import fail, human_bytes, json_option, print_json


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write (default: SLANGSPEC_PREPARED_DIR, else _prepared in the package).",
)
@click.option("--force", is_flag=True, help="Make them again even where they are whole.")
@json_option
def prepare(directory: str | None, force: bool, as_json: bool) -> None:
    """Compile slangpy's Slang library to IR and keep Slang's CUDA prelude, for this
    toolchain, where CUDA builds of every cache read them; nothing to do where they are
    already, whole."""
    from ..compile import DEFAULT_ROOT, FILES, directory_of, prepared, toolchain
    from ..compile import prepare as make

    root = Path(directory or setting("SLANGSPEC_PREPARED_DIR") or DEFAULT_ROOT)
    tools = toolchain()
    where = directory_of(root, tools)
    found = prepared(root, tools)
    whole = found is not None and all(found.read(name) is not None for name in FILES)
    if whole and not force:
        if as_json:
            print_json({"directory": str(where), "files": {}, "seconds": 0.0})
        else:
            click.echo(f"already prepared in {where}")
        return
    start = time.perf_counter()
    try:
        sizes = make(root, tools)
    except OSError as exc:
        fail(f"cannot write the prepared files in {root}: {exc}; choose another with --dir")
    seconds = time.perf_counter() - start
    if as_json:
        print_json({"directory": str(where), "files": sizes, "seconds": round(seconds, 3)})
        return
    made = ", ".join(f"{name} ({human_bytes(size)})" for name, size in sizes.items())
    click.echo(f"prepared {made} in {where} ({seconds:.1f} s)")
