"""The `specialize` command line, end to end on real kernels."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import slangspec
from slangspec.aot.bundle import BUNDLE_VERSION
from slangspec.cli import main
from slangspec.compile import toolchain_identity as toolchain
from workers import copied, run

HERE = Path(__file__).parent
SHADER = HERE / "shaders" / "cached.slang"
LIB = HERE / "slang_lib"

# The two specializations tests/jit_worker.py calls with --signatures 2.
WORKER_SPECS = '["f32[1] grad", "f32[7] nograd"], ["f32[1] grad", "f32[7, 5] nograd"]'


def manifest(tmp_path: Path, specs: str = WORKER_SPECS, extra: str = "") -> Path:
    path = tmp_path / "warm.toml"
    path.write_text(f"""
[[module]]
path = "{SHADER}"
include_paths = ["{LIB}"]

[[module.function]]
name = "poly"
specializations = [{specs}]
{extra}
""")
    return path


def cli(*args: str, input: str | None = None):
    """The command; ``warm`` with one worker unless told (its default, the usable CPUs less
    one, would start many per test on a large machine running tests in parallel)."""
    words = [str(a) for a in args]
    if words[:1] == ["warm"] and "--jobs" not in words:
        words += ["--jobs", "1"]
    return CliRunner().invoke(main, words, input=input, catch_exceptions=False)


def test_warm_then_a_new_process_hits_without_compiling(tmp_path):
    cache = tmp_path / "cache"
    m = manifest(tmp_path)
    r = cli("warm", m, "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in json.loads(r.stdout)] == ["built", "built"]
    again = cli("warm", m, "--cache-dir", cache, "--json")
    assert [x["status"] for x in json.loads(again.stdout)] == ["cached", "cached"]
    warm = run(cache, "--signatures", "2", "--forbid-compile")
    assert warm["ok"]
    assert warm["counts"].get("specialize", 0) == warm["counts"].get("codegen", 0) == 0
    assert slangspec.Cache(cache).stats()["hits"] >= 2


def test_dry_run_passes_when_complete_and_fails_after_an_eviction(tmp_path):
    cache = tmp_path / "cache"
    m = manifest(tmp_path)
    assert cli("warm", m, "--cache-dir", cache, "--dry-run").exit_code == 1
    assert slangspec.Cache(cache).entries() == [], "a dry run compiles nothing"
    assert cli("warm", m, "--cache-dir", cache).exit_code == 0
    ok = cli("warm", m, "--cache-dir", cache, "--dry-run")
    assert ok.exit_code == 0 and "2 present" in ok.output
    key = slangspec.Cache(cache).entries()[0]["key"]
    assert cli("cache", "evict", "--key", key[:16], "--cache-dir", cache).exit_code == 0
    missing = cli("warm", m, "--cache-dir", cache, "--dry-run")
    assert missing.exit_code == 1 and "1 missing" in missing.output


def test_export_import_and_replay_reproduce_the_entries(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    assert run(source, "--signatures", "3")["ok"]
    bundle = tmp_path / "bundle.json"
    r = cli("cache", "export", bundle, "--cache-dir", source)
    assert r.exit_code == 0 and "3 entries, 3 records" in r.output
    r = cli("cache", "import", bundle, "--cache-dir", target, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert (report["entries"], report["records"], report["skipped"]) == (3, 3, [])
    r = cli("warm", "--recorded", "--cache-dir", target, "--json")
    assert r.exit_code == 0, r.output
    assert {x["status"] for x in json.loads(r.stdout)} == {"cached"}

    def specs(cache):
        return sorted(
            (e["function"], e["signature"], tuple(e["kernels"]))
            for e in slangspec.Cache(cache).entries()
        )

    assert specs(target) == specs(source)
    assert run(target, "--signatures", "3", "--forbid-compile")["ok"]


def test_warm_recorded_from_another_cache_or_a_bundle(tmp_path):
    source = tmp_path / "a"
    assert run(source, "--signatures", "2")["ok"]
    r = cli("warm", "--recorded", "--from", source, "--cache-dir", tmp_path / "b")
    assert r.exit_code == 0 and "2 built" in r.output
    bundle = tmp_path / "bundle.json"
    cli("cache", "export", bundle, "--cache-dir", source)
    r = cli("warm", "--recorded", "--from", bundle, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 0 and "2 built" in r.output
    bad = tmp_path / "junk.json"
    bad.write_text("{}")
    r = cli("warm", "--recorded", "--from", bad, "--cache-dir", tmp_path / "d")
    assert r.exit_code == 2 and "not a slangspec bundle" in r.output


def test_import_skips_what_does_not_fit_and_says_why(tmp_path):
    bundle = tmp_path / "bundle.json"
    bundle.write_text(
        json.dumps(
            {
                "format": "slangspec-bundle",
                "version": BUNDLE_VERSION,
                "toolchain": {**toolchain.toolchain()},
                "records": [
                    {
                        "module": "gone",
                        "path": str(tmp_path / "gone.slang"),
                        "source": None,
                        "include_paths": [],
                        "defines": {},
                        "function": "f",
                        "signature": "gone::f call f",
                        "device": "vulkan",
                    }
                ],
                "entries": [],
                "sources": {"k_0000": "not matching"},
            }
        )
    )
    r = cli("cache", "import", bundle, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 1
    assert "gone.slang does not exist here" in r.output
    assert "content does not match its name" in r.output
    old = json.loads(bundle.read_text())
    old["toolchain"]["signature_format"] = 0
    bundle.write_text(json.dumps(old))
    r = cli("cache", "import", bundle, "--cache-dir", tmp_path / "c")
    assert "signature format 0 differs" in r.output


def test_warm_jobs_two_matches_jobs_one(tmp_path):
    shapes = ("N", "N, 2", "N, 3", "2, N", "N, N", "N, N, N")
    specs = ", ".join(f'["f32[1] grad", "f32[{s}] nograd"]' for s in shapes)
    m = manifest(tmp_path, specs)
    r = cli("warm", m, "--jobs", "2", "--cache-dir", tmp_path / "c", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 6 and {x["status"] for x in rows} == {"built"}
    assert len(slangspec.Cache(tmp_path / "c").entries()) == 6


def test_warming_loads_no_kernel_the_cache_holds(tmp_path, monkeypatch):
    from slangspec.aot.warm import parse_manifest, warm
    from slangspec.cache_store import FORWARD
    from slangspec.runtime.miss_path import Builder

    asked = []
    real = Builder.kernel

    def counting(self, found, label):
        asked.append(label)
        return real(self, found, label)

    monkeypatch.setattr(Builder, "kernel", counting)
    items = parse_manifest(manifest(tmp_path, '["f32[1] grad", "f32[7] grad"]'))
    cache = str(tmp_path / "c")
    assert [r.status for r in warm(items, cache_dir=cache)] == ["built"]
    # The forward kernel is built with its entry; each backward task asks for its own kernel.
    assert FORWARD not in asked and len(asked) == len(set(asked)) == 3, asked
    asked.clear()
    assert [r.status for r in warm(items, cache_dir=cache)] == ["cached"]
    assert asked == []


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a new interpreter, which must succeed; its output as text."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_warm_workers_import_neither_torch_nor_slangpy_into_the_command():
    """``warm --jobs`` forks its workers before this process imports anything heavy; each
    imports slangspec's builder itself (and slangpy, on Vulkan: a CUDA worker builds through
    Slang's C API), and never torch."""
    from slangspec.aot.pool import wants_cuda

    code = (
        "import multiprocessing, sys\n"
        "from slangspec.aot import pool as warm_pool\n"
        "pool = warm_pool.start(3, None)\n"
        "print(len(multiprocessing.active_children()), sorted(\n"
        "    m for m in ('torch', 'slangpy') if m in sys.modules))\n"
        "imported = \"tuple(m for m in ('torch', 'slangpy')\"\n"
        "imported += \" if __import__('sys').modules.get(m) is not None)\"\n"
        "print(sorted(set(pool.map(eval, [imported] * 6))))\n"
        "pool.shutdown()\n"
    )
    out = _python(code)
    workers = "[()]" if wants_cuda(None) else "[('slangpy',)]"
    assert out.stdout.splitlines() == ["3 []", workers]


