"""``specialize serve``: the compile server of a cache root, in the foreground; or the state of
the running one, or stopping it. A process that misses on CUDA starts one itself, detached,
unless ``SLANGSPEC_COMPILE_SERVER`` says otherwise."""

from __future__ import annotations

import logging

import click

from .common import UsageProblem, cache_dir_option, fail, human_bytes, json_option, print_json


@click.command()
@cache_dir_option
@click.option("--status", "show", is_flag=True, help="Report on the running server and exit.")
@click.option("--stop", is_flag=True, help="Ask the running server to exit.")
@click.option("--arch", default=None, help="Start NVRTC for this architecture (sm_90) at once.")
@json_option
def serve(cache_dir: str | None, show: bool, stop: bool, arch: str | None, as_json: bool) -> None:
    """Keep Slang, the modules it loaded and NVRTC warm for this user's processes, and build
    their CUDA kernels, until idle for SLANGSPEC_SERVE_IDLE. Exit 1 from --status or --stop
    when no server answers."""
    from ..cache_store import cache_root
    from ..compile import compile_server, server_client

    root = cache_root(cache_dir)
    if show and stop:
        raise UsageProblem("give --status or --stop, not both")
    if show:
        found = server_client.status(root)
        if found is None:
            fail(f"no compile server answers for {root}")
        if as_json:
            print_json(found)
            return
        click.echo(
            f"compile server of {root}: pid {found['pid']}, up {found['uptime_s']} s, "
            f"{found['requests']} requests ({found['done']}), {found['refused']} refused, "
            f"{found['modules_held']} modules held, prelude precompiled for "
            f"{found['prelude_precompiled_for'] or 'none'}, memory "
            f"{human_bytes(found['memory_bytes'])} (peak {human_bytes(found['peak_memory_bytes'])})"
        )
        return
    if stop:
        if not server_client.stop(root):
            fail(f"no compile server answers for {root}")
        if as_json:
            print_json({"stopped": str(root)})
        else:
            click.echo(f"stopped the compile server of {root}")
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if not compile_server.run(root, arch):
        click.echo(f"a compile server already serves {root}")
