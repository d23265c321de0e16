"""A CUDA module whose content no process has reflected (new, or edited) starts Slang's session
with the module loaded, and NVRTC, on their threads when it loads, so that its first call's
build finds them under way; a module the cache has seen starts nothing. Runs without a GPU:
the modules build for an architecture (``SLANGSPEC_CUDA_ARCH``)."""

from __future__ import annotations

import os
import time

import pytest

from slangspec.cache import Cache
from slangspec.compile import cuda_source
from slangspec.compile.slang_api import SlangCompileError, global_session
from slangspec.runtime.module_base import BuildModule, load_module

SOURCE = "import slangpy;\n[Differentiable]\nfloat poly(float a, float x) { return a * x * x; }\n"


@pytest.fixture
def builds(monkeypatch, tmp_path):
    monkeypatch.setenv("SLANGSPEC_CUDA_ARCH", "sm_90")
    cache = Cache(tmp_path / "cache")

    def load(text: str = SOURCE) -> BuildModule:
        path = tmp_path / "m.slang"
        path.write_text(text)
        return load_module(BuildModule, path, cache=cache, device="cuda")

    return load


def kept_for(module: BuildModule) -> list[tuple]:
    return [key for key in cuda_source._sessions if key[-2:] == (module.text, module.content)]


def test_a_new_module_is_loaded_on_slangs_thread_and_its_front_end_takes_it(builds):
    m = builds()
    m.builder.foresee()
    foreseen = m.builder._foreseen
    assert foreseen is not None
    foreseen.result()
    kept = kept_for(m)
    assert len(kept) == 1  # the module's session, made on Slang's thread
    loaded = cuda_source._sessions[kept[0]]
    m.builder.front_end()
    assert cuda_source._sessions[kept[0]] is loaded  # the build used it: no second load
    assert m.builder._foreseen is None


def test_a_module_the_cache_has_reflected_starts_nothing(builds):
    m = builds()
    m.builder.front_end()  # reflects, and notes that it did
    again = builds()
    again.builder.foresee()
    assert again.builder._foreseen is None
    edited = builds(SOURCE.replace("a * x * x", "a * x * x + 1"))
    edited.builder.foresee()
    assert edited.builder._foreseen is not None
    edited.builder._foreseen.result()


def test_a_module_that_does_not_compile_fails_in_its_build_as_without(builds):
    m = builds(SOURCE.replace("return", "retrun"))
    m.builder.foresee()
    with pytest.raises(SlangCompileError, match="retrun"):
        m.builder.front_end()


def test_a_fork_waits_for_what_slangs_thread_is_doing():
    slow = global_session().submit(time.sleep, 0.5)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert slow.done()  # else the child could have inherited the thread's locks held
