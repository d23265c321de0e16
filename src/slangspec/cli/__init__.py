"""The ``specialize`` command line: thin commands over the library."""

from __future__ import annotations

import click

from .._version import __version__
from .cache import cache
from .explain import explain
from .warm import warm


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specialize")
def main() -> None:
    """Specialize, cache and inspect differentiable Slang kernels for PyTorch.

    Exit codes: 0 ok, 1 failure, 2 usage error.
    """


main.add_command(warm)
main.add_command(cache)
main.add_command(explain)
