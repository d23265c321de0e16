"""The ``specialize`` command line: thin commands over the library."""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from ..formats import VERSION
from .cache import cache
from .common import UsageProblem
from .explain import explain
from .prepare import prepare
from .serve import serve
from .warm import warm


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="specialize")
def main() -> None:
    """Specialize, cache and inspect differentiable Slang kernels for PyTorch.

    Exit codes: 0 ok, 1 failure, 2 usage error. SLANGSPEC_LOG=info logs what the commands do.
    """
    from ..settings import configure_logging, unknown_variables, unknown_variables_said

    try:
        configure_logging()
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    for message in unknown_variables():
        click.echo(f"specialize: {message}", err=True)
    # Said once here: not again by the modules this process and its workers load.
    unknown_variables_said()


main.add_command(warm)
main.add_command(cache)
main.add_command(explain)
main.add_command(prepare)
main.add_command(serve)


def run(args: Sequence[str] | None = None) -> NoReturn:
    """The ``specialize`` program: ``main``, then an exit that waits on nothing.

    Worker processes a command leaves behind (``warm --jobs``) have written their work to the
    cache and sit idle; they are killed instead of waited for, and once the exit handlers have
    run and the output is flushed the interpreter's own teardown is skipped: tearing down CUDA
    workers' contexts, and an interpreter that imported torch, takes seconds. An error click
    does not handle leaves the ordinary way, with its traceback.
    """
    code: object = 0
    try:
        main(args, prog_name="specialize")
    except SystemExit as done:
        code = done.code
    for child in multiprocessing.active_children():
        child.kill()
    # multiprocessing's own exit handler would join the killed workers, waiting out their exits.
    atexit.unregister(multiprocessing.util._exit_function)
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
