"""``specialize cache``: list, show, measure, evict, clear, verify, export and import; push to
and pull from the shared remote tier.

Only ``verify`` (which regenerates sources), ``import`` and ``pull`` from a server without a
secret bring in the code generator and the builder, and only when they run; the others import
neither torch nor slangpy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..cache_store import EntryFilter, RemoteTier, remote_admin, remote_settings
from ..cache_store import shipped as shipped_kernels
from ..runtime.cache import Cache
from ..signatures.text import call_arguments
from .common import (
    UsageProblem,
    ago,
    cache_dir_option,
    device_filter_option,
    device_option,
    fail,
    function_filter_option,
    human_bytes,
    json_option,
    module_filter_option,
    parse_duration,
    parse_size,
    print_json,
    print_table,
    remote_option,
)


def _remote(remote: str | None) -> RemoteTier:
    """The remote tier ``remote`` (else ``SLANGSPEC_REMOTE``); a usage error when neither names
    one."""
    try:
        settings = remote_settings(remote)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if settings is None:
        raise UsageProblem("no remote tier: pass --remote URL or set SLANGSPEC_REMOTE")
    return RemoteTier(settings)


@click.group()
def cache() -> None:
    """Inspect and manage the kernel cache."""


@cache.command("ls")
@module_filter_option
@function_filter_option
@device_filter_option
@cache_dir_option
@remote_option("List")
@json_option
def ls(module, function, device, cache_dir, remote, as_json):
    """List entries, most recently used first."""
    where = EntryFilter(module=module, function=function, device=device)
    if remote is not None:
        listed = remote_admin.entries(_remote(remote), where)
        if as_json:
            print_json(listed)
            return
        _entry_table(listed, ["kernels"], lambda e: (", ".join(e["kernels"]),))
        return
    entries = Cache(cache_dir).entries(where)
    if as_json:
        print_json(entries)
        return
    _entry_table(
        entries,
        ["size", "hits", "last used"],
        lambda e: (human_bytes(e["size"]), e["hits"], ago(e["last_used"])),
    )


def _entry_table(
    entries: list[dict[str, Any]],
    more_columns: list[str],
    more: Callable[[dict[str, Any]], tuple[Any, ...]],
) -> None:
    """A table of entries: key and what each preimage says, then ``more_columns`` filled by
    ``more``; a damaged entry shows its key and blanks."""
    headers = ["key", "module", "function", "signature", "device", *more_columns]
    rows = []
    for e in entries:
        if "damaged" in e:
            rows.append((e["key"][:12], "(damaged)", *[""] * (len(headers) - 2)))
            continue
        said = (e["module"], e["function"], call_arguments(e["signature"]), e["device"])
        rows.append((e["key"][:12], *said, *more(e)))
    print_table(headers, rows)


@cache.command()
@click.argument("key")
@cache_dir_option
@json_option
def show(key, cache_dir, as_json):
    """Show one entry (KEY or a unique prefix): preimage, plan, sources, binaries and sizes."""
    try:
        detail = Cache(cache_dir).show(key)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None  # exit 1: nothing there to show
    if as_json:
        print_json(detail)
        return
    meta = detail["meta"]
    mismatch = "" if detail["key_matches_preimage"] else "  (MISMATCH)"
    click.echo(f"key      {detail['key']}{mismatch}")
    click.echo("preimage")
    click.echo(json.dumps(detail["preimage"], indent=2, sort_keys=True))
    click.echo("plan")
    click.echo(json.dumps(detail["plan"], indent=2, sort_keys=True))
    click.echo(
        f"hits {meta['hits']}, created {ago(meta['created'])}, "
        f"last used {ago(meta['last_used'])}, "
        f"compile {meta.get('compile_s', 0.0) * 1e3:.1f} ms"
    )
    for mask, s in detail["kernels"].items():
        state = "whole" if s["whole"] else "MISSING OR DAMAGED"
        click.echo(f"--- kernel {mask}: {s['file']} ({s['bytes']} bytes, {state})")
        if s["text"]:
            click.echo(s["text"].rstrip())
    for label, b in detail["binaries"].items():
        state = "whole" if b["whole"] else "MISSING OR DAMAGED"
        click.echo(f"--- binary {label}: {b['file']} ({b['bytes']} bytes, {state})")


@cache.command()
@cache_dir_option
@remote_option("Measure")
@json_option
def stats(cache_dir, remote, as_json):
    """Entries, bytes, hits and misses, and entries per device."""
    if remote is not None:
        s = _remote(remote).stats()
        if as_json:
            print_json(s)
            return
        if s.get("unavailable"):
            fail(f"remote tier {s['url']} cannot be reached")
        for name in ("url", "entries", "blobs", "facts", "leases"):
            click.echo(f"{name:9s} {s[name]}")
        limit = human_bytes(s["maxmemory"]) if s["maxmemory"] else "no limit"
        click.echo(f"memory    {human_bytes(s['used_memory'])} of {limit}")
        return
    s = Cache(cache_dir).stats()
    if as_json:
        print_json(s)
        return
    click.echo(f"path      {s['path']}")
    click.echo(f"entries   {s['entries']}")
    click.echo(
        f"size      {human_bytes(s['bytes'])}  ("
        + ", ".join(f"{k} {human_bytes(v)}" for k, v in s["bytes_by_part"].items())
        + ")"
    )
    click.echo(f"hits      {s['hits']}")
    click.echo(f"misses    {s['misses']}")
    for device, n in sorted(s["per_device"].items()):
        click.echo(f"device    {device}: {n} entries")


@cache.command()
@click.option("--older-than", callback=parse_duration, help="Created longer ago (e.g. 7d).")
@click.option("--unused-since", callback=parse_duration, help="Not used for this long (e.g. 12h).")
@click.option("--max-size", callback=parse_size, help="Then shrink to this size (e.g. 500M).")
@module_filter_option
@function_filter_option
@click.option("--key", default=None, help="A key or key prefix.")
@device_filter_option
@cache_dir_option
@remote_option("Evict from", "module, function, key and device filters only")
@json_option
def evict(
    older_than, unused_since, max_size, module, function, key, device, cache_dir, remote, as_json
):
    """Evict the entries every given filter matches, then shrink to --max-size.

    A --max-size below what the cache holds beside its kernels (slangpy's compiled Slang
    library, the shader cache, the index) is refused, and nothing is evicted: exit 1."""
    where = EntryFilter(older_than, unused_since, module, function, key, device)
    if not where and max_size is None:
        raise click.UsageError("give at least one filter (or use 'specialize cache clear')")
    if remote is not None:
        if older_than is not None or unused_since is not None or max_size is not None:
            raise click.UsageError("--remote takes only --module, --function, --key and --device")
        try:
            gone = remote_admin.evict(_remote(remote), where)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
    else:
        local = Cache(cache_dir)
        try:
            gone = local.evict(where, max_size=max_size)
        except ValueError as exc:  # a --max-size no eviction reaches: nothing was evicted
            fail(str(exc))
    if as_json:
        print_json({"evicted": gone})
        return
    for k in gone:
        click.echo(f"evicted {k}")
    click.echo(f"{len(gone)} entries evicted")


@cache.command()
@click.option("--yes", is_flag=True, help="Do not ask.")
@cache_dir_option
def clear(yes, cache_dir):
    """Remove every entry, source, compiled artifact and record."""
    c = Cache(cache_dir)
    if not yes:
        click.confirm(f"Remove everything in {c.root}?", abort=True)
    c.clear()
    click.echo(f"cleared {c.root}")


@cache.command()
@click.option("--repair", is_flag=True, help="Drop what is damaged and rebuild missing sources.")
@cache_dir_option
@remote_option("Check", "--repair removes what fails")
@click.option(
    "--shipped",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Check the kernels a package ships in DIR instead, as a process serving them would.",
)
@json_option
def verify(repair, cache_dir, remote, shipped, as_json):
    """Check every row, preimage, plan (against its kernels and against type resolution),
    kernel source, binary and fact; exit 1 if problems remain."""
    if shipped is not None:
        if repair or remote is not None:
            raise UsageProblem("--shipped is checked as it is: without --repair or --remote")
        report = shipped_kernels.verify(Path(shipped), Cache.regenerate, Cache.replan)
        report = {**report, "repaired": 0}
        _verified(report, report["problems"], as_json)
        return
    if remote is not None:
        r = _remote(remote)

        def check(repair: bool = False) -> dict[str, Any]:
            return remote_admin.verify(r, repair, Cache.regenerate, Cache.replan)

    else:
        c = Cache(cache_dir)
        check = c.verify
    report = check(repair=repair)
    _verified(report, check()["problems"] if repair else report["problems"], as_json)


def _verified(report: dict[str, Any], remaining: list[dict[str, str]], as_json: bool) -> None:
    """Print a verification's report; exit 1 while problems remain."""
    if as_json:
        print_json({**report, "remaining": remaining})
    else:
        for p in report["problems"]:
            click.echo(f"{p['key'][:12] or '-':12s}  {p['problem']}")
        click.echo(
            f"{report['checked']} entries checked, {len(report['problems'])} problems, "
            f"{report['repaired']} repaired"
        )
    if remaining:
        raise SystemExit(1)


