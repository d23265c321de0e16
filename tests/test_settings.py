"""The one table of settings: every setting reads its example, refuses a bad value in one
wording that names it, yields to an explicit argument, and is the list on docs/settings.md."""

from __future__ import annotations

import re
import secrets
import warnings
from pathlib import Path

import pytest

from slangspec.cache_store.location import cache_root
from slangspec.settings import SETTINGS, setting

SETTINGS_PAGE = Path(__file__).parent.parent / "docs" / "settings.md"
BAD = {
    # Any text is a path: a cache directory is refused only when it cannot be one (below).
    "SLANGSPEC_DEVICE": "metal",
    "SLANGSPEC_CUDA_ARCH": "compute_90",
    "SLANGSPEC_CACHE_SIZE": "0",
    "SLANGSPEC_CACHE_LEASE": "soon",
    "SLANGSPEC_REMOTE": "http://cache-host",
    "SLANGSPEC_REMOTE_TIMEOUT": "0",
    "SLANGSPEC_REMOTE_MODE": "write-only",
    "SLANGSPEC_REMOTE_SECRET": "short",
    "SLANGSPEC_REMOTE_TRUST_ALL": "yes",
    "SLANGSPEC_DETERMINISTIC": "true",
    "SLANGSPEC_SECRET": "short",
    "SLANGSPEC_LOG": "loud",
    "SLANGSPEC_COMPILE_SERVER": "sometimes",
    "SLANGSPEC_SERVE_IDLE": "-5",
    "SLANGSPEC_SERVE_DEADLINE": "0",
    "SLANGSPEC_COMPILE_WARN": "never",
}
KEY = secrets.token_hex(32)
"""What the secrets' example describes."""
EXAMPLE_READS = {
    "SLANGSPEC_DEVICE": "cuda",
    "SLANGSPEC_CUDA_ARCH": "sm_90",
    "SLANGSPEC_CACHE_DIR": "/var/cache/slangspec",
    "SLANGSPEC_CACHE_SIZE": 2 << 30,
    "SLANGSPEC_CACHE_LEASE": 90.0,
    "SLANGSPEC_REMOTE": "redis://cache-host:6379/0",
    "SLANGSPEC_REMOTE_TIMEOUT": 5.0,
    "SLANGSPEC_REMOTE_MODE": "read",
    "SLANGSPEC_REMOTE_SECRET": KEY.encode(),
    "SLANGSPEC_REMOTE_TRUST_ALL": True,
    "SLANGSPEC_DETERMINISTIC": True,
    "SLANGSPEC_SECRET": KEY.encode(),
    "SLANGSPEC_LOG": "info",
    "SLANGSPEC_PREPARED_DIR": "/opt/slangspec-prepared",
    "SLANGSPEC_COMPILE_SERVER": "off",
    "SLANGSPEC_SERVE_IDLE": 1800.0,
    "SLANGSPEC_SERVE_DEADLINE": 300.0,
    "SLANGSPEC_COMPILE_WARN": 300.0,
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_setting_reads_its_example_and_defaults_when_unset(name, monkeypatch):
    s = SETTINGS[name]
    monkeypatch.delenv(name, raising=False)
    assert setting(name) == s.default
    monkeypatch.setenv(name, KEY if s.secret else s.example)
    assert setting(name) == EXAMPLE_READS[name]


@pytest.mark.parametrize(
    "name", sorted(set(SETTINGS) - {"SLANGSPEC_CACHE_DIR", "SLANGSPEC_PREPARED_DIR"})
)
def test_a_bad_value_names_the_setting_the_value_and_what_it_takes(name, monkeypatch):
    s = SETTINGS[name]
    monkeypatch.setenv(name, BAD[name])
    shown = "<5 bytes>" if s.secret else repr(BAD[name])
    message = f"{name}={shown}: expected {s.expected}, like {s.example}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        setting(name)


def test_a_cache_directory_that_cannot_be_one_is_refused_alike(tmp_path, monkeypatch):
    path = tmp_path / "a-file"
    path.write_text("")
    monkeypatch.setenv("SLANGSPEC_CACHE_DIR", str(path))
    where = f"{str(path.resolve())!r} is a file, not a directory"
    s = SETTINGS["SLANGSPEC_CACHE_DIR"]
    message = f"SLANGSPEC_CACHE_DIR={str(path)!r}: {where}; expected {s.expected}, like {s.example}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cache_root()
    with pytest.raises(ValueError, match=f"^{re.escape(message.replace(s.name, 'cache_dir', 1))}$"):
        cache_root(path)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_set_but_empty_is_unset_except_where_that_would_hide_a_mistake(name, monkeypatch):
    monkeypatch.setenv(name, "")
    if name in ("SLANGSPEC_REMOTE_MODE", "SLANGSPEC_REMOTE_SECRET"):
        with pytest.raises(ValueError, match=f"^{name}="):
            setting(name)
    else:
        assert setting(name) == SETTINGS[name].default


def test_the_device_kind_takes_any_case_and_the_remote_mode_only_its_own(monkeypatch):
    monkeypatch.setenv("SLANGSPEC_DEVICE", "Vulkan")
    assert setting("SLANGSPEC_DEVICE") == "vulkan"
    monkeypatch.setenv("SLANGSPEC_REMOTE_MODE", "READ")
    with pytest.raises(ValueError, match=r"^SLANGSPEC_REMOTE_MODE='READ': expected one of"):
        setting("SLANGSPEC_REMOTE_MODE")


def test_a_secret_is_never_shown(monkeypatch):
    monkeypatch.setenv("SLANGSPEC_SECRET", "hunter2")
    with pytest.raises(ValueError) as raised:
        setting("SLANGSPEC_SECRET")
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize(
    ("name", "source", "given", "bad"),
    [
        ("SLANGSPEC_DEVICE", "device", "vulkan", "metal"),
        ("SLANGSPEC_CACHE_DIR", "cache_dir", "/tmp/given", None),
        ("SLANGSPEC_REMOTE", "remote", "redis://given:6379/0", "http://x"),
    ],
)
def test_an_argument_wins_over_the_environment_and_is_named_in_errors(
    name, source, given, bad, monkeypatch
):
    monkeypatch.setenv(name, SETTINGS[name].example)
    assert setting(name, given, source) == given
    assert setting(name, None, source) == setting(name, "", source) == SETTINGS[name].example
    if bad is not None:
        with pytest.raises(ValueError, match=f"^{source}={bad!r}: expected "):
            setting(name, bad, source)


def test_the_settings_page_lists_exactly_the_settings():
    listed = re.findall(r"^\| `(SLANGSPEC_[A-Z_]+)` \|", SETTINGS_PAGE.read_text(), flags=re.M)
    assert listed == list(SETTINGS)


def test_a_bad_value_fails_where_a_module_loads_not_at_its_first_miss(tmp_path, monkeypatch):
    import slangspec

    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", "2 minutes")
    source = "float f(float x) { return x; }"
    with pytest.raises(ValueError, match=r"^SLANGSPEC_CACHE_LEASE='2 minutes': expected"):
        slangspec.load_source("m", source, cache_dir=str(tmp_path))


def test_a_misspelt_variable_is_a_warning_naming_the_setting_meant(tmp_path, monkeypatch):
    import slangspec
    from slangspec import settings

    monkeypatch.setattr(settings, "_unknown_checked", False)
    monkeypatch.setenv("SLANGSPEC_CACHE_MAX_SIZE", "1GB")
    monkeypatch.setenv("SLANGSPEC_ZZZ", "1")
    source = "float f(float x) { return x; }"
    with pytest.warns(slangspec.SettingWarning) as caught:
        slangspec.load_source("m", source, cache_dir=str(tmp_path))
    assert [str(w.message) for w in caught] == [
        "SLANGSPEC_CACHE_MAX_SIZE is set but is no slangspec setting, so it changes nothing; "
        "did you mean SLANGSPEC_CACHE_SIZE?",
        "SLANGSPEC_ZZZ is set but is no slangspec setting, so it changes nothing; the settings "
        "are " + ", ".join(SETTINGS),
    ]
    assert caught[0].filename == __file__, "the warning points at the load"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        slangspec.load_source("m", source, cache_dir=str(tmp_path))  # once a process


def test_only_known_variables_warn_nothing(tmp_path, monkeypatch):
    import slangspec
    from slangspec import settings

    monkeypatch.setattr(settings, "_unknown_checked", False)
    monkeypatch.setenv("SLANGSPEC_CACHE_SIZE", "1GB")
    monkeypatch.setenv("SLANGSPECX", "1")  # not the prefix
    with warnings.catch_warnings():
        warnings.simplefilter("error", slangspec.SettingWarning)
        slangspec.load_source("m", "float f(float x) { return x; }", cache_dir=str(tmp_path))
