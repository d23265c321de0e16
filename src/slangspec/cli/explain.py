"""``specialize explain``: why would this call miss the cache?

The module loader is imported when the command runs, not when the CLI starts.
"""

from __future__ import annotations

from typing import Any

import click

from ..signatures.text import compose_call_signature
from .common import UsageProblem, cache_dir_option, device_option, json_option, print_json


def _signature(fn: Any, text: str) -> str:
    """A call signature, or argument specs/signatures separated by ';', positional ones first,
    then ``name=spec`` ones."""
    from ..signatures.text import parse_call_signature
    from ..signatures.values import SPEC_WORDING, bind_names, spec_signature

    function_id = fn.id
    try:
        if text.startswith(f"{fn.module.name}::"):
            call = parse_call_signature(text)
            if call.function_id != function_id:
                raise ValueError(f"the signature is for {call.function_id}, not {function_id}")
            return text
        positional, named = [], {}
        for part in (p.strip() for p in text.split(";")):
            name, eq, spec = part.partition("=")
            if eq and name.strip().isidentifier():
                named[name.strip()] = spec.strip()
            elif named:
                raise ValueError(f"positional spec {part!r} after a named one")
            elif part:
                positional.append(part)
        if named:
            names = fn.parameter_names(len(positional) + len(named))
            positional = list(bind_names(function_id, names, positional, named, SPEC_WORDING))
        return compose_call_signature(function_id, [spec_signature(a) for a in positional])
    except ValueError as exc:
        raise UsageProblem(f"SIGNATURE: {exc}") from None


@click.command()
@click.argument("module", type=click.Path(exists=True, dir_okay=False))
@click.argument("function")
@click.argument("signature")
@click.option("-I", "--include", "include_paths", multiple=True, help="An include path.")
@click.option("-D", "--define", "defines", multiple=True, help="A define, NAME=VALUE.")
@device_option
@cache_dir_option
@json_option
def explain(module, function, signature, include_paths, defines, device, cache_dir, as_json):
    """Compute the key of MODULE's FUNCTION for SIGNATURE; on a miss, show the nearest stored
    entries and exactly which parts of their keys differ.

    SIGNATURE is a call signature ("mod::fn call [D1,S6,G1,Vx] f") or argument specs separated
    by ';' ("f32[N] grad; float"), the last ones by parameter name if you like ("x=f32[N]"); a
    struct's is its fields' ("{origin: f32[N, 3] grad, dir: f32[N, 3]}").
    """
    from ..aot.explain import explain as explain_call
    from ..compile import SlangCompileError
    from ..runtime.cache import Cache
    from ..runtime.module_base import BuildModule, UnknownFunctionError, load_module

    pairs = {}
    for d in defines:
        name, eq, value = d.partition("=")
        if not eq or not name:
            raise UsageProblem(f"--define {d!r}: expected NAME=VALUE")
        pairs[name] = value
    m = load_module(
        BuildModule,
        module,
        device=device,
        include_paths=include_paths,
        defines=pairs,
        cache=Cache.for_running(cache_dir, read_only=True),
    )
    try:
        fn = m[function]
    except UnknownFunctionError as exc:
        raise UsageProblem(f"FUNCTION: {exc}") from None
    except SlangCompileError as exc:
        raise click.ClickException(f"MODULE {module}: {exc}") from None
    asked = _signature(fn, signature)
    try:
        plan = fn.plan_for_signature(asked)  # a call it could not make is no miss
    except (TypeError, ValueError) as exc:
        raise UsageProblem(f"SIGNATURE: {exc}") from None
    result = {**explain_call(fn, asked), "overload": plan.overload}
    if as_json:
        print_json(result)
        return
    click.echo(f"key        {result['key']}")
    click.echo(f"signature  {result['signature']}")
    if len(fn.overloads) > 1:
        click.echo(f"overload   {plan.overload}")
    if result["hit"]:
        click.echo(f"hit: stored with kernels {', '.join(result['kernels'])}")
        return
    click.echo("miss")
    if not result["nearest"]:
        click.echo(f"  no stored entry of module {m.name}")
    for near in result["nearest"]:
        click.echo(f"  nearest {near['key'][:12]}  {near['signature']}")
        for d in near["differences"]:
            click.echo(f"    - {d}")