@cache.command("export")
@click.argument("file", required=False, type=click.Path(dir_okay=False, writable=True))
@click.option(
    "--for-package",
    "package",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Add the entries, with their binaries, to DIR, a directory a Python package ships as "
    "package data and passes to slangspec.load(..., shipped=DIR).",
)
@module_filter_option
@function_filter_option
@device_filter_option
@cache_dir_option
@json_option
def export_(file, package, module, function, device, cache_dir, as_json):
    """Write a portable bundle of records, plans and sources to FILE, with the binaries sealed
    by a MAC when SLANGSPEC_SECRET is set; or, with --for-package DIR, kernels for a package to
    ship (--module, --function and --device choose which)."""
    if (file is None) == (package is None):
        raise UsageProblem("give either FILE (a bundle) or --for-package DIR")
    where = EntryFilter(module=module, function=function, device=device)
    if package is not None:
        from ..aot.package_kernels import export_for_package

        try:
            counts = export_for_package(Cache(cache_dir), package, where)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
        if not counts["entries"]:
            fail("no entry matched, nothing written: warm the cache first (specialize warm)")
        if as_json:
            print_json(counts)
            return
        click.echo(
            f"exported {counts['entries']} entries with {counts['binaries']} binaries to "
            f"{package}, which now ships {counts['shipped']} entries"
        )
        return
    if where:
        raise UsageProblem("--module, --function and --device choose entries for --for-package")
    from ..aot.bundle import export_bundle

    try:
        counts = export_bundle(Cache(cache_dir), file)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if as_json:
        print_json(counts)
        return
    click.echo(
        f"exported {counts['entries']} entries, {counts['records']} records, "
        f"{counts['sources']} sources and {counts['binaries']} sealed binaries to {file}"
    )
    if counts["binaries_left_out"]:
        click.echo(
            f"left out {counts['binaries_left_out']} binaries: set SLANGSPEC_SECRET (the same on "
            "both machines) to carry them sealed"
        )


