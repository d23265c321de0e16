"""A warm process starts in torch's time: on CUDA, cached kernels run without slangpy, and a miss
brings slangpy up (or, where it cannot be imported, says what was missing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slangspec.compile.slang.slangpy_install import install_stamp, wheel_stamp
from workers import HERE, SHADERS, run, worker


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_errors_of_a_miss_without_slangpy_are_public():
    import slangspec

    assert issubclass(slangspec.SlangUnavailableError, slangspec.DeviceUnavailableError)
    assert "SlangUnavailableError" in dir(slangspec)


def test_the_runtime_imports_without_slangpy():
    done = python(
        """
        import sys
        sys.modules["slangpy"] = None
        import slangspec.runtime.module, slangspec.aot.bundle, slangspec.signatures.preimage
        print(sorted(m for m in sys.modules if m.startswith("slangspec.")))
        """
    )
    assert done.returncode == 0, done.stderr
    assert "slangspec.runtime.module" in done.stdout


# What only a miss (the kernel writer), a far tier, eviction, reports or a cache without a named
# directory use.
NOT_ON_A_HIT = {
    "platformdirs",
    "slangspec.cache_store.policy",
    "slangspec.cache_store.redis_wire",
    "slangspec.cache_store.remote",
    "slangspec.cache_store.remote_admin",
    "slangspec.cache_store.report",
    "slangspec.cache_store.shipped",
    "slangspec.cache_store.shrinking",
    "slangspec.codegen.kernels",
    "slangspec.codegen.slang_helpers",
}
HIT = """
import json, sys
import torch
import slangspec
dev = "cuda" if sys.argv[2] == "cuda" else "cpu"
cache, device, path, include = sys.argv[1:5]
m = slangspec.load(path, include_paths=[include], device=device, cache_dir=cache)
a = torch.randn(1, device=dev, requires_grad=True)
x = torch.randn(8, device=dev, requires_grad=True)
m.poly(a, x).sum().backward()
print(json.dumps(sorted(sys.modules)))
"""


def test_a_hit_from_disk_imports_no_far_tier_policy_or_report(tmp_path, kind):
    """The modules a warm process does not use stay unimported: each costs its start-up."""
    where = [str(tmp_path / "cache"), kind, str(SHADERS / "cached.slang"), str(HERE / "slang_lib")]
    cold = python(HIT, *where)
    assert cold.returncode == 0, cold.stderr
    warm = python(HIT, *where)
    assert warm.returncode == 0, warm.stderr
    imported = set(json.loads(warm.stdout.splitlines()[-1]))
    assert "slangspec.runtime.module" in imported
    assert imported & NOT_ON_A_HIT == set()


def test_no_value_class_is_a_dataclass_compiled_six_times():
    """Value classes are ``@frozen`` (``define.py``), which compiles one method where
    ``dataclass(frozen=True)`` compiles six."""
    src = Path(__file__).parent.parent / "src" / "slangspec"
    found = [
        f"{path.relative_to(src)}:{n}"
        for path in sorted(src.rglob("*.py"))
        if path.name != "define.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "dataclass(frozen=True" in line.replace(" ", "")
    ]
    assert found == []


@pytest.fixture
def warm_cuda_cache(tmp_path, kind):
    """A cache a cold CUDA process filled with three signatures."""
    if kind != "cuda":
        pytest.skip("a Vulkan process dispatches through slangpy")
    cache = tmp_path / "cache"
    assert run(cache, "--signatures", "3")["ok"]
    return cache


def test_a_warm_cuda_process_never_imports_slangpy(warm_cuda_cache):
    warm = run(warm_cuda_cache, "--signatures", "3", "--block-slangpy")
    assert warm["ok"]
    assert warm["slangpy_imported"] is False
    assert warm["counts"] == {}


def test_a_miss_without_slangpy_names_what_was_missing(warm_cuda_cache):
    cache = warm_cuda_cache
    proc = worker(cache, "--signatures", "4", "--block-slangpy")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "SlangUnavailableError: cached::poly call [" in err
    assert "its forward kernel is not in the cache and needs slangpy" in err
    assert "slangpy is blocked in this process" in err
    # Where slangpy can be imported, the same miss is compiled.
    again = run(cache, "--signatures", "4")
    assert again["ok"]
    assert again["counts"]["specialize"] == 1


BACKWARD_MISS = """
    import json, sys, threading
    import torch
    import slangspec
    from slangspec.settings import compile_counts
    from slangspec.runtime import miss_path

    cache, mode, tdev, shaders, library = sys.argv[1:]
    built_on = []
    real_compile = miss_path.Builder._compile

    def compile_noting_thread(self, sources):
        built_on.append(threading.current_thread() is threading.main_thread())
        return real_compile(self, sources)

    miss_path.Builder._compile = compile_noting_thread
    m = slangspec.load(f"{shaders}/cached.slang", include_paths=[library], cache_dir=cache)
    a = torch.randn(1, device=tdev, requires_grad=True)
    x = torch.randn(7, device=tdev, requires_grad=True)
    if mode == "forward":  # built alone, as a warm task for the forward kernel builds it
        m.poly.warm(m.poly.signature(a, x), [])
    y = m.poly(a, x)
    before = "slangpy" in sys.modules
    want_a = (x.detach() ** 2 + 3).sum().reshape(1)
    ok = torch.allclose(y, (a * x * x + 3 * a).detach(), rtol=1e-5)
    if mode == "backward":
        y.sum().backward()
        want_x = 2 * a.detach() * x.detach()
        ok = ok and torch.allclose(a.grad, want_a, rtol=1e-4)
        ok = ok and torch.allclose(x.grad, want_x, rtol=1e-4)
    print(json.dumps({"ok": bool(ok), "slangpy_before_backward": before,
                      "built_on_main_thread": built_on, "counts": dict(compile_counts)}))