@pytest.mark.parametrize(
    "before, method",
    [
        ("", "fork"),
        ("import torch\n", "spawn"),
        ("threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n", "spawn"),
    ],
    ids=["a bare process", "torch imported", "another thread running"],
)
def test_workers_are_forked_only_from_a_process_with_one_thread_and_no_torch(before, method):
    """A forked child inherits the locks other threads held (native ones too, as torch's) and
    can wait on them for ever, so a process that imported torch or runs another thread (as a
    pytest-xdist worker does) spawns its workers instead."""
    code = (
        "import threading, time\n"
        f"{before}"
        "from slangspec.aot import pool as warm_pool\n"
        "pool = warm_pool.start(1, 'vulkan')\n"
        "print(pool._mp_context.get_start_method(), pool.submit(sum, [1, 2]).result())\n"
        "pool.shutdown()\n"
    )
    assert _python(code).stdout.split() == [method, "3"]


STALLED = """
import os, signal, sys, threading, time
import slangspec.aot.warm as w

def stuck(item, mask, device, cache_dir, defer):
    threading.Event().wait()

def busy(item, mask, device, cache_dir, defer):
    end = time.monotonic() + 4
    while time.monotonic() < end:
        pass
    return w.WarmResult(item, "built"), ()

def killed(item, mask, device, cache_dir, defer):
    os.kill(os.getpid(), signal.SIGKILL)

w.warm_task = {"stuck": stuck, "busy": busy, "killed": killed}[sys.argv[2]]
began = time.monotonic()
results = w.warm(w.parse_manifest(sys.argv[1]), jobs=2, device="vulkan", stall_s=2)
print(round(time.monotonic() - began), sorted({(r.status, r.detail) for r in results}))
"""


