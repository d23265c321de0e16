"""A hostile Redis server (``hostile_redis``) never crashes, exhausts or holds a process: every
reply it sends past a bound (arrays nested or counted, strings, a whole reply's deadline) or
against RESP2 ends in the remote tier's "cannot be used now; computing locally", soon, within
bounded memory, and calls still compute right."""

from __future__ import annotations

import time
import tracemalloc
import warnings

import pytest
import torch
from hostile_redis import BEHAVIOURS, STREAM_S, HostileRedis

import slangspec
from slangspec.cache_store import CacheWarning
from slangspec.cache_store.remote import RemoteTier
from slangspec.cache_store.remote_config import RemoteSettings

TIMEOUT_S = 0.5
"""The deadline of a call to the hostile server: the trickle sends a byte every 0.3 s."""
MEMORY_BOUND = 4 << 20
"""What a refused reply may cost the process at most: its bound is 1 MiB of strings."""
REFUSED_AS = {"trickle": "Slow"}
"""The failure each behaviour is named by in the warning, when not a ProtocolError."""


@pytest.fixture(scope="module")
def hostile():
    server = HostileRedis()
    yield server
    server.stop()


def cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_a_hostile_reply_leaves_the_server_alone_soon_within_bounded_memory(hostile, behaviour):
    remote = RemoteTier(RemoteSettings(hostile.url(behaviour), trust_all=True, timeout=TIMEOUT_S))
    tracemalloc.start()
    try:
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = remote.get("k")
        took = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got is None
    (message,) = cache_warnings(caught)
    refused_as = REFUSED_AS.get(behaviour, "ProtocolError")
    assert f"cannot be used now ({refused_as}: " in message
    assert message.endswith("computing locally")
    assert ":pw@" not in message
    assert peak < MEMORY_BOUND, f"{peak} bytes allocated"
    assert took < STREAM_S / 2, "the reply was read to its end"
    assert remote.fact("f") == {}, "the server is left alone for a while"


def test_a_scan_of_keys_that_are_not_text_lists_nothing(hostile):
    """The tools' listings decoded each key as it came: a byte that is no UTF-8 raised."""
    remote = RemoteTier(RemoteSettings(hostile.url("keys-not-text"), trust_all=True))
    with pytest.warns(CacheWarning, match="SCAN answered a key that is not text"):
        assert remote.entry_keys() == []


SOURCE = "float twice(float x) { return 2 * x; }"


@pytest.mark.parametrize("behaviour", ["nested", "length-1e14", "trickle"])
def test_a_module_loaded_against_a_hostile_server_computes_locally(
    hostile, behaviour, tmp_path, monkeypatch, tdev
):
    monkeypatch.setenv("SLANGSPEC_REMOTE_TIMEOUT", str(TIMEOUT_S))
    x = torch.arange(5.0, device=tdev)
    with pytest.warns(CacheWarning, match="cannot be used now"):
        m = slangspec.load_source(
            f"hostile_{behaviour.replace('-', '_')}",
            SOURCE,
            cache_dir=tmp_path,
            remote=hostile.url(behaviour),
            remote_trust_all=True,
        )
        torch.testing.assert_close(m.twice(x), 2 * x)