"""


def test_a_backward_miss_in_a_warm_process_is_built_where_autograd_runs_it(tmp_path, kind, tdev):
    cache = str(tmp_path / "cache")
    args = (str(SHADERS), str(HERE / "slang_lib"))
    # The first process builds the forward kernel only; the next finds it and misses the
    # backward kernel, which it builds when autograd asks for it.
    cold = python(BACKWARD_MISS, cache, "forward", tdev, *args)
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout.splitlines()[-1])["ok"]
    done = python(BACKWARD_MISS, cache, "backward", tdev, *args)
    assert done.returncode == 0, done.stderr
    warm = json.loads(done.stdout.splitlines()[-1])
    assert warm["ok"]
    assert warm["counts"].get("specialize", 0) == 0
    assert warm["counts"]["codegen"] == 1
    if kind == "cuda":
        assert warm["slangpy_before_backward"] is False
        assert warm["built_on_main_thread"] == [False]


def test_slangpy_versions_come_from_the_cache_without_importing_it(tmp_path):
    code = """
        import json, sys
        if sys.argv[2] == "blocked":
            sys.modules["slangpy"] = None
        from slangspec.cache_store import CacheStore
        from slangspec.compile.toolchain_identity import toolchain
        print(json.dumps(toolchain(CacheStore(sys.argv[1]))))
    """
    noted = python(code, str(tmp_path), "importable")
    assert noted.returncode == 0, noted.stderr
    read_back = python(code, str(tmp_path), "blocked")
    assert read_back.returncode == 0, read_back.stderr
    assert json.loads(read_back.stdout) == json.loads(noted.stdout)
    elsewhere = python(code, str(tmp_path / "other"), "blocked")
    assert elsewhere.returncode != 0
    assert "slangspec needs slangpy's version for its cache keys" in elsewhere.stderr


def test_the_install_stamp_changes_with_any_native_library(tmp_path):
    package = tmp_path / "slangpy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "libslang.so.1").write_bytes(b"x" * 10)
    (package / "notes.txt").write_text("not a library")
    before = install_stamp(package)
    (package / "notes.txt").write_text("still not a library")
    assert install_stamp(package) == before
    (package / "libslang.so.1").write_bytes(b"x" * 11)
    assert install_stamp(package) != before


def _wheel_install(site: Path, record: dict[str, str]) -> Path:
    """A slangpy package in ``site`` whose RECORD lists ``record`` (file name -> hash)."""
    package = site / "slangpy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("libslang.so.1", "slangpy_ext.cpython-311-x86_64-linux-gnu.so"):
        (package / name).write_bytes(b"x" * 10)
    info = site / "slangpy-0.43.1.dist-info"
    info.mkdir()
    lines = [f"slangpy/{n},sha256={h},10" for n, h in record.items()]
    (info / "RECORD").write_text("\n".join([*lines, "slangpy/__init__.py,,"]) + "\n")
    return package


def test_the_wheel_stamp_is_the_same_wherever_one_wheel_is_installed(tmp_path):
    listed = {"libslang.so.1": "abc", "slangpy_ext.cpython-311-x86_64-linux-gnu.so": "def"}
    here = _wheel_install(tmp_path / "a", listed)
    there = _wheel_install(tmp_path / "b", listed)
    os.utime(there / "libslang.so.1", (1, 1))
    assert install_stamp(here) != install_stamp(there)  # the local stamp tells them apart
    assert wheel_stamp(here) == wheel_stamp(there) is not None
    # Another Python's extension module does not change it; another library build does.
    other_python = {**listed, "slangpy_ext.cpython-311-x86_64-linux-gnu.so": "xyz"}
    assert wheel_stamp(_wheel_install(tmp_path / "c", other_python)) == wheel_stamp(here)
    rebuilt = {**listed, "libslang.so.1": "abd"}
    assert wheel_stamp(_wheel_install(tmp_path / "d", rebuilt)) != wheel_stamp(here)
    # A library the RECORD does not list (built or copied in by hand): no wheel stamp.
    assert wheel_stamp(_wheel_install(tmp_path / "e", {})) is None


UNUSABLE = """
    import os, sys
    os.environ["SLANGSPEC_CUDA_ARCH"] = "sm_90"  # CUDA's build, with no GPU needed
    from slangspec.compile.slang.api import SlangCompileError
    from slangspec.runtime.backend import SlangUnavailableError
    from slangspec.runtime.module_base import BuildModule, load_module_source

    def load(name, source):
        return load_module_source(BuildModule, name, source, device="cuda", cache_dir=sys.argv[1])

    f = load("found", "float f(float x) { return x; }")["f"]  # described while slangpy is there
    broken = load("broken", "float g(float x) { return y; }")
    sys.modules["slangpy.slangpy_ext"] = None  # slangpy is found, and cannot be imported
    try:
        broken["g"]
    except SlangCompileError:
        print("broken: does not compile")
    sys.modules["slangpy"] = None  # slangpy's directory, and its Slang library, are not found
    try:
        f.warm("found::f call [D1,S6,G0,Vx]", [])
    except SlangUnavailableError as exc:
        print("miss:", exc)
