"""The slangspec logger: quiet by default, SLANGSPEC_LOG turns it on; what it records."""

import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import slangspec
from workers import python

SCRIPT = """
import sys, torch, slangspec
m = slangspec.load_source("logged", "[Differentiable] float sq(float x) { return x * x; }",
                          cache_dir=sys.argv[1])
dev = "cuda" if m.device_kind == "cuda" else "cpu"
x = torch.ones(3, device=dev, requires_grad=True)
m.sq(x).sum().backward()
"""


def run(cache, **env):
    out = python(SCRIPT, cache, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_quiet_by_default_then_compiles_misses_and_hits_when_asked(tmp_path):
    assert "slangspec INFO" not in run(tmp_path / "quiet")  # SLANGSPEC_LOG unset below
    cold = run(tmp_path / "c", SLANGSPEC_LOG="info")
    assert "miss logged::sq call [D1,S6,G1,V3]" in cold
    assert "built logged::sq call [D1,S6,G1,V3]: forward kernel in" in cold
    assert "Slang compile and load" in cold and "code generation" in cold
    # Built when autograd asks for it, or (CUDA) with the forward kernel.
    assert (
        "backward kernel for grads 1 in" in cold or "with its backward kernel for grads 1" in cold
    )
    assert "Slang front-end of module logged" in cold
    warm = run(tmp_path / "c", SLANGSPEC_LOG="DEBUG")
    assert "hit logged::sq call [D1,S6,G1,V3]" in warm and "built" not in warm


def test_a_remote_fallback_is_logged(tmp_path):
    # Nothing listens on port 1: the call computes locally and says so.
    err = run(
        tmp_path / "c",
        SLANGSPEC_LOG="info",
        SLANGSPEC_REMOTE="redis://127.0.0.1:1/0",
        SLANGSPEC_REMOTE_TRUST_ALL="1",
    )
    assert "remote cache redis://127.0.0.1:1/0 failed" in err and "computing locally" in err


def test_a_lease_wait_is_logged(tmp_path, caplog):
    cache = slangspec.Cache(tmp_path / "c")
    held = threading.Event()

    def holder():
        with cache.leases.hold("k", lambda: False):
            held.set()
            time.sleep(0.3)

    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    with caplog.at_level(logging.INFO, logger="slangspec"), cache.leases.hold("k", lambda: False):
        pass
    t.join()
    assert any(
        "waited" in r.getMessage() and "compile lease k" in r.getMessage() for r in caplog.records
    )


def test_a_bad_level_is_refused_naming_the_setting():
    code = "import slangspec; slangspec.load_source('m', 'float f(float x) { return x; }')"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "SLANGSPEC_LOG": "loud"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "SLANGSPEC_LOG='loud': expected one of debug, info, warning, error" in out.stderr


@pytest.fixture(autouse=True)
def _unset(monkeypatch):
    monkeypatch.delenv("SLANGSPEC_LOG", raising=False)