@cache.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@device_option
@cache_dir_option
@json_option
def import_(file, device, cache_dir, as_json):
    """Import a bundle, re-keyed for this machine; says what it skipped and why."""
    from ..aot.bundle import import_bundle

    try:
        report = import_bundle(Cache(cache_dir), file, device=device)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if as_json:
        print_json(report)
        return
    click.echo(
        f"imported {report['entries']} entries, {report['records']} records, "
        f"{report['sources']} sources and {report['binaries']} binaries"
    )
    for s in report["skipped"]:
        click.echo(f"skipped {s['what']}: {s['why']}")
    if report["skipped"] and not (report["entries"] or report["records"]):
        fail("nothing could be imported")


@cache.command()
@remote_option()
@cache_dir_option
@json_option
def push(remote, cache_dir, as_json):
    """Publish every whole local entry, with its kernels and binaries, to the remote tier."""
    r = _remote(remote)
    try:
        counts = remote_admin.push(Cache(cache_dir).disk, r)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if as_json:
        print_json(counts)
        return
    click.echo(f"pushed {counts['entries']} entries to {r.settings.shown}")
    if counts["skipped"]:
        click.echo(f"skipped {counts['skipped']} entries that are not whole here")


@cache.command()
@remote_option()
@module_filter_option
@function_filter_option
@device_filter_option
@cache_dir_option
@json_option
def pull(remote, module, function, device, cache_dir, as_json):
    """Fetch the remote tier's entries into the local cache, each checked as a lookup would."""
    r = _remote(remote)
    where = EntryFilter(module=module, function=function, device=device)
    counts = remote_admin.pull(Cache(cache_dir).disk, r, where, Cache.regenerate, Cache.replan)
    if as_json:
        print_json(counts)
        return
    click.echo(
        f"pulled {counts['pulled']} entries from {r.settings.shown} "
        f"({counts['present']} already here, {counts['refused']} refused)"
    )
