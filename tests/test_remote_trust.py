"""What a remote tier may be trusted with, against a real redis-server: without a secret it is
refused unless every writer of the server is trusted, and then nothing from it reaches the local
cache that this process cannot prove; a lease nobody will let go of, and a URL redis-py cannot
take, are named instead of stalling or failing deep inside a call."""

from __future__ import annotations

import re

import pytest

import slangspec


@pytest.fixture(autouse=True)
def _no_remote_settings(monkeypatch):
    for name in ("SLANGSPEC_REMOTE", "SLANGSPEC_REMOTE_SECRET", "SLANGSPEC_REMOTE_TRUST_ALL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def trust_all(monkeypatch) -> None:
    monkeypatch.setenv("SLANGSPEC_REMOTE_TRUST_ALL", "1")


@pytest.mark.parametrize(
    "url",
    [
        "redis://host:1/0?db=x",
        "redis://host:1/0?foo=1",
        "redis://host:1/0?socket_timeout=900",
        "unix:///tmp/redis.sock?db=x",
        "unix://",
        "redis:6379",
    ],
)
def test_a_url_redis_cannot_take_is_refused_naming_where_it_came_from(
    url, tmp_path, monkeypatch, trust_all
):
    with pytest.raises(ValueError, match=f"^remote={re.escape(repr(url))}: expected a redis://"):
        slangspec.Cache.for_running(tmp_path, remote=url)
    monkeypatch.setenv("SLANGSPEC_REMOTE", url)
    with pytest.raises(ValueError, match=f"^SLANGSPEC_REMOTE={re.escape(repr(url))}: expected"):
        slangspec.Cache.for_running(tmp_path)
