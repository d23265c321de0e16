"""The compile server (``specialize serve``): a process that misses on CUDA has the user's server
describe the function and build its kernels, and every way the server can fail (stopped, killed
mid-request, its socket removed or replaced, garbage, oversized or trickled replies, another
user at the door, another install behind it, work past its deadline, the cache cleared under it)
costs the client a bounded wait and an in-process build, never a wrong kernel or a hang. A
request makes the server write nothing where it says, and a server a client starts imports
nothing from where the client runs.

On a machine without a GPU the clients build for sm_90 and run nothing (``SLANGSPEC_CUDA_ARCH``,
as ``warm --arch`` does); on a GPU they call the kernels and check them against torch."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_arch_build import cubins
from test_cuda_step import elf_arch, needs_nvrtc

import compile_servers
import slangspec
from compile_servers import FakeServer, frame, framed, servers
from slangspec.compile.cuda.prepared import PRELUDE_FILE
from slangspec.compile.server import client as server_client
from slangspec.compile.server.place import UnsafePlace, runtime_directory, server_place
from slangspec.compile.server.serve import EXIT_PAST_DEADLINE

pytestmark = needs_nvrtc

HERE = Path(__file__).parent
BUILD_ONLY = """
import json, sys
from pathlib import Path
import slangspec
from slangspec.compile.server import client as server_client
from slangspec.settings import compile_counts
from slangspec.runtime.module_base import BuildModule, load_module
here = Path(sys.argv[2])
m = load_module(BuildModule, here / "shaders" / "cached.slang",
                include_paths=[here / "slang_lib"], cache=slangspec.Cache(sys.argv[1]),
                device="cuda")
for g in sys.argv[3:]:
    m.poly.warm(f"cached::poly call [D1,S6,G1,V1] [D1,S6,G{g},Vx]")
waited = sum(server_client.fallback_waits)
print(json.dumps({"counts": dict(compile_counts), "server_wait_s": waited, "ok": True}))
"""


@pytest.fixture
def run_dir(monkeypatch):
    """A runtime directory of the test's own (short: a socket's path has a bound), and every
    server started in it killed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="ss-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(directory))
    yield directory
    for pid in servers(directory):
        os.kill(pid, signal.SIGKILL)
    subprocess.run(["rm", "-rf", str(directory)], check=False)


def _env(mode: str, kind: str) -> dict[str, str]:
    env = {**os.environ, "SLANGSPEC_COMPILE_SERVER": mode, "SLANGSPEC_DEVICE": "cuda"}
    if kind != "cuda":
        env["SLANGSPEC_CUDA_ARCH"] = "sm_90"
    return env