@pytest.mark.parametrize("task", ["stuck", "busy", "killed"])
def test_warm_stops_workers_that_use_no_cpu_and_only_those(tmp_path, task):
    """Workers that all go the stall bound without using the CPU never return: warm kills them
    and fails what is outstanding instead of waiting for ever. Workers busy longer than the
    bound are left to finish. A worker killed outright fails what is outstanding too, instead
    of raising out of warm."""
    command = [sys.executable, "-c", STALLED, str(manifest(tmp_path)), task]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seconds, statuses = out.stdout.strip().split(" ", 1)
    if task == "stuck":
        why = "no worker used the CPU for 2 s: stuck, so stopped"
        assert statuses == repr([("failed", why)]) and int(seconds) < 10
    elif task == "killed":
        assert statuses.startswith("[('failed', 'a worker process ended abruptly ("), statuses
    else:
        assert statuses == repr([("built", "")])


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_warm_builds_in_workers_and_the_command_imports_neither_torch_nor_slangpy(
    tmp_path, kind, jobs
):
    """The command hands even one job to a worker it forks, which keeps torch out: built in the
    command's own process, slangpy would import torch there."""
    cache = tmp_path / "cache"
    args = ["warm", str(manifest(tmp_path)), "--jobs", jobs, "--device", kind]
    args += ["--cache-dir", str(cache), "--json"]
    code = (
        "import sys\n"
        "from slangspec.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print(sorted(m for m in ('torch', 'slangpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    *report, imported = out.stdout.strip().splitlines()
    assert imported == "[]", out.stdout + out.stderr
    assert [e["status"] for e in json.loads("\n".join(report))] == ["built", "built"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_warm_builds_where_torch_cannot_be_imported(tmp_path, kind, jobs):
    """Warming needs signatures, not tensors: with torch unimportable in the command (and so in
    the workers it forks), it builds every kernel, and a new process calling the functions
    through torch finds them all."""
    cache = tmp_path / "cache"
    args = ["warm", str(manifest(tmp_path)), "--jobs", jobs, "--device", kind]
    args += ["--cache-dir", str(cache), "--json"]
    code = (
        f"import sys\nsys.modules['torch'] = None\nfrom slangspec.cli import main\nmain({args!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert [x["status"] for x in json.loads(out.stdout)] == ["built", "built"]
    warm = run(cache, "--signatures", "2", "--forbid-compile")
    assert warm["ok"]
    assert warm["counts"].get("specialize", 0) == warm["counts"].get("codegen", 0) == 0


@pytest.mark.parametrize("how", ["forked", "spawned"])
def test_warm_workers_write_to_the_commands_standard_error(how):
    """What a worker prints reaches the command's standard error, never its standard output
    (which carries ``--json``), forked or spawned (a process running a thread of its own cannot
    fork: a pytest-xdist worker, whose standard output is its channel, is one)."""
    code = (
        "import os, threading, time\n"
        "from slangspec.aot import pool as warm_pool\n"
        + (
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            * (how == "spawned")
        )
        + f"assert warm_pool.fork_safe() is {how == 'forked'}\n"
        "pool = warm_pool.start(2, 'vulkan')\n"
        "pool.submit(print, 'printed by a worker', flush=True).result()\n"
        "pool.submit(os.write, 2, b'written by a worker\\n').result()\n"
        "pool.shutdown(wait=False)\n"
        "print('the parent')\n"
    )
    out = _python(code)
    assert out.stdout == "the parent\n"
    assert "printed by a worker\n" in out.stderr and "written by a worker\n" in out.stderr


def test_the_commands_output_ends_when_it_exits_not_when_its_workers_do(tmp_path):
    """A reader of the command's output reaches its end when the command exits, while a worker
    still runs (on CUDA a killed worker keeps running while its context is torn down)."""
    pids = tmp_path / "workers"
    code = (
        "import multiprocessing, os, sys, time\n"
        "from slangspec.aot import pool as warm_pool\n"
        "pool = warm_pool.start(2, 'vulkan')\n"
        "pool.submit(time.sleep, 120)\n"
        "pool.submit(os.getpid).result()\n"
        "workers = [str(p.pid) for p in multiprocessing.active_children()]\n"
        "open(sys.argv[1], 'w').write(' '.join(workers))\n"
        "print('done', flush=True)\n"
        "os._exit(0)\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code, str(pids)], capture_output=True, text=True, timeout=60
        )
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n" and len(pids.read_text().split()) == 2


@pytest.mark.parametrize(
    "then", ["pool.shutdown(wait=False)\n", "del pool\ngc.collect()\n"], ids=["released", "dropped"]
)
def test_a_released_warm_pool_does_not_wait_for_its_workers_to_exit(then):
    """``warm()`` and the command both release the pool, and the command then drops it: neither
    may wait for a worker that is slow to exit. From Python 3.12 the executor's own shutdown
    and its collection both take a lock its manager thread holds while it joins the workers."""
    code = (
        "import gc, multiprocessing, multiprocessing.util as util, os, time\n"
        "from slangspec.aot import pool as warm_pool\n"
        "def exit_slowly():\n"
        "    util.Finalize(None, time.sleep, args=(30,), exitpriority=0)\n"
        "pool = warm_pool.start(2, 'vulkan')\n"
        "workers = multiprocessing.active_children()\n"
        "pool.submit(exit_slowly).result()\n"
        "pool.shutdown(wait=False)\n"
        # Once the other worker is gone, the executor is joining the slow one.
        "deadline = time.monotonic() + 60\n"
        "while sum(p.is_alive() for p in workers) > 1 and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        f"{then}"
        "print(sum(p.is_alive() for p in workers), flush=True)\n"
        "for p in workers:\n"
        "    p.kill()\n"
        "os._exit(0)\n"
    )
    out = _python(code)
    assert out.stdout == "1\n"


def _processes_marked(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
        except OSError:  # gone, or not ours
            continue
    return found


def test_the_program_leaves_no_worker_process_behind(tmp_path):
    """``specialize warm --jobs`` exits without waiting for its workers' teardown; they must
    still be gone, not left blocked on the pool's queue."""
    marker = f"SPECIALIZE_TEST_MARK={os.getpid()}-{tmp_path.name}"
    env = {**os.environ, "SPECIALIZE_TEST_MARK": marker.split("=", 1)[1]}
    command = [sys.executable, "-m", "slangspec", "warm", str(manifest(tmp_path))]
    command += ["--jobs", "2", "--cache-dir", str(tmp_path / "c"), "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert [x["status"] for x in json.loads(out.stdout)] == ["built", "built"]
    left = _processes_marked(marker)
    for _ in range(300):
        if not left:
            break
        time.sleep(0.1)
        left = _processes_marked(marker)
    assert not left, f"worker processes still running after the command: {left}"
    dry = subprocess.run([*command, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    empty = [*command[:-2], str(tmp_path / "empty"), "--dry-run"]
    assert subprocess.run(empty, capture_output=True, timeout=300).returncode == 1
    usage = subprocess.run([*command[:5], "--jobs", "0"], capture_output=True, timeout=300)
    assert usage.returncode == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[module]\npath = 1", "line 1"),
        ("title = 'no modules'", "expected at least one [[module]] table"),
        ('[[module]]\npath = "missing.slang"\n', "2:9: module path 'missing.slang' does not exist"),
        ('[[module]]\npath = "x.slang"\ninclude_paths = "lib"\n', "must be a list of strings"),
    ],
)
def test_malformed_manifests_are_usage_errors(tmp_path, content, message):
    (tmp_path / "x.slang").write_text("float f(float x) { return x; }")
    path = tmp_path / "bad.toml"
    path.write_text(content)
    r = cli("warm", path, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 2
    assert str(path) in r.output
    assert message in r.output


def test_bad_argument_spec_names_line_and_column(tmp_path):
    m = manifest(tmp_path, '["f32[1] grad", "q8[N] grad"]')
    r = cli("warm", m, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 2
    assert f"{m}:8:37: argument spec 'q8[N] grad'" in r.output
    bad_masks = manifest(tmp_path, WORKER_SPECS, 'masks = "some"')
    r = cli("warm", bad_masks, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 2 and "masks 'some'" in r.output
    bad_sig = manifest(tmp_path, '"cached::poly call [D1,S6,G9,V1] f"')
    r = cli("warm", bad_sig, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 2 and "malformed argument signature" in r.output


def test_a_failing_specialization_is_reported_and_exits_1(tmp_path):
    m = manifest(tmp_path, '["f32[1] grad", "f16[N] grad"], ["f32[1] grad", "f32[N] grad"]')
    r = cli("warm", m, "--cache-dir", tmp_path / "c")
    assert r.exit_code == 1
    assert "failed" in r.output and "expected a float32 tensor, got a float16 tensor" in r.output
    assert "1 built" in r.output


def test_usage_errors(tmp_path):
    assert cli("warm", "--cache-dir", tmp_path).exit_code == 2
    assert cli("warm", manifest(tmp_path), "--recorded").exit_code == 2
    assert cli("cache", "evict", "--cache-dir", tmp_path).exit_code == 2
    r = cli("cache", "evict", "--older-than", "soon", "--cache-dir", tmp_path)
    assert r.exit_code == 2 and "expected a duration" in r.output
    r = cli("cache", "evict", "--max-size", "big", "--cache-dir", tmp_path)
    assert r.exit_code == 2 and "expected a size" in r.output
    r = cli("cache", "show", "ffff", "--cache-dir", tmp_path)  # a failure, not a usage error
    assert r.exit_code == 1 and "no entry has a key starting with 'ffff'" in r.output


def test_ls_show_stats_evict_verify_clear(tmp_path):
    cache = tmp_path / "c"
    assert run(cache, "--signatures", "3")["ok"]
    listed = json.loads(cli("cache", "ls", "--cache-dir", cache, "--json").stdout)
    assert len(listed) == 3
    assert (
        cli("cache", "ls", "--function", "twin", "--cache-dir", cache, "--json").output.strip()
        == "[]"
    )
    table = cli("cache", "ls", "--cache-dir", cache).output
    assert table.splitlines()[0].split() == [
        "key",
        "module",
        "function",
        "signature",
        "device",
        "size",
        "hits",
        "last",
        "used",
    ]
    key = listed[0]["key"]
    shown = json.loads(cli("cache", "show", key[:8], "--cache-dir", cache, "--json").stdout)
    assert shown["key"] == key and shown["key_matches_preimage"]
    assert shown["kernels"]["forward"]["whole"]
    assert "bwd_diff" in shown["kernels"]["10"]["text"]
    # Cubins are kept for CUDA kernels only.
    assert bool(shown["binaries"]) == (os.environ.get("SLANGSPEC_DEVICE") == "cuda")
    assert all(b["whole"] for b in shown["binaries"].values())
    assert "preimage" in cli("cache", "show", key[:8], "--cache-dir", cache).output
    stats = json.loads(cli("cache", "stats", "--cache-dir", cache, "--json").stdout)
    assert stats["entries"] == 3 and stats["misses"] == 3
    assert "entries   3" in cli("cache", "stats", "--cache-dir", cache).output
    assert cli("cache", "verify", "--cache-dir", cache).exit_code == 0
    for p in (cache / "kernels").glob("*.slang"):
        p.write_text("damaged")
    assert cli("cache", "verify", "--cache-dir", cache).exit_code == 1
    assert cli("cache", "verify", "--repair", "--cache-dir", cache).exit_code == 0
    assert cli("cache", "verify", "--cache-dir", cache).exit_code == 0
    r = cli(
        "cache",
        "evict",
        "--function",
        "poly",
        "--unused-since",
        "0s",
        "--cache-dir",
        cache,
        "--json",
    )
    assert len(json.loads(r.stdout)["evicted"]) == 3
    assert cli("cache", "clear", "--cache-dir", cache, input="n\n").exit_code == 1
    assert cli("cache", "clear", "--yes", "--cache-dir", cache).exit_code == 0


def test_explain_names_the_differing_grad_bit(tmp_path):
    cache = tmp_path / "c"
    assert cli("warm", manifest(tmp_path), "--cache-dir", cache).exit_code == 0
    args = ["explain", SHADER, "poly", "-I", LIB, "--cache-dir", cache]
    hit = json.loads(cli(*args[:3], "f32[1] grad; f32[7] nograd", *args[3:], "--json").stdout)
    assert hit["hit"] and hit["kernels"] == ["10", "forward"]
    miss = cli(*args[:3], "f32[1] grad; f32[7] grad", *args[3:])
    assert miss.exit_code == 0
    assert "miss" in miss.output
    assert "grad bit of argument 2: G0 stored, G1 asked" in miss.output
    bad = cli(*args[:3], "cached::poly call nonsense", *args[3:])
    assert bad.exit_code == 2 and "SIGNATURE" in bad.output


def test_explain_says_a_file_changed_only_where_the_stored_entrys_function_reaches_an_edit(
    tmp_path,
):
    module, cache = tmp_path / "splat.slang", tmp_path / "c"
    text = "float splat(float x) { return x * 2.0; }\n"
    text += "float other(float x, float y) { return x + y; }\n"
    module.write_text(text)
    path = manifest(tmp_path, '["f32[N]"]', 'masks = "none"')
    path.write_text(path.read_text().replace(str(SHADER), str(module)).replace('"poly"', '"splat"'))
    assert cli("warm", path, "--cache-dir", cache).exit_code == 0

    def explained(function: str, spec: str) -> str:
        r = cli("explain", module, function, spec, "--cache-dir", cache)
        assert r.exit_code == 0, r.output
        return r.output

    other = explained("other", "f32[N]; f32[N]")  # nearest: splat's entry, of an unedited file
    assert "function: splat stored, other asked" in other and "changed" not in other
    assert "changed" not in explained("splat", "f32[N] grad")
    module.write_text(text.replace("x + y", "x - y"))  # not what splat reaches
    assert "hit: stored with kernels forward" in explained("splat", "f32[N]")
    module.write_text(text.replace("x * 2.0", "x * 3.0"))
    changed = "- Slang file splat.slang changed in what splat reaches"
    assert changed in explained("splat", "f32[N]") and changed in explained(
        "other", "f32[N]; f32[N]"
    )


def test_a_module_that_does_not_compile_fails_warm_and_explain_with_slangs_diagnostics(tmp_path):
    broken, cache = tmp_path / "broken.slang", tmp_path / "c"
    broken.write_text("float f(float x) {\n  return x +;\n}\n")
    path = manifest(tmp_path, '["f32[N]"]')
    path.write_text(path.read_text().replace(str(SHADER), str(broken)).replace('"poly"', '"f"'))
    first = f"SlangCompileError: {broken}:2:13: error[E20002]: syntax error"
    table = cli("warm", path, "--cache-dir", cache)
    assert table.exit_code == 1 and first in table.output, table.output
    # In worker processes, as JSON: the same line.
    command = [sys.executable, "-m", "slangspec", "warm", str(path), "--jobs", "2", "--json"]
    out = subprocess.run([*command, "--cache-dir", str(cache)], capture_output=True, text=True)
    assert out.returncode == 1 and json.loads(out.stdout)[0]["detail"] == first, out.stderr
    explained = cli("explain", broken, "f", "f32[N]", "--cache-dir", cache)
    assert explained.exit_code == 1
    assert explained.output.startswith(f"Error: MODULE {broken}: Slang compilation failed:\n")
    assert explained.output.count(f"{broken}:2:13") == explained.output.count("E20002") == 1


def test_python_dash_m_and_version():
    out = subprocess.run(
        [sys.executable, "-m", "slangspec", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and slangspec.__version__ in out.stdout


def test_the_readme_example_manifest_warms(tmp_path):
    example = HERE.parent / "examples" / "warm.toml"
    r = cli("warm", example, "--cache-dir", tmp_path / "c", "--json")
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in json.loads(r.stdout)] == ["built", "built"]
    assert cli("warm", example, "--dry-run", "--cache-dir", tmp_path / "c").exit_code == 0


def test_evict_filters_each_select_what_they_say(tmp_path):
    cache = tmp_path / "c"
    specs = '["f32[1] grad", "f32[N] nograd"], ["f32[1] grad", "f32[N, 2] nograd"]'
    m = manifest(tmp_path, specs, "")
    m.write_text(
        m.read_text() + '\n[[module.function]]\nname = "twin"\n'
        'specializations = [["f32[N] grad", "f32[N] nograd"]]\n'
    )
    assert cli("warm", m, "--cache-dir", cache).exit_code == 0

    def evict(*args):
        r = cli("cache", "evict", *args, "--cache-dir", cache, "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["evicted"]

    def functions():
        return sorted(e["function"] for e in slangspec.Cache(cache).entries())

    assert evict("--older-than", "1h") == []
    assert evict("--module", "other") == []
    other_device = "vulkan" if os.environ.get("SLANGSPEC_DEVICE") == "cuda" else "cuda"
    assert evict("--device", other_device) == []
    assert len(evict("--function", "twin")) == 1
    assert functions() == ["poly", "poly"]
    # Below what the cache holds beside its kernels (the imported modules' IR, the shader cache,
    # the index): no eviction gets there, so none is made.
    refused = cli("cache", "evict", "--max-size", "1", "--cache-dir", cache)
    assert refused.exit_code == 1 and "none was evicted" in refused.output, refused.output
    assert functions() == ["poly", "poly"]
    oldest = slangspec.Cache(cache).entries()[-1]["key"]
    assert evict("--max-size", str(slangspec.Cache(cache).disk.size() - 1))[0] == oldest


def test_explain_rejects_a_malformed_define(tmp_path):
    r = cli(
        "explain",
        SHADER,
        "poly",
        "f32[N] grad; float",
        "-D",
        "NOVALUE",
        "--cache-dir",
        tmp_path / "c",
    )
    assert r.exit_code == 2 and "expected NAME=VALUE" in r.output


READERS = [
    ["--help"],
    ["cache", "ls"],
    ["cache", "ls", "--json"],
    ["cache", "stats", "--json"],
    ["cache", "show", "0"],
    ["cache", "evict", "--older-than", "30d"],
    ["cache", "clear", "--yes"],
    ["cache", "export", "BUNDLE"],
]


@pytest.fixture(scope="module")
def one_entry(tmp_path_factory) -> Path:
    """A cache root a process left holding one call's kernels."""
    cache = tmp_path_factory.mktemp("one_entry") / "cache"
    assert run(cache, "--signatures", "1")["ok"]
    return cache


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_commands_that_read_the_cache_import_neither_torch_nor_slangpy(tmp_path, one_entry, args):
    cache = copied(one_entry, tmp_path / "cache")
    bundle = tmp_path / "bundle.json"
    args = [str(bundle) if a == "BUNDLE" else a for a in args]
    code = (
        "import sys\n"
        "from slangspec.cli import main\n"
        "try:\n"
        f"    main({[*args, '--cache-dir', str(cache)] if args != ['--help'] else args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'slangpy', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
    if "export" in args:
        assert json.loads(bundle.read_text())["entries"]


def test_import_slangspec_imports_neither_torch_nor_slangpy():
    code = (
        "import sys, slangspec\n"
        "slangspec.Cache\n"
        "print([m for m in ('torch', 'slangpy') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_json_output_holds_only_json_when_native_code_prints(tmp_path):
    # slangpy's logger prints its warnings on stdout (on CUDA: every device it opens).
    code = (
        "import os\n"
        "from slangspec import Cache\n"
        "stats = Cache.stats\n"
        "def noisy(self):\n"
        "    os.write(1, b'[WARN] what native code prints\\n')\n"
        "    return stats(self)\n"
        "Cache.stats = noisy\n"
        "from slangspec.cli import main\n"
        f"main(['cache', 'stats', '--json', '--cache-dir', {str(tmp_path / 'c')!r}])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["entries"] == 0
    assert "[WARN] what native code prints" in out.stderr


SURFACE = HERE / "shaders" / "surface.slang"


def test_struct_specs_read_as_the_signature_of_the_dict_they_stand_for(tmp_path):
    from slangspec.aot.warm import arg_signature

    ray = {"origin": torch_ones(7, 3, grad=True), "dir": torch_ones(7, 3)}
    want = slangspec.signature(ray)
    assert arg_signature({"origin": "f32[N, 3] grad", "dir": "f32[N, 3]"}) == want
    assert arg_signature("{origin: f32[N, 3] grad, dir: f32[N, 3]}") == want
    assert arg_signature(want) == want
    scene = {"body": {"mass": torch_ones(3), "frame": torch_ones(3, 3, 3)}, "weights": 0.5}
    spec = "{body: {mass: f32[3], frame: f32[3, 3, 3]}, weights: float}"
    assert arg_signature(spec) == slangspec.signature(scene)
    with pytest.raises(ValueError, match="expected 'field: spec'"):
        arg_signature("{origin f32[N, 3]}")


def torch_ones(*shape: int, grad: bool = False):
    import torch

    return torch.ones(*shape, requires_grad=grad)


def test_a_manifest_names_parameters_and_struct_fields_and_explain_does_too(tmp_path):
    cache = tmp_path / "c"
    path = tmp_path / "warm.toml"
    path.write_text(f"""
[[module]]
path = "{SURFACE}"

[[module.function]]
name = "reflect_ray"
masks = "none"
specializations = [
    {{ n = "f32[N, 3]", r = {{ origin = "f32[N, 3] grad", dir = "f32[N, 3]" }} }},
]
""")
    r = cli("warm", path, "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.output
    [item] = json.loads(r.stdout)
    sf = slangspec.load(SURFACE, cache_dir=str(cache))
    ray = {"origin": torch_ones(7, 3, grad=True), "dir": torch_ones(7, 3)}
    assert item["signature"] == sf.reflect_ray.signature(ray, torch_ones(7, 3))
    args = ["explain", SURFACE, "reflect_ray"]
    hit = cli(
        *args,
        "n=f32[N, 3]; r={origin: f32[N, 3] grad, dir: f32[N, 3]}",
        "--cache-dir",
        cache,
        "--json",
    )
    assert json.loads(hit.stdout)["hit"], hit.output
    miss = cli(
        *args, "{origin: f32[N, 3] grad, dir: f32[N, 3] grad}; f32[N, 3]", "--cache-dir", cache
    )
    assert "grad bit of argument 1 field dir: G0 stored, G1 asked" in miss.output
    unknown = cli(*args, "{origin: f32[N, 3], dir: f32[N, 3]}; m=f32[N, 3]", "--cache-dir", cache)
    assert unknown.exit_code == 2 and "has no parameter 'm'" in unknown.output
    path.write_text(path.read_text().replace("n = ", "m = "))
    bad = cli("warm", path, "--cache-dir", cache)
    assert bad.exit_code == 2 and "has no parameter 'm'" in bad.output


def test_warm_explains_its_statuses_and_takes_the_usable_cpus_less_one_by_default():
    from slangspec.cli.warm import default_jobs

    assert default_jobs() == max(1, len(os.sched_getaffinity(0)) - 1)
    help_text = " ".join(CliRunner().invoke(main, ["warm", "--help"]).output.split())
    for words in ("built (compiled now)", "cached (all there before this run", "failed"):
        assert words in help_text
    assert "counts specializations, not kernels" in help_text
    assert "the usable CPUs less one" in help_text


def test_explain_refuses_an_unknown_function_and_a_call_it_could_not_make(tmp_path):
    args = ["explain", SHADER, "-I", LIB, "--cache-dir", tmp_path]
    unknown = cli(args[0], args[1], "nope", "f32[1]", *args[2:])
    assert unknown.exit_code == 2 and "FUNCTION: module 'cached' has no function 'nope'" in (
        unknown.output
    )
    wrong = cli(args[0], args[1], "poly", "f32[1] grad", *args[2:])  # poly takes two
    assert wrong.exit_code == 2 and "SIGNATURE: cached::poly: expected 2 arguments" in wrong.output


def test_a_misspelt_setting_is_said_once_by_the_command_not_by_each_worker(tmp_path):
    env = {**os.environ, "SLANGSPEC_CACHE_MAX_SIZE": "1G"}
    command = [sys.executable, "-m", "slangspec", "warm", str(manifest(tmp_path)), "--dry-run"]
    command += ["--jobs", "2", "--cache-dir", str(tmp_path / "empty")]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1, out.stderr  # nothing is there yet
    said = (
        "specialize: SLANGSPEC_CACHE_MAX_SIZE is set but is no slangspec setting, so it changes "
        "nothing; did you mean SLANGSPEC_CACHE_SIZE?"
    )
    assert out.stderr.count("SLANGSPEC_CACHE_MAX_SIZE") == 1 and said in out.stderr, out.stderr
