"""Torture: everything that can go wrong around a cache, counted. Every trial ends as one of
ok, wrong (a result that differs from torch's, or a kept cubin unlike the one a process
building by itself keeps), crashed (killed by a signal), hung (past the time limit, or a wait
on the compile server past its bound), unexpected (an exception that is not the clear
TypeError/ValueError the input deserved) or ran code (a row or bundle made slangspec run what
it carried).

    python benchmarks/torture.py [--device vulkan|cuda] [--quick] [--markdown FILE]

Trials, on the module the cache tests use (``tests/shaders/cached.slang``):

- concurrent: cold processes sharing one cache, alone, under repeated ``cache clear`` and under
  repeated ``cache evict --max-size``;
- killed: a process SIGKILLed at a random moment while it builds, then a fresh one must compute
  right (and not wait out the dead one's lease);
- damaged: every kind of file the cache keeps (index, kernel sources, binaries, compiled modules,
  shader-cache snapshots, part directories) flipped, truncated, deleted, overwritten or replaced
  by a directory, then a process must compute right;
- fuzzed: calls with random arguments: right results, or a TypeError/ValueError naming the
  function, never anything else;
- tampered: index rows that would unpickle or touch files outside the index, bundles whose
  kernels are not what their plans generate, and signed bundles carrying a binary swapped for
  another kernel's or signed with another secret;
- remote: against a real redis-server, cold nodes (each with a local cache of its own) sharing
  it; a node SIGKILLed while it builds under the server's lease, then a fresh node (timed); and
  the server's content or the server itself spoiled (entries that do not decode, garbled plans,
  names that are not blob names, damaged and oversized blobs, leases that never lapse, facts
  without a MAC, kernels swapped between entries on a server trusted without a secret, then
  the node's own cache with the server emptied, a node with another secret, the server paused,
  flushed or killed mid-run), then a fresh node (timed);
- server: clients that miss, against a real compile server (``specialize serve``) of a cache
  root per trial: on CUDA they call and compare with torch; without a GPU they build sm_90
  cubins and call nothing (``SLANGSPEC_CUDA_ARCH``). The server SIGKILLed mid-build, while
  stopped with a client waiting, or at a random moment; stopped (SIGSTOP) before a client asks
  or mid-build; its socket removed or replaced by a regular file, before or mid-build; a fake
  server at the socket answering frames that are not JSON, past the size bound, not an object,
  of the wrong content or cut short, closing unanswered, sending heartbeats and never a
  reply, or trickling a reply a byte every half second; two clients racing to start it (one
  server stays, and serves a later client); the cache cleared every 0.3 s while it serves (a
  later client is served). Every cubin a client keeps must be the one a process building by
  itself keeps (wrong otherwise); a client may wait on a failing server 2.5 s at most (two
  seconds without a whole message, after half a second to connect), on one that only sends
  heartbeats the trials' ``SLANGSPEC_CACHE_LEASE`` of 5 s more (hung otherwise); ``specialize
  cache verify`` must pass on each trial's cache (one more unexpected otherwise). Each wait is
  printed;
- hostile: mangled function names (unbalanced brackets, call expressions, statements, comments,
  other characters) through lookups and ``hasattr`` in a few processes: each an
  UnknownFunctionError or the function it names, no process crashed, no kernel holding the
  name's text; defines that would be read as more than a define, at load and in a manifest;
  a module that begins with a byte order mark; a hostile Redis server (``tests/hostile_redis.py``)
  as the remote tier of a fresh node per way it answers (arrays nested 100,000 deep, lengths of
  10^14 and 4*10^9 bytes, 4*10^9 elements, a value of 100 MB, a line that never ends, a reply
  trickled a byte every 0.3 s, garbage): each must compute right, under the default deadline,
  and peak within 64 MiB of a node without a remote (unexpected otherwise). Each node's time
  and memory are printed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))
from compile_servers import frame  # noqa: E402
from workers import worker  # noqa: E402  (tests/jit_worker.py runs each process)

OUTCOMES = ("ok", "wrong", "crashed", "hung", "unexpected", "ran code")
LIMIT_S = 180.0
TRIALS = (
    "concurrent",
    "killed",
    "damaged",
    "fuzzed",
    "tampered",
    "remote",
    "server",
    "hostile",
)


FAILURES: list[str] = []
"""The last error line of every trial that did not end ok, with what the trial did."""


def outcome(proc: subprocess.Popen, what: str = "", reports: list[dict] | None = None) -> str:
    """How one worker process ended."""
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        FAILURES.append(f"hung: {what}")
        return "hung"
    if proc.returncode < 0:
        FAILURES.append(f"crashed ({proc.returncode}): {what}")
        return "crashed"
    lines = out.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        report = None
    if report is not None and reports is not None:
        reports.append(report)
    if report is not None and report["ok"] and proc.returncode == 0:
        return "ok"
    errors = [line for line in err.splitlines() if line.strip() and "WARN" not in line]
    raised = [line for line in errors if "Error" in line or "Exception" in line][-1:]
    FAILURES.append(f"{what}: {' / '.join(raised + errors[-1:])[:400] or 'no output'}")
    return "unexpected" if report is None else "wrong"


def concurrent(cache_root: Path, rounds: int, processes: int) -> Counter[str]:
    import slangspec

    counts: Counter[str] = Counter()
    for mode in ("alone", "clear", "evict"):
        for r in range(rounds):
            cache = cache_root / f"concurrent-{mode}-{r}"
            stop = threading.Event()

            def disturb(
                cache: Path = cache, mode: str = mode, stop: threading.Event = stop
            ) -> None:
                while not stop.wait(0.3):
                    c = slangspec.Cache(cache)
                    if mode == "clear":
                        c.clear()
                    else:
                        # Two thirds of the kernels; refused when slangpy's library landed
                        # between the look and the eviction.
                        with contextlib.suppress(ValueError):
                            c.evict(max_size=c.disk.size() - 2 * c.disk.kernel_bytes() // 3)

            thread = threading.Thread(target=disturb) if mode != "alone" else None
            if thread:
                thread.start()
            procs = [worker(cache, "--signatures", "4") for _ in range(processes)]
            counts.update(outcome(p, f"{mode} round {r}") for p in procs)
            stop.set()
            if thread:
                thread.join()
    return counts


def killed(cache_root: Path, trials: int, rng: random.Random) -> tuple[Counter[str], float, float]:
    """Outcomes of the processes that follow a SIGKILLed one, the longest follow-up, and the
    longest any follow-up waited on a compile lease."""
    counts: Counter[str] = Counter()
    cache = cache_root / "killed"
    worst = 0.0
    reports: list[dict] = []
    for i in range(trials):
        victim = worker(cache, "--signatures", str(2 + i % 8))
        time.sleep(rng.uniform(0.3, 3.0))
        victim.send_signal(signal.SIGKILL)
        victim.communicate()
        start = time.monotonic()
        counts[outcome(worker(cache, "--signatures", str(2 + i % 8)), "", reports)] += 1
        worst = max(worst, time.monotonic() - start)
    return counts, worst, max((r["lease_wait_s"] for r in reports), default=0.0)


def _flip(path: Path, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    for _ in range(max(1, len(data) // 512)):
        if data:
            data[rng.randrange(len(data))] ^= 0x5A
    path.write_bytes(bytes(data))


def _damage(path: Path, how: str, rng: random.Random) -> None:
    if how == "flip":
        _flip(path, rng)
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[: rng.randrange(max(1, path.stat().st_size))])
    elif how == "delete":
        path.unlink()
    elif how == "garbage":
        path.write_bytes(os.urandom(rng.randrange(1, 4096)))
    else:  # a directory where the file belongs
        path.unlink()
        path.mkdir()


KINDS = {
    "index": lambda c: [c / "index" / "cache.db"],
    "kernel source": lambda c: list((c / "kernels").glob("*.slang")),
    "binary": lambda c: list((c / "binaries").glob("*.cubin")),
    "compiled module": lambda c: list((c / "slang").rglob("*.slang-module")),
    "shader cache": lambda c: [p for p in (c / "shaders").glob("*") if p.is_file()],
}


def damaged(cache_root: Path, trials: int, rng: random.Random, processes: int) -> Counter[str]:
    """Damage is drawn in order (the seed decides it); the fresh processes then run
    ``processes`` at a time, each on its own copy."""
    template = cache_root / "template"
    if outcome(worker(template, "--signatures", "3")) != "ok":
        raise RuntimeError("could not fill the template cache")
    kinds = [k for k, files in KINDS.items() if files(template)] + ["part"]
    cases: list[tuple[Path, str]] = []
    for i in range(trials):
        cache = cache_root / f"damaged-{i}"
        shutil.copytree(template, cache)
        kind = kinds[i % len(kinds)]
        if kind == "part":
            how = rng.choice(["kernels", "binaries", "slang", "shaders", "index"])
            shutil.rmtree(cache / how, ignore_errors=True)
            (cache / how).write_text("not a directory")
        else:
            how = rng.choice(["flip", "truncate", "delete", "garbage", "directory"])
            for path in rng.sample(KINDS[kind](cache), k=max(1, len(KINDS[kind](cache)) // 2)):
                _damage(path, how, rng)
        cases.append((cache, f"{kind} {how}"))

    def trial(case: tuple[Path, str]) -> str:
        cache, what = case
        result = outcome(worker(cache, "--signatures", "3"), what)
        shutil.rmtree(cache, ignore_errors=True)
        return result

    with ThreadPoolExecutor(max(1, processes)) as pool:
        return Counter(pool.map(trial, cases))


def _junk(rng: random.Random, tdev: str):
    """A random argument: usually a tensor, sometimes something slangspec must refuse."""
    pick = rng.random()
    if pick < 0.6:
        dtype = rng.choice([torch.float32] * 4 + [torch.float16, torch.float64, torch.int32])
        shape = tuple(rng.choice([1, 2, 3, 5]) for _ in range(rng.randrange(0, 4)))
        t = (torch.randn(shape) * 3).to(dtype).to(tdev)
        if dtype.is_floating_point and rng.random() < 0.4:
            t.requires_grad_(True)
        if rng.random() < 0.15 and t.dim() >= 2:
            t = t.transpose(0, 1)
        return t
    return rng.choice(
        [
            None,
            "text",
            [1.0, 2.0],
            {"a": 1},
            1 + 2j,
            3,
            2.5,
            True,
            2**70,
            np.ones(3, np.float32),
            np.ones((2, 2), np.float64),
            torch.ones(3, dtype=torch.complex64),
            torch.ones(2, 2).to_sparse(),
        ]
    )


def _reference(value, tdev: str) -> torch.Tensor:
    """An accepted argument as torch computes with it: Python numbers as float32 uniforms, a
    list of them spread over a call dimension."""
    if isinstance(value, (int, float, list)):
        return torch.tensor(value, dtype=torch.float32, device=tdev)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value).to(tdev)
    return value.detach()


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor({value.dtype}, {tuple(value.shape)}, strides {value.stride()})"
    return repr(value)


def fuzzed(cache_root: Path, calls: int, rng: random.Random, tdev: str) -> Counter[str]:
    import slangspec

    m = slangspec.load(
        TESTS / "shaders" / "cached.slang",
        include_paths=[TESTS / "slang_lib"],
        cache_dir=cache_root / "fuzzed",
    )
    counts: Counter[str] = Counter()
    for _ in range(calls):
        a, x = _junk(rng, tdev), _junk(rng, tdev)
        try:
            y = m.poly(a, x)
        except (TypeError, ValueError) as exc:
            counts["ok" if "poly" in str(exc) else "unexpected"] += 1
            continue
        except Exception:
            counts["unexpected"] += 1
            continue
        ta, tx = (_reference(v, tdev) for v in (a, x))
        want = ta * tx * tx + 3 * ta
        same = y.shape == want.shape and torch.allclose(y, want, rtol=1e-4, atol=1e-4)
        if not same:
            FAILURES.append(f"wrong: poly({_describe(a)}, {_describe(x)}) = {y!r}, want {want!r}")
        counts["ok" if same else "wrong"] += 1
    return counts


def tampered(cache_root: Path, trials: int) -> Counter[str]:
    import slangspec
    from slangspec.aot.bundle import export_bundle, import_bundle

    counts: Counter[str] = Counter()
    source = cache_root / "tamper-source"
    if outcome(worker(source, "--signatures", "2")) != "ok":
        raise RuntimeError("could not fill the cache to tamper with")
    for i in range(trials):
        cache = cache_root / f"tampered-{i}"
        shutil.copytree(source, cache)
        marker, victim = cache_root / f"ran-{i}", cache_root / f"victim-{i}"
        victim.write_text("keep")
        pickled = b"cbuiltins\nopen\n(V" + str(marker).encode() + b"\nVw\ntR."
        with sqlite3.connect(cache / "index" / "cache.db") as db:
            rows = db.execute("SELECT rowid, key FROM Cache WHERE raw = 1").fetchall()
            for rowid, key in rows:
                if i % 4 == 0:
                    db.execute(
                        "UPDATE Cache SET mode = 4, value = ? WHERE rowid = ?", (pickled, rowid)
                    )
                elif i % 4 == 1 and json.loads(zlib.decompress(key)).startswith("entry:"):
                    name = os.path.relpath(victim, cache / "index")
                    db.execute(
                        "UPDATE Cache SET mode = 2, filename = ?, value = NULL WHERE rowid = ?",
                        (name, rowid),
                    )
        if i % 4 == 3:
            counts[_forged_binary(cache_root, source, i)] += 1
            continue
        if i % 4 == 2:
            bundle = cache_root / f"bundle-{i}.json"
            export_bundle(slangspec.Cache(source), bundle)
            data = json.loads(bundle.read_text())
            first, second = data["entries"][:2]
            first["kernels"]["forward"] = second["kernels"]["forward"]
            bundle.write_text(json.dumps(data))
            target = cache_root / f"imported-{i}"
            try:
                import_bundle(slangspec.Cache(target), bundle)
                counts["ran code"] += 1  # a tampered kernel would have been served
                continue
            except ValueError:
                pass
        result = outcome(worker(cache, "--signatures", "2"))
        slangspec.Cache(cache).verify(repair=True)
        if marker.exists() or not victim.exists():
            result = "ran code"
        counts[result] += 1
    return counts


def _forged_binary(cache_root: Path, source: Path, i: int) -> str:
    """Import a signed bundle whose first entry's forward binary was swapped for another kernel's
    (or, where there are no binaries, given one signed with another secret), then compute."""
    import slangspec
    from slangspec.aot.bundle import export_bundle, import_bundle
    from slangspec.cache_store import travel
    from slangspec.cache_store.keys import blob_name

    bundle, target = cache_root / f"signed-{i}.json", cache_root / f"imported-{i}"
    os.environ["SLANGSPEC_SECRET"] = "the secret of this cluster"
    try:
        export_bundle(slangspec.Cache(source), bundle)
        data = json.loads(bundle.read_text())
        first, second = data["entries"][:2]
        if first["binaries"] and second["binaries"]:
            first["binaries"]["forward"] = second["binaries"]["forward"]
        else:
            forged = b"\x7fELF forged"
            name = blob_name("binary", forged)
            first["binaries"] = {"forward": {"file": name, "group": 32, "layout": {}}}
            blobs = {n: text.encode() for n, text in data["sources"].items()}
            data["entries"][0] = travel.sealed(
                first, {**blobs, name: forged}, b"some other cluster's secret"
            )
            data["binaries"] = {name: base64.b64encode(forged).decode()}
        bundle.write_text(json.dumps(data))
        report = import_bundle(slangspec.Cache(target), bundle)
        if report["binaries"] > sum(len(e.get("binaries", {})) for e in data["entries"][1:]):
            return "ran code"  # the forged binary was taken
        return outcome(worker(target, "--signatures", "2"))
    finally:
        del os.environ["SLANGSPEC_SECRET"]


REMOTE_LEASE_S = 10.0
"""The lease bound the spoiled-server trials run under: no call may wait longer on one."""


def _spoil(client, how: str, rng: random.Random) -> None:
    """Spoil what the server holds after a node published, as ``how`` says."""
    from slangspec.cache_store.remote import PREFIX

    entry_keys = list(client.scan_iter(PREFIX + "*entry:*"))
    if how == "garbage entries":
        for k in entry_keys:
            client.set(k, rng.randbytes(200))
    elif how in ("garbled plans", "non-blob names"):
        for k in entry_keys:
            entry = json.loads(client.get(k))
            if how == "garbled plans":
                entry["plan"] = "{not a plan"
            else:
                entry["kernels"]["forward"] = "zz"
            client.set(k, json.dumps(entry))
    elif how in ("damaged blobs", "an oversized blob"):
        blobs = sorted(client.scan_iter(PREFIX + "*blob:*"))
        for k in blobs[:1] if how == "an oversized blob" else blobs:
            client.set(k, b"x" * ((64 << 20) + 1) if how == "an oversized blob" else b"junk")
    elif how == "leases that never lapse":
        for k in entry_keys:
            name = k.decode().split("entry:", 1)[1]
            prefix = k.decode().split("entry:", 1)[0]
            client.delete(k)
            client.set(f"{prefix}lease:{name}", "held by nobody")  # no expiry
    elif how == "facts without a MAC":
        for k in client.scan_iter(PREFIX + "*fact:functions:*"):
            client.set(k, json.dumps({"value": {"poly": False}}))
        for k in entry_keys:
            client.delete(k)
    elif how == "kernels swapped":
        rows = [(k, json.loads(client.get(k))) for k in entry_keys[:2]]
        if len(rows) == 2:
            (k1, e1), (k2, e2) = rows
            f1, f2 = e1["kernels"]["forward"], e2["kernels"]["forward"]
            e1["kernels"]["forward"], e2["kernels"]["forward"] = f2, f1
            client.set(k1, json.dumps(e1))
            client.set(k2, json.dumps(e2))
    elif how == "flushed":
        client.flushall()


def remote(
    cache_root: Path, rounds: int, processes: int, killings: int, rng: random.Random
) -> tuple[Counter[str], Counter[str], float, Counter[str], float]:
    """Trials against a real redis-server: outcomes of cold nodes sharing it; of the nodes that
    follow a SIGKILLed one, with the longest follow-up; of fresh nodes after the server was
    spoiled, with the longest of those."""
    from redis_server import RedisServer

    server = RedisServer(cache_root / "redis").start()
    env = {
        "SLANGSPEC_REMOTE": server.url,
        "SLANGSPEC_REMOTE_TRUST_ALL": "1",  # most nodes go without a secret
        "SLANGSPEC_CACHE_LEASE": str(REMOTE_LEASE_S),
    }
    node = iter(range(1 << 30))
    caches: list[Path] = []

    def fresh(
        extra: dict[str, str] | None = None, signatures: int = 2, *flags: str
    ) -> subprocess.Popen:
        caches.append(cache_root / f"node-{next(node)}")
        return worker(
            caches[-1], "--signatures", str(signatures), *flags, env={**env, **(extra or {})}
        )

    cold: Counter[str] = Counter()
    after_kill: Counter[str] = Counter()
    spoiled: Counter[str] = Counter()
    worst_kill = worst_spoiled = 0.0
    secret = {"SLANGSPEC_REMOTE_SECRET": "a shared secret of the torture cluster"}
    try:
        for r in range(rounds):
            server.client().flushall()
            procs = [fresh(signatures=4) for _ in range(processes)]
            cold.update(outcome(p, f"remote cold round {r}") for p in procs)
        for i in range(killings):
            server.client().flushall()
            victim = fresh(signatures=2 + i % 4)
            time.sleep(rng.uniform(0.3, 3.0))
            victim.send_signal(signal.SIGKILL)
            victim.communicate()
            start = time.monotonic()
            after_kill[outcome(fresh(signatures=2 + i % 4), f"after a killed node {i}")] += 1
            worst_kill = max(worst_kill, time.monotonic() - start)
        spoils = [
            "garbage entries",
            "garbled plans",
            "non-blob names",
            "damaged blobs",
            "an oversized blob",
            "leases that never lapse",
            "facts without a MAC",
            "kernels swapped",
            "another secret",
            "flushed",
            "paused mid-run",
            "flushed mid-run",
            "killed mid-run",
        ]
        for how in spoils:
            server.client().flushall()
            keys = secret if how == "facts without a MAC" else {}
            outcome(fresh(keys), f"seeding for {how}")
            _spoil(server.client(), how, rng)
            start = time.monotonic()
            if how == "another secret":
                spoiled[
                    outcome(fresh({"SLANGSPEC_REMOTE_SECRET": "another secret, mistyped"}))
                ] += 1
                how = "a correct node after another secret's"
            # After another secret's node, the cluster's own entries are all still there.
            flags = ("--forbid-compile",) if how.startswith("a correct node") else ()
            proc = fresh(keys, 2, *flags)
            if how.endswith("mid-run"):
                time.sleep(rng.uniform(0.2, 1.5))
                if how == "paused mid-run":
                    server.client().execute_command("CLIENT", "PAUSE", "5000", "ALL")
                elif how == "flushed mid-run":
                    server.client().flushall()
                else:
                    server.stop()
            spoiled[outcome(proc, f"server {how}")] += 1
            if how == "kernels swapped":
                # The server restored (here: emptied): the node's own cache holds nothing of it.
                server.client().flushall()
                spoiled[outcome(worker(caches[-1], "--signatures", "2"), "after swapped")] += 1
            took = time.monotonic() - start
            print(f"  remote, {how}: {took:.1f} s", flush=True)
            worst_spoiled = max(worst_spoiled, took)
            if how == "killed mid-run":
                server.start()
    finally:
        server.stop()
    return cold, after_kill, worst_kill, spoiled, worst_spoiled


SERVER_LEASE_S = 5.0
"""The lease bound the server trials' clients run under: the longest one waits on a server that
keeps working on one request (its heartbeats come, its reply does not)."""
SERVER_FAULTS = (
    "killed mid-build",
    "stopped, then killed while a client waits",
    "killed at a random moment",
    "stopped",
    "stopped mid-build",
    "socket removed",
    "socket replaced by a regular file",
    "socket removed mid-build",
    "reply not JSON",
    "reply oversized",
    "reply not an object",
    "reply of the wrong content",
    "reply cut short",
    "closed unanswered",
    "heartbeats, never a reply",
    "trickling, never a whole reply",
    "two clients starting it",
    "cache cleared while it serves",
)
_JUNK = {
    "reply not JSON": struct.pack("!I", 5) + b"hello",
    "reply oversized": struct.pack("!I", 0x7FFFFFFF) + b"x" * 64,
    "reply not an object": frame([1, 2, 3]),
    "reply of the wrong content": frame({"ok": True, "overloads": 7, "kernels": {"k": 1}}),
    "reply cut short": struct.pack("!I", 4096) + b"{",
    "closed unanswered": b"",
}


class ServerTrials:
    """The compile server's faults, each on a cache root of its own, its clients compared with
    a reference cache one process built by itself."""

    def __init__(self, cache_root: Path, tdev: str, rng: random.Random) -> None:
        from slangspec.compile.server.client import CONNECT_WAIT_S, REPLY_WAIT_S

        self.root = cache_root
        self.rng = rng
        self.run_dir = Path(tempfile.mkdtemp(prefix="ss-"))  # a socket's path has a bound
        self.env = {
            "XDG_RUNTIME_DIR": str(self.run_dir),
            "SLANGSPEC_CACHE_LEASE": str(SERVER_LEASE_S),
        }
        # Without a GPU, clients build for sm_90 and call nothing: the cubins are compared.
        self.flags: tuple[str, ...] = ()
        if tdev != "cuda":
            self.env |= {"SLANGSPEC_DEVICE": "cuda", "SLANGSPEC_CUDA_ARCH": "sm_90"}
            self.flags = ("--build-only",)
        self.bound = REPLY_WAIT_S + CONNECT_WAIT_S
        self.counts: Counter[str] = Counter()
        self.waits: dict[str, float] = {}
        """The longest any client of a trial waited on the server, by trial."""
        self.compared = 0
        """Binaries compared with the reference's, over every client."""
        self.reference: dict[tuple[str, str], str] = {}
        self.caches = iter(range(1 << 30))

    def client(self, cache: Path, mode: str, signatures: int) -> subprocess.Popen:
        env = {**self.env, "SLANGSPEC_COMPILE_SERVER": mode}
        return worker(cache, "--signatures", str(signatures), *self.flags, env=env)

    def serving(self, cache: Path) -> subprocess.Popen:
        from compile_servers import serving

        env = {**os.environ, **self.env, "SLANGSPEC_COMPILE_SERVER": "off"}
        return serving(cache, env, self.run_dir / "servers.log")

    def judged(self, proc: subprocess.Popen, cache: Path, what: str, bound: float) -> dict:
        """Count how ``proc`` ended: besides ``outcome``, wrong for a binary that is not the
        reference's, hung for a wait on the server past ``bound``; its report, or {}."""
        reports: list[dict] = []
        got = outcome(proc, what, reports)
        report = reports[-1] if reports else {}
        binaries = _binaries(cache)
        self.compared += len(binaries)
        differing = [k for k, name in binaries.items() if self.reference.get(k) != name]
        if got == "ok" and differing:
            FAILURES.append(f"wrong: {what}: binaries unlike the reference's: {differing}")
            got = "wrong"
        waited = report.get("server_wait_s", 0.0)
        self.waits[what] = max(self.waits.get(what, 0.0), waited)
        if got == "ok" and waited > bound:
            FAILURES.append(f"hung: {what}: waited {waited:.2f} s on the server, over {bound} s")
            got = "hung"
        self.counts[got] += 1
        return report

    def verified(self, cache: Path, what: str) -> None:
        """``specialize cache verify`` on ``cache``: a trial whose cache it finds a problem in
        counts once more, as unexpected."""
        done = subprocess.run(
            [sys.executable, "-m", "slangspec", "cache", "verify", "--cache-dir", str(cache)],
            capture_output=True,
            text=True,
            timeout=LIMIT_S,
        )
        if done.returncode != 0:
            self.counts["unexpected"] += 1
            FAILURES.append(f"cache verify after {what}: {done.stdout[-300:]}{done.stderr[-300:]}")

    def gone(self) -> None:
        """Kill every server of this run, stopped ones included."""
        from compile_servers import servers

        for pid in servers(self.run_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def run(self, rounds: int) -> None:
        from compile_servers import FakeServer
        from slangspec.compile.server.place import server_place

        held = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = str(self.run_dir)  # where this process finds them too
        try:
            reference = self.root / "server-reference"
            if outcome(self.client(reference, "off", 4), "server reference") != "ok":
                raise RuntimeError("could not build the reference for the server trials")
            self.reference = _binaries(reference)
            for r in range(rounds):
                for how in SERVER_FAULTS:
                    cache = self.root / f"server-{next(self.caches)}"
                    start = time.monotonic()
                    what = f"server {how}" + (f", round {r}" if r else "")
                    if how in _JUNK or how.startswith(("heartbeats", "trickling")):
                        path = server_place(cache).socket
                        beating = how.startswith("heartbeats")
                        trickle = 0.5 if how.startswith("trickling") else 0.0
                        with FakeServer(path, _JUNK.get(how, b""), beating, trickle=trickle):
                            bound = self.bound + (SERVER_LEASE_S if beating else 0.0)
                            self.judged(self.client(cache, "use", 2), cache, what, bound)
                    elif how == "two clients starting it":
                        self.race(cache, what)
                    elif how == "cache cleared while it serves":
                        self.cleared(cache, what)
                    else:
                        self.fault(cache, how, what)
                    self.gone()
                    self.verified(cache, what)
                    took = time.monotonic() - start
                    print(
                        f"  {what}: waited {self.waits.get(what, 0.0):.2f} s on the server, "
                        f"{took:.1f} s in all",
                        flush=True,
                    )
        finally:
            self.gone()
            if held is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = held
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def fault(self, cache: Path, how: str, what: str) -> None:
        """A real server killed, stopped or its socket taken away: before a client asks it,
        while it works for one (once a connection is seen at its socket), or at a random
        moment of a client's run."""
        from slangspec.compile.server.place import server_place

        server = self.serving(cache)
        path = server_place(cache).socket
        deadline = time.monotonic() + LIMIT_S
        # Until the server closes its end of the status it answered when it started.
        while _connections(path) > 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        if how.startswith("stopped") and how != "stopped mid-build":
            os.kill(server.pid, signal.SIGSTOP)
        elif how in ("socket removed", "socket replaced by a regular file"):
            path.unlink()
            if how.endswith("regular file"):
                path.write_text("not a socket")
        proc = self.client(cache, "use", self.rng.randint(1, 4))
        if how == "killed at a random moment":
            time.sleep(self.rng.uniform(0.1, 2.0))
            server.kill()
        elif how.endswith(("mid-build", "waits")) and _asked(path, proc):
            time.sleep(self.rng.uniform(0.0, 1.5 if how.endswith("waits") else 0.2))
            if how.startswith("socket"):
                path.unlink(missing_ok=True)
            elif how == "stopped mid-build":
                os.kill(server.pid, signal.SIGSTOP)
            else:
                server.kill()
        self.judged(proc, cache, what, self.bound)
        if how.startswith("socket"):
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                FAILURES.append(f"hung: {what}: the server stayed")
                self.counts["hung"] += 1

    def race(self, cache: Path, what: str) -> None:
        """Two clients start a server at once: one stays, and a later client is served."""
        from compile_servers import servers
        from slangspec.compile.server import client as server_client

        for proc in [self.client(cache, "auto", 1) for _ in range(2)]:
            self.judged(proc, cache, what, self.bound)
        deadline = time.monotonic() + 60
        while (server_client.status(cache) is None or len(servers(self.run_dir)) != 1) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        running = len(servers(self.run_dir))
        later = self.judged(self.client(cache, "auto", 2), cache, f"{what}, later", self.bound)
        counts = later.get("counts", {})
        if running != 1 or not counts.get("served") or counts.get("kernel"):
            FAILURES.append(f"unexpected: {what}: {running} servers, the later client {counts}")
            self.counts["unexpected"] += 1

    def cleared(self, cache: Path, what: str) -> None:
        """Clients of a server while the cache is cleared every 0.3 s, then one that it
        serves."""
        import slangspec

        self.serving(cache)
        stop = threading.Event()

        def clear() -> None:
            while not stop.wait(0.3):
                slangspec.Cache(cache).clear()

        thread = threading.Thread(target=clear)
        thread.start()
        try:
            procs = [self.client(cache, "use", self.rng.randint(2, 4)) for _ in range(2)]
            for proc in procs:
                self.judged(proc, cache, what, self.bound)
        finally:
            stop.set()
            thread.join()
        slangspec.Cache(cache).clear()
        after = self.judged(self.client(cache, "use", 2), cache, f"{what}, after", self.bound)
        counts = after.get("counts", {})
        if not counts.get("served") or counts.get("kernel"):
            FAILURES.append(f"unexpected: {what}: the client after the clearing: {counts}")
            self.counts["unexpected"] += 1


def _connections(path: Path) -> int:
    """How many connections to the socket at ``path`` are open: the kernel lists each beside
    the listener, with the listener's path."""
    with open("/proc/net/unix") as table:
        return sum(line.rstrip().endswith(str(path)) for line in table) - 1


def _asked(path: Path, client: subprocess.Popen) -> bool:
    """Wait until a connection to the socket at ``path`` is open; False when ``client`` ended
    first."""
    deadline = time.monotonic() + LIMIT_S
    while client.poll() is None and time.monotonic() < deadline:
        if _connections(path) > 0:
            return True
        time.sleep(0.005)
    return False


def _binaries(cache: Path) -> dict[tuple[str, str], str]:
    """The blob name of every kernel binary ``cache``'s entries keep, by key and label."""
    import slangspec

    return {
        (key, label): binary["file"]
        for key, row in slangspec.Cache(cache).rows()
        for label, binary in (row or {}).get("binaries", {}).items()
    }


_NAMES_CHILD = """
import json, sys
import slangspec
from hostile import SOURCE
from slangspec.signatures.function_ref import FunctionNameError, canonical_name
from slangspec.runtime.module_base import UnknownFunctionError

m = slangspec.load_source("hostile", SOURCE, cache_dir=sys.argv[1])
outcomes = []
for name in json.loads(sys.stdin.read()):
    try:
        intended = canonical_name(name)
    except FunctionNameError:
        intended = None
    try:
        found = m[name].name
    except UnknownFunctionError:
        found = None
    known = hasattr(m, name)
    if intended is None or "." in intended:  # a method of a struct the module does not have
        ok = found is None and not known
    else:
        ok = found == intended and known
    outcomes.append("ok" if ok else "unexpected")
print(json.dumps(outcomes))
"""


def hostile(cache_root: Path, names: int, processes: int) -> Counter[str]:
    """Mangled names looked up in ``processes`` processes at once; a process killed by a signal
    counts every name it held as crashed."""
    from hostile import ISSUE_NAMES, mangled_names

    cache = cache_root / "hostile"
    every = [*ISSUE_NAMES, *mangled_names(names)]
    chunks = [every[k::processes] for k in range(processes)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _NAMES_CHILD, str(cache)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in chunks
    ]
    counts: Counter[str] = Counter()
    for proc, chunk in zip(procs, chunks, strict=True):
        try:
            out, err = proc.communicate(json.dumps(chunk), timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            FAILURES.append(f"hung: names {chunk[:3]!r}...")
            counts["hung"] += len(chunk)
            continue
        if proc.returncode < 0:
            FAILURES.append(f"crashed ({proc.returncode}): names {chunk[:3]!r}...")
            counts["crashed"] += len(chunk)
            continue
        try:
            outcomes = json.loads(out.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            FAILURES.append(f"names: {err.strip().splitlines()[-1:] or 'no output'}")
            counts["unexpected"] += len(chunk)
            continue
        for name, got in zip(chunk, outcomes, strict=True):
            if got != "ok":
                FAILURES.append(f"{got}: name {name!r}")
            counts[got] += 1
    kernels = [p.read_text() for p in cache.rglob("k_*.slang")]
    for name in every:
        if not name.isidentifier() and any(name.strip() in k for k in kernels):
            FAILURES.append(f"ran code: a kernel holds {name!r}")
            counts["ran code"] += 1
            counts["ok"] -= 1
    return counts


EXHAUSTED_MIB = 64
"""How much more memory than a node without a remote a node of a hostile server may peak at."""


def hostile_redis(cache_root: Path, processes: int) -> tuple[Counter[str], float, float]:
    """A fresh node per way the hostile Redis server answers, ``processes`` at a time; the
    outcomes, the longest node and the most memory one took past a node without a remote."""
    from hostile_redis import BEHAVIOURS, HostileRedis

    baseline: list[dict] = []
    outcome(worker(cache_root / "redis-baseline", "--signatures", "1"), "no remote", baseline)
    base_kib = baseline[0]["max_rss_kib"] if baseline else 0
    counts: Counter[str] = Counter()
    worst_s = worst_mib = 0.0
    server = HostileRedis()
    try:
        names = sorted(BEHAVIOURS)
        for i in range(0, len(names), processes):
            batch = names[i : i + processes]
            start = time.monotonic()
            env = {"SLANGSPEC_REMOTE_TRUST_ALL": "1"}
            procs = [
                worker(
                    cache_root / f"redis-{b}",
                    "--signatures",
                    "1",
                    env={**env, "SLANGSPEC_REMOTE": server.url(b)},
                )
                for b in batch
            ]
            for b, proc in zip(batch, procs, strict=True):
                reports: list[dict] = []
                got = outcome(proc, f"hostile Redis, {b}", reports)
                took = time.monotonic() - start
                grew = (reports[0]["max_rss_kib"] - base_kib) / 1024 if reports else 0.0
                if got == "ok" and grew > EXHAUSTED_MIB:
                    FAILURES.append(f"hostile Redis, {b}: {grew:.0f} MiB past a node without one")
                    got = "unexpected"
                counts[got] += 1
                worst_s, worst_mib = max(worst_s, took), max(worst_mib, grew)
                print(f"  hostile Redis, {b}: {took:.1f} s, {grew:+.0f} MiB", flush=True)
    finally:
        server.stop()
    return counts, worst_s, worst_mib


_BAD_DEFINES = [
    {"X;}\nvoid evil(){": "1"},
    {"SCALE": "2\nvoid evil() {}"},
    {"SCALE": "2\r#define X"},
    {"SCALE": "2\x00"},
    {"1X": "1"},
    {"X Y": "1"},
    {"": "1"},
    {"SCALE": 2},
]
_MODULE = "float scaled(float x) { return x * SCALE; }\n"


def hostile_inputs(cache_root: Path, tdev: str) -> Counter[str]:
    """Defines that would be read as more than a define (refused, naming the define, at load
    and in a manifest), and a module that begins with a byte order mark (computes right)."""
    import slangspec
    from slangspec.aot.warm import ManifestError, parse_manifest

    counts: Counter[str] = Counter()
    cache = cache_root / "inputs"
    path = cache_root / "scaled.slang"
    path.write_text(_MODULE)
    for defines in _BAD_DEFINES:
        name = next(iter(defines))
        try:
            slangspec.load(path, defines=defines, cache_dir=cache).scaled(
                torch.ones(2, device=tdev)
            )
            got = "ran code"
        except ValueError as exc:
            got = "ok" if f"define {name!r}" in str(exc) else "unexpected"
        except Exception:
            got = "unexpected"
        manifest = cache_root / "defines.toml"
        table_ = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in defines.items())
        manifest.write_text(
            f'[[module]]\npath = "{path}"\ndefines = {{ {table_} }}\n\n[[module.function]]\n'
            'name = "scaled"\nspecializations = [["f32[N]"]]\n'
        )
        try:
            parse_manifest(manifest)
            in_manifest = "ran code"
        except ManifestError as exc:
            in_manifest = "ok" if "define" in str(exc) else "unexpected"
        for outcome_ in (got, in_manifest):
            if outcome_ != "ok":
                FAILURES.append(f"{outcome_}: defines {defines!r}")
            counts[outcome_] += 1
    marked = cache_root / "marked.slang"
    marked.write_bytes(b"\xef\xbb\xbf" + _MODULE.replace("SCALE", "3.0").encode())
    x = torch.arange(4.0, device=tdev)
    for source in (marked, None):
        try:
            m = (
                slangspec.load(marked, cache_dir=cache)
                if source
                else slangspec.load_source(
                    "marked2", "\ufeff" + _MODULE, defines={"SCALE": "3.0"}, cache_dir=cache
                )
            )
            got = "ok" if torch.equal(m.scaled(x), 3 * x) else "wrong"
        except Exception as exc:
            FAILURES.append(f"unexpected: a module with a byte order mark: {exc}")
            got = "unexpected"
        counts[got] += 1
    return counts


def table(rows: dict[str, Counter[str]]) -> str:
    lines = ["| trials | " + " | ".join(OUTCOMES) + " | kind |", "|" + " ---: |" * 7 + " --- |"]
    for kind, c in rows.items():
        lines.append(
            f"| {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + f" | {kind} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", choices=["cuda", "vulkan"], default="vulkan")
    p.add_argument("--quick", action="store_true", help="a few trials of each kind")
    p.add_argument("--processes", type=int, default=6, help="concurrent cold processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    p.add_argument("--only", action="append", choices=TRIALS, help="run only these kinds")
    args = p.parse_args()
    os.environ["SLANGSPEC_DEVICE"] = args.device
    # Each process builds its own misses: under the default, every trial's cache root would
    # start a compile server of its own (the server trials set it for each of their clients).
    os.environ.setdefault("SLANGSPEC_COMPILE_SERVER", "off")
    tdev = "cuda" if args.device == "cuda" else "cpu"
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    n = {"rounds": 1, "killed": 3, "damaged": 12, "fuzzed": 200, "tampered": 4, "names": 240}
    if not args.quick:
        n = {
            "rounds": 3,
            "killed": 30,
            "damaged": 100,
            "fuzzed": 2000,
            "tampered": 12,
            "names": 2000,
        }
    root = Path(tempfile.mkdtemp(prefix="slangspec-torture-"))
    rows: dict[str, Counter[str]] = {}
    start = time.monotonic()
    wanted = set(args.only or TRIALS)

    def done(kind: str, counts: Counter[str]) -> None:
        rows[kind] = counts
        print(table({kind: counts}).splitlines()[-1], flush=True)  # each row as it is measured

    if "concurrent" in wanted:
        done(
            f"{args.processes} concurrent cold processes (alone, under clear, under evict)",
            concurrent(root, n["rounds"], args.processes),
        )
    if "killed" in wanted:
        counts, worst, waited = killed(root, n["killed"], rng)
        what = f"{worst:.1f} s at most, of which {waited:.2f} s waiting on the dead one's lease"
        done(f"a process SIGKILLed while building, then a fresh one ({what})", counts)
    if "damaged" in wanted:
        done(
            f"a file of every kind damaged, then a fresh process ({args.processes} at a time)",
            damaged(root, n["damaged"], rng, args.processes),
        )
    if "fuzzed" in wanted:
        done(
            "fuzzed calls (right result, or TypeError/ValueError naming the function)",
            fuzzed(root, n["fuzzed"], rng, tdev),
        )
    if "tampered" in wanted:
        done(
            "tampered rows (pickle, files outside), bundles (crafted kernels, forged binaries)",
            tampered(root, n["tampered"]),
        )
    if "remote" in wanted:
        cold, after_kill, worst_kill, spoiled, worst_spoiled = remote(
            root, n["rounds"], args.processes, n["killed"], rng
        )
        done(f"remote: {args.processes} cold nodes sharing a redis-server", cold)
        done(
            f"remote: a node SIGKILLed while building, then a fresh one "
            f"({worst_kill:.1f} s at most)",
            after_kill,
        )
        done(
            f"remote: server content spoiled or server failing, then a fresh node "
            f"({worst_spoiled:.1f} s at most)",
            spoiled,
        )
    if "server" in wanted:
        trials = ServerTrials(root, tdev, rng)
        trials.run(n["rounds"])
        beating = max(w for what, w in trials.waits.items() if "heartbeats" in what)
        failing = max(w for what, w in trials.waits.items() if "heartbeats" not in what)
        done(
            f"compile server killed, stopped, its socket taken, junk or trickled replies, raced, "
            f"cache cleared (waits on it {failing:.2f} s at most, bound {trials.bound} s; on "
            f"heartbeats alone {beating:.2f} s, bound {SERVER_LEASE_S + trials.bound} s; "
            f"{trials.compared} binaries compared)",
            trials.counts,
        )
    if "hostile" in wanted:
        done(
            f"mangled function names, {args.processes} processes (unknown, or the function named)",
            hostile(root, n["names"], args.processes),
        )
        done(
            "defines read as more than a define (refused), modules with a byte order mark",
            hostile_inputs(root, tdev),
        )
        counts, worst_s, worst_mib = hostile_redis(root, args.processes)
        done(
            f"a hostile Redis server as the remote tier: nesting, huge lengths, oversized "
            f"values, a trickle, garbage ({worst_s:.1f} s at most, {worst_mib:+.0f} MiB at most "
            f"past a node without a remote)",
            counts,
        )
    shutil.rmtree(root, ignore_errors=True)
    text = table(rows)
    print(text)
    for failure in FAILURES:
        print(f"  not ok: {failure}")
    print(f"\n{args.device}, seed {args.seed}, {time.monotonic() - start:.0f} s")
    if args.markdown:
        args.markdown.write_text(text + "\n")


if __name__ == "__main__":
    main()