def client(
    cache: Path, mode: str, kind: str, *grads: str, cwd: Path | None = None
) -> subprocess.Popen:
    """A process missing ``poly`` for each grad flag of ``x`` in ``grads``, run in ``cwd``
    (whose modules it does not import itself): on a GPU it calls it and checks values and
    gradients against torch (tests/jit_worker.py), else it builds."""
    if kind == "cuda":
        command = [str(HERE / "jit_worker.py"), str(cache), "--signatures", str(len(grads))]
    else:
        command = ["-P", "-c", BUILD_ONLY, str(cache), str(HERE), *grads]
    return subprocess.Popen(
        [sys.executable, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(mode, kind),
        cwd=cwd,
    )


def finished(proc: subprocess.Popen, timeout: float = 120) -> dict:
    """The client's report; it must end within ``timeout`` (a hang fails here)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"client failed ({proc.returncode}):\n{out}\n{err}"
    report = json.loads(out.strip().splitlines()[-1])
    assert report["ok"], report
    return report


def serving(cache: Path, kind: str) -> subprocess.Popen:
    return compile_servers.serving(cache, _env("off", kind), cache.parent / "server.log")


def in_process(report: dict) -> bool:
    counts = report["counts"]
    return counts.get("served", 0) == 0 and counts.get("kernel", 0) > 0


def served(report: dict) -> bool:
    counts = report["counts"]
    return counts.get("served", 0) > 0 and counts.get("kernel", 0) == 0


def verified(cache: Path) -> None:
    assert slangspec.Cache(cache).verify()["problems"] == []


def test_a_running_server_describes_and_builds_what_a_process_misses(tmp_path, run_dir, kind):
    cache, alone = tmp_path / "cache", tmp_path / "alone"
    server = serving(cache, kind)
    report = finished(client(cache, "use", kind, "1", "0"))
    assert served(report) and report["counts"].get("front_end", 0) == 0
    # The same kernels as a process builds by itself: the same entries, each an sm_90 cubin.
    assert in_process(finished(client(alone, "off", kind, "1", "0")))
    rows = {k: r for k, r in slangspec.Cache(cache).rows()}
    assert rows.keys() == {k for k, _ in slangspec.Cache(alone).rows()}
    for key, row in slangspec.Cache(alone).rows():
        for label, binary in row["binaries"].items():
            theirs = rows[key]["binaries"][label]
            assert (theirs["layout"], theirs["group"]) == (binary["layout"], binary["group"])
    if kind != "cuda":
        assert {elf_arch(c) for c in cubins(cache)} == {90}
    verified(cache)
    status = server_client.status(cache)
    assert status["done"]["describe"] == 1 and status["done"]["build"] >= 2
    assert status["pid"] == server.pid and status["memory_bytes"] > 0
    assert server_client.stop(cache)
    assert server.wait(timeout=10) == 0
    assert server_client.status(cache) is None


def test_clients_racing_to_start_it_get_one_server_that_later_ones_use(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    first = [client(cache, "auto", kind, "1") for _ in range(2)]
    for proc in first:
        finished(proc)  # none ran when they missed: both started one
    deadline = time.monotonic() + 60
    while server_client.status(cache) is None:
        assert time.monotonic() < deadline, "no server answered after the first misses"
        time.sleep(0.1)
    # The other one started finds the lock taken and leaves.
    while len(servers(run_dir)) != 1:
        assert time.monotonic() < deadline, f"servers left running: {servers(run_dir)}"
        time.sleep(0.1)
    later = finished(client(cache, "auto", kind, "1", "0"))  # the second is new
    assert served(later), (later, server_place(cache).log.read_text())
    verified(cache)


def test_a_server_log_past_its_bound_is_kept_once_when_the_next_server_starts(
    tmp_path, run_dir, kind
):
    cache = tmp_path / "cache"
    log = server_place(cache).log
    old = b"an earlier server's line\n" * (server_client.LOG_BYTES // 25 + 1)
    log.write_bytes(old)
    finished(client(cache, "auto", kind, "1"))
    deadline = time.monotonic() + 60
    while server_client.status(cache) is None:
        assert time.monotonic() < deadline, "no server answered after the first miss"
        time.sleep(0.1)
    assert log.with_name(log.name + ".1").read_bytes() == old
    assert b"serving" in log.read_bytes() and len(log.read_bytes()) < len(old)


LIBRARY_USER = """
import json, sys
import torch
import slangspec
from slangspec.settings import compile_counts
from slangspec.runtime.module_base import BuildModule, load_module_source
from slangspec.signatures import call_signature
c = sys.argv[2]
source = (
    "import slangpy;\\n[Differentiable]\\nfloat mix(IDiffTensor<float, 1> a, "
    f"IDiffTensor<float, 1> b, int i) {{ return a[i] * b[i] + {c} * a[i]; }}\\n"
)
m = load_module_source(BuildModule, "mix" + c, source, cache=slangspec.Cache(sys.argv[1]),
                       device="cuda")
x = torch.ones(4, requires_grad=True)
m.mix.warm(call_signature(m.mix.id, (x, x, 1)))
print(json.dumps({"counts": dict(compile_counts), "ok": True}))
"""


@pytest.mark.skipif(os.environ.get("SLANGSPEC_DEVICE") == "cuda", reason="builds for sm_90")
def test_idle_it_loads_slangpys_library_for_the_next_module(tmp_path, run_dir):
    cache = tmp_path / "cache"
    serving(cache, "vulkan")
    for constant in ("1", "2"):
        proc = subprocess.Popen(
            [sys.executable, "-c", LIBRARY_USER, str(cache), constant],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env("use", "vulkan"),
        )
        assert served(finished(proc))
        deadline = time.monotonic() + 30
        while server_client.status(cache)["spare_sessions"] != 1:
            log = (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, f"no session ready for the next module:\n{log}"
            time.sleep(0.1)
    assert server_client.status(cache)["modules_held"] == 2
    verified(cache)


def test_a_stopped_server_costs_a_bounded_wait_then_an_in_process_build(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    server = serving(cache, kind)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        assert in_process(finished(client(cache, "use", kind, "1"), timeout=60))
    finally:
        os.kill(server.pid, signal.SIGCONT)
    verified(cache)


def test_a_server_killed_mid_request_costs_an_in_process_build(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    server = serving(cache, kind)
    os.kill(server.pid, signal.SIGSTOP)  # it takes the request, and never answers
    waiting = client(cache, "use", kind, "1")
    time.sleep(1.0)
    server.kill()
    assert in_process(finished(waiting, timeout=60))
    verified(cache)


@pytest.mark.parametrize("how", ["removed", "replaced by a regular file"])
def test_a_server_whose_socket_is_taken_away_leaves(tmp_path, run_dir, kind, how):
    cache = tmp_path / "cache"
    server = serving(cache, kind)
    path = server_place(cache).socket
    path.unlink()
    if how != "removed":
        path.write_text("not a socket")
    assert server.wait(timeout=10) == 0
    assert in_process(finished(client(cache, "use", kind, "1"), timeout=60))
    verified(cache)


@pytest.mark.parametrize(
    "reply",
    [
        struct.pack("!I", 5) + b"hello",
        struct.pack("!I", 0x7FFFFFFF) + b"x" * 64,
        frame([1, 2, 3]),
        frame({"ok": True, "overloads": 7}),
        struct.pack("!I", 4096) + b"{",
    ],
    ids=["not JSON", "oversized", "not an object", "wrong content", "cut short"],
)
def test_garbage_from_the_server_costs_an_in_process_build(tmp_path, run_dir, kind, reply):
    cache = tmp_path / "cache"
    path = server_place(cache).socket
    with FakeServer(path, reply):
        assert in_process(finished(client(cache, "use", kind, "1"), timeout=60))
    verified(cache)


BROKEN = """
import json, sys
import slangspec
from slangspec.settings import compile_counts
from slangspec.runtime.module_base import BuildModule, load_module_source
source = "float f(float x) {\\n  return x +;\\n}\\n"
m = load_module_source(BuildModule, "broken", source, cache=slangspec.Cache(sys.argv[1]),
                       device="cuda")
try:
    m["f"]
except slangspec.SlangCompileError as exc:
    print(json.dumps({"error": str(exc), "counts": dict(compile_counts)}))
"""


def test_slangs_diagnostics_from_the_server_are_the_clients_error_compiled_once(
    tmp_path, run_dir, kind
):
    cache = tmp_path / "cache"
    serving(cache, kind)
    command = [sys.executable, "-c", BROKEN, str(cache)]
    out = subprocess.run(command, capture_output=True, text=True, env=_env("use", kind))
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["counts"].get("front_end", 0) == 0, out.stderr  # the server's compile alone
    error = report["error"]
    assert error.count("broken.slang:2:13") == error.count("E20002") == 1
    assert str(cache) not in error


def _elsewhere(request: dict) -> dict:
    """Slang's diagnostics for a file that is none of the client's."""
    where = " --> /nowhere/else.slang:1:1\n"
    return {"ok": False, "error": "SlangCompileError", "diagnostics": f"error[E1]: no\n{where}"}


def test_a_servers_diagnostics_for_no_file_of_the_client_cost_an_in_process_build(
    tmp_path, run_dir, kind
):
    cache = tmp_path / "cache"
    with FakeServer(server_place(cache).socket, answer=_elsewhere):
        assert in_process(finished(client(cache, "use", kind, "1"), timeout=60))
    verified(cache)


def _junk_cubins(request: dict) -> dict:
    """A build answered in the reply's shape, of the client's identity, each cubin an ELF
    header and nothing of the kernel's code; any other request refused."""
    if request.get("op") != "build":
        return {"ok": False, "identity": request["identity"], "error": "not this one"}
    header = b"\x7fELF\x02" + bytes(13) + struct.pack("<H", 190) + bytes(64)
    cubin = base64.b64encode(header).decode()
    kernels = {
        k["name"]: {"cubin": cubin, "entry": k["name"], "layout": [], "group": 128}
        for k in request["kernels"]
    }
    return {"ok": True, "identity": request["identity"], "body": {"kernels": kernels}}


def test_cubins_that_are_not_the_kernels_are_refused(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    with FakeServer(server_place(cache).socket, answer=_junk_cubins):
        out, err = client(cache, "use", kind, "1").communicate(timeout=60)
    assert in_process(json.loads(out.strip().splitlines()[-1])), err
    made = cubins(cache)
    assert made and all(elf_arch(c) == 90 for c in made)
    verified(cache)


def test_a_server_that_works_on_and_on_is_waited_on_as_long_as_a_lease(
    tmp_path, run_dir, kind, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", "3")
    start = time.monotonic()
    with FakeServer(server_place(cache).socket, beating=True):
        assert in_process(finished(client(cache, "use", kind, "1"), timeout=60))
    assert time.monotonic() - start < 30
    verified(cache)


@pytest.mark.skipif(os.getuid() != 0, reason="running a client as another user needs root")
def test_another_user_is_refused(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    serving(cache, kind)
    place = server_place(cache)
    # Open the way to the socket, as a careless setup would: the peer check still holds.
    place.socket.parent.chmod(0o711)
    place.socket.chmod(0o777)
    place.socket.parent.parent.chmod(0o711)
    as_nobody = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
        "try:\n"
        "    s.sendall(sys.stdin.buffer.read())\n"
        "    print('answered' if s.recv(100) else 'refused')\n"
        "except OSError:\n"
        "    print('refused')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", as_nobody, str(place.socket)],
        input=frame({"op": "status"}),
        capture_output=True,
        timeout=60,
    )
    assert done.stdout.startswith(b"refused"), done.stdout + done.stderr
    place.socket.parent.chmod(0o700)
    assert server_client.status(cache)["refused"] == 1


def test_a_runtime_directory_others_may_enter_is_not_used(run_dir):
    (run_dir / "slangspec").mkdir(mode=0o755)
    (run_dir / "slangspec").chmod(0o755)
    with pytest.raises(UnsafePlace, match="may be entered by others"):
        runtime_directory()


def test_the_cache_cleared_while_it_serves(tmp_path, run_dir, kind):
    cache = tmp_path / "cache"
    serving(cache, kind)
    assert served(finished(client(cache, "use", kind, "1")))
    slangspec.Cache(cache).clear()
    assert served(finished(client(cache, "use", kind, "1", "0")))
    verified(cache)


PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text(__file__)\n"
"""A module planted where a client runs, which notes that some process imported it."""


def test_a_server_a_client_starts_imports_nothing_from_where_the_client_runs(
    tmp_path, run_dir, kind
):
    cache, planted, marker = tmp_path / "cache", tmp_path / "planted", tmp_path / "imported"
    planted.mkdir()
    for name in ("slangspec", "xxhash", "torch"):
        (planted / f"{name}.py").write_text(PLANTED.format(marker=str(marker)))
    finished(client(cache, "auto", kind, "1", cwd=planted))
    deadline = time.monotonic() + 60
    while server_client.status(cache) is None and not marker.exists():
        assert time.monotonic() < deadline, server_place(cache).log.read_text()
        time.sleep(0.1)
    assert not marker.exists(), f"the server imported {marker.read_text()}"
    # It is this tree's slangspec (the test's PYTHONPATH names it), and it serves.
    assert served(finished(client(cache, "auto", kind, "1", "0")))


def test_a_server_takes_its_packages_from_where_its_client_does_but_its_working_directory(
    tmp_path, monkeypatch
):
    """An install by ``pip --target`` or ``PYTHONPATH`` (as on a machine without a site to
    install into) reaches the server too, which ``-I`` alone would leave without slangpy."""
    aside, here = tmp_path / "aside", tmp_path / "here"
    (aside / "diskcache").mkdir(parents=True)
    here.mkdir()
    monkeypatch.chdir(here)
    for name, origin in (
        ("diskcache", aside / "diskcache" / "__init__.py"),
        ("xxhash", here / "xxhash.py"),
    ):
        module = type(sys)(name)
        module.__file__ = str(origin)
        monkeypatch.setitem(sys.modules, name, module)
    path = server_client.server_path()
    assert path[0] == str(server_client.PACKAGE_PARENT)
    assert str(aside) in path and str(here) not in path


def exchanged(cache: Path, message: dict) -> dict:
    """The reply of the server of ``cache`` to ``message``, sent as it is, past heartbeats."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(server_place(cache).socket))
        sock.sendall(frame(message))
        while (reply := framed(sock)) == {"working": True}:
            pass
        return reply


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, kind) -> dict[str, dict]:
    """A describe and a build request as a client sends them, by op: kept by a peer that
    refuses each, so that the client asks for both."""
    cache = tmp_path_factory.mktemp("recorded") / "cache"
    directory = Path(tempfile.mkdtemp(prefix="ss-"))

    def refuse(request: dict) -> dict:
        return {"ok": False, "identity": request.get("identity"), "error": "kept"}

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(directory))
        with FakeServer(server_place(cache).socket, answer=refuse) as peer:
            finished(client(cache, "use", kind, "1"))
    shutil.rmtree(directory)
    return {r["op"]: r for r in peer.requests}


def test_a_request_names_no_path_the_server_writes_and_only_directories_it_reads(
    tmp_path, run_dir, kind, recorded
):
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    victim = tmp_path / "victim.cu"
    victim.write_text("the user's file")
    serving(cache, kind)
    build = recorded["build"]
    module = build["module"]
    for request in (
        {**build, "prelude": str(victim)},
        {**build, "prelude": str(outside / "made" / "prelude.cu")},
        {**build, "kernel_dir": str(outside / "kernels")},
        {**build, "module": {**module, "path": "cached.slang"}},
        {**build, "module": {**module, "include_paths": [str(victim)]}},
        {**build, "module": {**module, "include_paths": ["slang_lib"]}},
    ):
        reply = exchanged(cache, request)
        assert reply["ok"] is False and reply["error"].startswith("refused"), (request, reply)
    assert victim.read_text() == "the user's file" and not outside.exists()
    # It stays, and builds what is asked, keeping Slang's prelude under its own cache root.
    assert exchanged(cache, build)["ok"] is True
    assert server_client.status(cache)["done"] == {"build": 1}
    assert [p.name for p in (cache / "slang").rglob(PRELUDE_FILE)] == [PRELUDE_FILE]


def test_a_request_of_another_install_is_refused_and_the_server_stays(
    tmp_path, run_dir, kind, recorded
):
    cache = tmp_path / "cache"
    serving(cache, kind)
    describe = recorded["describe"]
    ours = describe["identity"]
    unlike = (
        {**ours, "toolchain": {**ours["toolchain"], "slangspec": "0.0.0+elsewhere"}},
        {**ours, "protocol": ours["protocol"] - 1},
    )
    for request in (
        *({**describe, "identity": other} for other in unlike),
        {k: v for k, v in describe.items() if k != "identity"},
    ):
        reply = exchanged(cache, request)
        assert reply["ok"] is False and reply["error"].startswith("refused"), (request, reply)
    assert server_client.status(cache)["done"] == {}
    assert exchanged(cache, describe)["ok"] is True
    # Its status is any install's to ask, one whose messages carried no identity too.
    assert exchanged(cache, {"op": "status"})["body"]["done"] == {"describe": 1}


def another_install(directory: Path, version: str) -> Path:
    """A directory to put on a path that holds slangspec as this one but for its version:
    another install, as a server left running across an upgrade runs it."""
    package = directory / "slangspec"
    package.mkdir(parents=True)
    here = Path(slangspec.__file__).parent
    for entry in here.iterdir():
        if entry.name not in ("formats.py", "__pycache__"):
            (package / entry.name).symlink_to(entry)
    formats = (here / "formats.py").read_text()
    stamped = re.sub(r'^VERSION = ".*"$', f"VERSION = {version!r}", formats, flags=re.M)
    assert stamped != formats
    (package / "formats.py").write_text(stamped)
    return directory


def test_a_server_of_another_install_is_asked_once_and_the_client_builds(tmp_path, run_dir, kind):
    cache, log = tmp_path / "cache", tmp_path / "server.log"
    elsewhere = another_install(tmp_path / "elsewhere", "0.0.0+elsewhere")
    # Ahead of what the path holds already (where the environment keeps slangpy, say).
    path = os.pathsep.join(filter(None, [str(elsewhere), os.environ.get("PYTHONPATH")]))
    compile_servers.serving(cache, {**_env("off", kind), "PYTHONPATH": path}, log)
    assert in_process(finished(client(cache, "use", kind, "1", "0")))
    assert log.read_text().count("refused a request of another install") == 1
    assert server_client.status(cache)["identity"]["toolchain"]["slangspec"] == "0.0.0+elsewhere"


def test_a_reply_of_another_install_is_not_taken(tmp_path, run_dir, kind):
    """As from a server too old to check a request's identity: the client checks the reply's."""

    def elsewhere(request: dict) -> dict:
        other = {**request.get("identity", {}), "protocol": 1}
        return {"ok": True, "identity": other, "body": {"overloads": False}}

    cache = tmp_path / "cache"
    with FakeServer(server_place(cache).socket, answer=elsewhere) as peer:
        assert in_process(finished(client(cache, "use", kind, "1", "0")))
    assert len(peer.requests) == 1


def test_a_server_trickling_its_reply_is_given_up_after_the_silence_bound(
    tmp_path, run_dir, kind, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", "30")
    # A byte every half second: each read of the socket gets one well within the bound.
    with FakeServer(server_place(cache).socket, trickle=0.5) as peer:
        report = finished(client(cache, "use", kind, "1", "0"), timeout=60)
    assert in_process(report) and len(peer.requests) == 1
    assert report["server_wait_s"] < 30


def test_work_past_the_deadline_is_answered_failed_and_the_server_leaves(
    tmp_path, run_dir, kind, recorded, monkeypatch
):
    """No request wedges the server for good (Slang opens no FIFO or device an import names,
    and a request names no other file): the slowest real work, a first build with NVRTC cold,
    under a deadline far shorter than it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SLANGSPEC_SERVE_DEADLINE", "0.05")
    server = serving(cache, kind)
    reply = exchanged(cache, recorded["build"])
    assert reply["ok"] is False and reply["leaving"] is True, reply
    assert "SLANGSPEC_SERVE_DEADLINE" in reply["error"]
    assert server.wait(timeout=30) == EXIT_PAST_DEADLINE
    assert not server_place(cache).socket.exists()
    # A client it failed builds itself and asks it nothing more: it starts none after it left.
    server = serving(cache, kind)
    report = finished(client(cache, "auto", kind, "1", "0"))
    assert report["counts"].get("kernel", 0) > 0
    assert server.wait(timeout=30) == EXIT_PAST_DEADLINE
    assert servers(run_dir) == []
    verified(cache)


def test_a_process_whose_cache_writes_nothing_asks_no_server(tmp_path, run_dir, kind):
    """The server keeps what it writes under the cache root, which such a process may not
    write."""
    cache = tmp_path / "cache"
    serving(cache, kind)
    viewing = BUILD_ONLY.replace("Cache(sys.argv[1])", "Cache(sys.argv[1], read_only=True)")
    proc = subprocess.Popen(
        [sys.executable, "-c", viewing, str(cache), str(HERE), "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env("use", "vulkan"),
    )
    assert in_process(finished(proc))
    assert server_client.status(cache)["done"] == {}
    assert not (cache / "slang").exists() or not any((cache / "slang").iterdir())
