"""``specialize warm``: build specializations into the cache ahead of time.

The builder is imported when the command runs, not when the CLI starts, and by the workers
only (where this process cannot fork, it builds ``--jobs 1`` itself); torch by none of them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..runtime.cache import Cache
from .common import (
    UsageProblem,
    cache_dir_option,
    device_option,
    json_option,
    print_json,
    print_table,
)

if TYPE_CHECKING:
    from ..aot.warm import WarmResult


def _recorded(source: str | None, cache_dir: str | None):
    from ..aot.bundle import BUNDLE_FORMAT, read_bundle

    if source is None:
        return Cache(cache_dir).records()
    path = Path(source)
    if path.is_dir():
        return Cache(path).records()
    try:
        return read_bundle(path)["records"]
    except ValueError as exc:
        raise UsageProblem(
            f"--from {source}: expected a cache directory or a {BUNDLE_FORMAT} file ({exc})"
        ) from None


def default_jobs() -> int:
    """Workers by default: the CPUs this process may run on, less one for the command and
    the machine (on two cores, two workers were slower than one)."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


@click.command()
@click.argument("manifest", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--recorded",
    is_flag=True,
    help="Replay the specializations the JIT recorded instead of a manifest.",
)
@click.option(
    "--from",
    "source",
    default=None,
    help="With --recorded: another cache directory or an exported bundle.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=default_jobs,
    show_default="the usable CPUs less one, at least 1",
    help="Worker processes compiling in parallel.",
)
@click.option("--dry-run", is_flag=True, help="Only report what is missing; exit 1 if anything is.")
@click.option(
    "--arch",
    "archs",
    multiple=True,
    metavar="SM",
    help="CUDA: build for this GPU architecture (sm_90), not the GPU's; needs no GPU nor "
    "CUDA driver. Repeat for several.",
)
@device_option
@cache_dir_option
@json_option
def warm(manifest, recorded, source, jobs, dry_run, archs, device, cache_dir, as_json):
    """Build the specializations a MANIFEST (TOML) lists, or those recorded, into the cache.

    Each line reports one specialization (a function at one call signature: its forward kernel
    and the backward kernels its masks ask for), and the summary counts specializations, not
    kernels. Statuses: built (compiled now), cached (all there before this run, nothing
    compiled), present / missing (--dry-run: all there / what is not), failed (the detail says
    why; exit 1). See docs/warm.md for the manifest format and the argument-spec grammar. With
    --arch, CUDA kernels are built for each architecture named, on any machine.
    """
    if recorded == (manifest is not None):
        raise click.UsageError("give a MANIFEST or --recorded, not both and not neither")
    if source is not None and not recorded:
        raise click.UsageError("--from goes with --recorded")
    from ..aot import pool as warm_pool
    from ..settings import setting

    if archs:
        if device not in (None, "cuda"):
            raise click.UsageError("--arch builds CUDA kernels: give --device cuda or no --device")
        device = "cuda"
        for arch in archs:
            try:
                setting("SLANGSPEC_CUDA_ARCH", arch, "--arch")
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--arch") from None
    results: list[WarmResult] = []
    for arch in archs or (None,):
        if arch is not None:
            os.environ["SLANGSPEC_CUDA_ARCH"] = arch  # read by this process and its workers
        # Workers start first, so that they set up while this process reads the manifest. One
        # job is a worker too where this process can fork one: slangpy would import torch
        # here, and a worker keeps it out.
        started = warm_pool.start(jobs, device) if jobs > 1 or warm_pool.fork_safe() else None
        with warm_pool.released(started) as pool:
            done = _warm(manifest, recorded, source, jobs, dry_run, device, cache_dir, pool)
        if done is None:
            click.echo("nothing to warm", err=True)
            return
        results += done
    _report(results, as_json, archs)
    bad = {"failed", "missing"}
    sys.exit(1 if any(r.status in bad for r in results) else 0)


def _warm(manifest, recorded, source, jobs, dry_run, device, cache_dir, pool):
    """The results of warming what the command names; None when that is nothing."""
    from ..aot.warm import ManifestError, items_from_records, parse_manifest
    from ..aot.warm import warm as warm_items

    if recorded:
        items = items_from_records(_recorded(source, cache_dir))
    else:
        try:
            items = parse_manifest(manifest)
        except ManifestError as exc:
            raise UsageProblem(str(exc)) from None
    if not items:
        return None
    with click.progressbar(
        length=len(items),
        label="checking" if dry_run else "warming",
        file=sys.stderr,
        show_pos=True,
    ) as bar:
        return warm_items(
            items,
            device=device,
            cache_dir=cache_dir,
            jobs=jobs,
            dry_run=dry_run,
            progress=lambda _: bar.update(1),
            pool=pool,
        )


def _report(results: list[WarmResult], as_json: bool, archs: tuple[str, ...]) -> None:
    # With --arch, each architecture's results in turn, each item once per architecture.
    per_arch = len(results) // max(len(archs), 1)
    arch_of = [archs[i // per_arch] if archs else None for i in range(len(results))]
    if as_json:
        print_json(
            [
                {
                    "module": r.item.name,
                    "function": r.item.function,
                    "signature": r.item.signature,
                    "status": r.status,
                    "detail": r.detail,
                    "source": r.item.where,
                    **({"arch": arch} if arch else {}),
                }
                for r, arch in zip(results, arch_of, strict=True)
            ]
        )
        return
    print_table(
        ["status", "specialization", "detail"],
        [
            (r.status, f"{r.item.label} [{arch}]" if arch else r.item.label, r.detail)
            for r, arch in zip(results, arch_of, strict=True)
        ],
    )
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    click.echo(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