"""


def test_a_cuda_miss_where_slangpy_cannot_be_used_says_what_was_missing(tmp_path):
    """CUDA builds through Slang's C API: one needs slangpy's install, and its Slang library,
    but not its import, and a module that does not compile says so wherever slangpy imports."""
    done = python(UNUSABLE, str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == [
        "broken: does not compile",
        "miss: found::f call [D1,S6,G0,Vx]: its forward kernel is not in the cache and needs "
        "slangpy's Slang library, which cannot be used (slangpy is not installed: it carries "
        "Slang's compiler)",
    ]


def test_loading_where_slangpy_is_not_installed_says_so(tmp_path, monkeypatch):
    import slangspec
    from slangspec.compile import toolchain_identity as toolchain
    from slangspec.compile.slang import slangpy_install

    monkeypatch.setattr(toolchain, "_slangpy", None)  # as a fresh process has it
    monkeypatch.setattr(slangpy_install, "find_install", lambda: None)
    monkeypatch.setitem(sys.modules, "slangpy", None)
    with pytest.raises(
        slangspec.SlangUnavailableError,
        match=r"^module 'absent': the version of slangpy its cache keys cover is not in the "
        r"cache and needs slangpy, which cannot be imported",
    ):
        slangspec.load_source("absent", "float f(float x) { return x; }", cache_dir=tmp_path)
