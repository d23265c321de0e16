"""Every ``SLANGSPEC_*`` setting, as data: its name, how its text is read, its default, an example
and what it does; and the one reader (``setting``) that every part of slangspec asks. Beside
them, what a process reports by them: the ``slangspec`` logger that ``SLANGSPEC_LOG``
configures, and the counts of the compile work it did (``compile_counts``).

Standard library and the foundation beside it (errors, frozen) only: the cache store reads its
own settings here and every room above it (devices, warm workers, the command line) reads the
rest the same way. A value that cannot be read is a ValueError in one wording, naming the setting
(or the argument it came from), the value, what was expected and an example. Sizes and durations
are read as people write them (``parse_size``, ``parse_duration``), for settings and command-line
options alike.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .define import frozen
from .errors import SlangspecWarning

MIN_SECRET_BYTES = 16
DEVICE_KINDS = ("cuda", "vulkan")
REMOTE_MODES = ("readwrite", "read")
REMOTE_SCHEMES = ("redis", "rediss", "unix")
LOG_LEVELS = ("debug", "info", "warning", "error")
SERVER_MODES = ("auto", "use", "off")
PREFIX = "SLANGSPEC_"


SIZE_EXAMPLE = "a size like 1048576, 500M or 2G"
DURATION_EXAMPLE = "a duration like 90s, 15m, 12h or 7d"

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _scaled(text: str, units: dict[str, int], suffix: str, example: str) -> float:
    """A non-negative number with an optional unit letter (and ``suffix`` after it), scaled;
    ValueError saying what was expected."""
    m = re.fullmatch(rf"(\d+(?:\.\d+)?)\s*([{''.join(units)}]?){suffix}", text.strip().lower())
    value = float(m.group(1)) * units[m.group(2)] if m else math.nan
    if not math.isfinite(value):
        raise ValueError(f"{text!r}: expected {example}")
    return value


def parse_size(text: str) -> int:
    """Bytes: '1048576', '512K', '500M', '2G', '1T', also '500MiB' and '2GB' (binary units,
    any case)."""
    return int(_scaled(text, _SIZE_UNITS, "i?b?", SIZE_EXAMPLE))


def parse_duration(text: str) -> float:
    """Seconds: '90', '90s', '15m', '12h', '7d' or '2w' (any case)."""
    return _scaled(text, _DURATION_UNITS, "", DURATION_EXAMPLE)


@frozen
class Setting:
    """One setting: ``parse`` turns its text into its value, raising ValueError when it
    cannot; ``expected`` says in words what it takes."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    example: str
    expected: str
    about: str
    secret: bool = False
    """Whether the value is a key, never shown in a message."""
    empty_is_unset: bool = True
    """Whether the variable set but empty reads as unset; else an empty value is a bad one."""
    shown: Callable[[str], str] | None = None
    """How a value is written in a message, where not as it is (a URL without its password)."""


def _choice(*choices: str, any_case: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        chosen = text.lower() if any_case else text
        if chosen not in choices:
            raise ValueError(text)
        return chosen

    return parse


def _arch(text: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}[af]?", text):
        raise ValueError(text)
    return text


def _positive_size(text: str) -> int:
    value = parse_size(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


def _remote_url(text: str) -> str:
    # The errors leave the text out: it may hold a password.
    parts = urlsplit(text)  # ValueError for a malformed host ("redis://[::1")
    if parts.scheme not in REMOTE_SCHEMES or not text.lower().startswith(parts.scheme + "://"):
        raise ValueError("not a URL of a Redis server")
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError("no socket path")
    else:
        _ = parts.port  # ValueError for a port that is not one ("redis://host:notaport")
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise ValueError("a database that is not a number")
    # The database is the only option a URL may carry: timeouts and the rest are slangspec's.
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(name != "db" or not value.isdigit() for name, value in query):
        raise ValueError("a query other than ?db=N")
    return text


def url_shown(text: str) -> str:
    """``text``, a remote tier's URL, for a message: its password as ``***``. Text that is
    not a URL the remote tier takes hides everything between its scheme and its last ``@``,
    since which part of it a password is cannot be told."""
    try:
        _remote_url(text)
    except ValueError:
        if "@" not in text:
            return text
        scheme, sep, _ = text.partition("://")
        return (scheme + sep if sep else "") + "***@" + text.rpartition("@")[2]
    parts = urlsplit(text)
    login, at, place = parts.netloc.rpartition("@")
    user, colon, _ = login.partition(":")
    if not colon:
        return text
    return urlunsplit(parts._replace(netloc=f"{user}:***{at}{place}"))


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _key(text: str) -> bytes:
    key = text.encode()
    if len(key) < MIN_SECRET_BYTES:
        raise ValueError(f"{len(key)} bytes long")
    return key


_KEY_EXAMPLE = "the output of `openssl rand -hex 32`"

SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "SLANGSPEC_DEVICE",
            _choice(*DEVICE_KINDS, any_case=True),
            None,
            "cuda",
            f"one of {', '.join(DEVICE_KINDS)}",
            "the device kind, where `device=` is not given; else CUDA when torch sees a GPU, "
            "else Vulkan",
        ),
        Setting(
            "SLANGSPEC_CUDA_ARCH",
            _arch,
            None,
            "sm_90",
            "a GPU architecture such as sm_80, sm_90 or sm_90a",
            "build CUDA kernels for this architecture, not the GPU's: a process with it set "
            "needs no GPU nor CUDA driver, builds and keeps kernels, and runs none "
            "(`specialize warm --arch` sets it); unset by default",
        ),
        Setting(
            "SLANGSPEC_CACHE_DIR",
            str,
            None,
            "/var/cache/slangspec",
            "a directory",
            "the cache root, where `cache_dir=` is not given; else the user cache directory",
        ),
        Setting(
            "SLANGSPEC_PREPARED_DIR",
            str,
            None,
            "/opt/slangspec-prepared",
            "a directory",
            "where `specialize prepare` writes, and CUDA builds read, slangpy's Slang library "
            "as IR and Slang's CUDA prelude, made once per toolchain; else `_prepared` in the "
            "installed package",
        ),
        Setting(
            "SLANGSPEC_CACHE_SIZE",
            _positive_size,
            1 << 30,
            "2G",
            "a size in bytes > 0, like 1048576, 500M or 2G",
            "the bound on the whole cache root (1 GiB by default), slangpy's compiled Slang "
            "library and the shader cache included; eviction never removes those, nor the "
            "kernel used last, and a bound too small for them is a SettingWarning once a process",
        ),
        Setting(
            "SLANGSPEC_CACHE_LEASE",
            _positive_duration,
            120.0,
            "90s",
            "a number of seconds > 0, or a duration like 90s, 15m or 12h",
            "how long a compile lease holds, unless renewed, before others may take it "
            "(120 s by default), and how long a client waits on the compile server's work on "
            "one request; a lease whose holder is seen dead is taken at once",
        ),
        Setting(
            "SLANGSPEC_REMOTE",
            _remote_url,
            None,
            "redis://cache-host:6379/0",
            "a redis:// or rediss:// URL (a numeric port and database, if given) or a unix:// "
            "one, with no query but ?db=N",
            "the shared remote tier, where `remote=` is not given; none by default",
            shown=url_shown,
        ),
        Setting(
            "SLANGSPEC_REMOTE_TIMEOUT",
            _positive_duration,
            2.0,
            "5s",
            "a number of seconds > 0, or a duration like 90s, 15m or 12h",
            "how long one call to the remote tier may take, its whole reply included, before "
            "the process leaves the server alone for 30 s and computes locally (2 s by default)",
        ),
        Setting(
            "SLANGSPEC_REMOTE_MODE",
            _choice(*REMOTE_MODES),
            "readwrite",
            "read",
            f"one of {', '.join(REMOTE_MODES)}",
            "`read`: use the remote tier, never write to it",
            empty_is_unset=False,
        ),
        Setting(
            "SLANGSPEC_REMOTE_SECRET",
            _key,
            None,
            _KEY_EXAMPLE,
            f"at least {MIN_SECRET_BYTES} bytes",
            "the key of the MAC every remote entry and fact carries; the same on every machine",
            secret=True,
            # Set but empty (a secret file that was missing) must not quietly turn MACs off.
            empty_is_unset=False,
        ),
        Setting(
            "SLANGSPEC_REMOTE_TRUST_ALL",
            _flag,
            False,
            "1",
            "1 or 0",
            "`1`: use a remote tier without `SLANGSPEC_REMOTE_SECRET`, trusting every writer "
            "of the server (what can be checked without a secret still is), where "
            "`remote_trust_all=` is not given; a remote tier without a secret is refused "
            "otherwise",
        ),
        Setting(
            "SLANGSPEC_SECRET",
            _key,
            None,
            _KEY_EXAMPLE,
            f"at least {MIN_SECRET_BYTES} bytes",
            "the key of the MAC that lets cubins travel in bundles; the same on both machines",
            secret=True,
        ),
        Setting(
            "SLANGSPEC_COMPILE_SERVER",
            _choice(*SERVER_MODES, any_case=True),
            "auto",
            "off",
            f"one of {', '.join(SERVER_MODES)}",
            "CUDA builds of a miss through the user's compile server of this cache root "
            "(`specialize serve`): `auto` asks it and starts it on the first miss when none "
            "runs, `use` only asks one that runs, `off` builds in the process",
        ),
        Setting(
            "SLANGSPEC_SERVE_IDLE",
            _positive_duration,
            600.0,
            "30m",
            "a number of seconds > 0, or a duration like 90s, 15m or 12h",
            "how long the compile server waits for a request before it exits (10 min by default)",
        ),
        Setting(
            "SLANGSPEC_SERVE_DEADLINE",
            _positive_duration,
            90.0,
            "5m",
            "a number of seconds > 0, or a duration like 90s, 15m or 12h",
            "how long the compile server works on one request before it answers that it "
            "failed and exits, leaving the build to its client (90 s by default; keep it below "
            "`SLANGSPEC_CACHE_LEASE`, which bounds the client's wait)",
        ),
        Setting(
            "SLANGSPEC_COMPILE_WARN",
            _positive_duration,
            120.0,
            "5m",
            "a number of seconds > 0, or a duration like 90s, 15m or 12h",
            "how long Slang compiles one module's kernels before a `StillCompilingWarning` "
            "says so, naming the module (2 min by default): Slang 2026.12 never finishes the "
            "backward pass of a differentiable tensor read inside a branch",
        ),
        Setting(
            "SLANGSPEC_DETERMINISTIC",
            _flag,
            False,
            "1",
            "1 or 0",
            "`1`: the gradient of an argument many calls share (broadcast over the call) is "
            "stored per call and summed by torch in a fixed order, bit for bit the same on "
            "every run, at the cost of memory for each call; by default each call adds into "
            "the gradient in place, atomically, in whatever order the GPU runs them",
        ),
        Setting(
            "SLANGSPEC_LOG",
            _choice(*LOG_LEVELS, any_case=True),
            None,
            "info",
            f"one of {', '.join(LOG_LEVELS)}",
            "log what slangspec does to standard error at this level (`info`: compiles with "
            "their phases and times, misses, lease waits, remote fallbacks; `debug`: hits "
            "too); quiet by default",
        ),
    )
}


def setting(name: str, given: str | None = None, source: str | None = None) -> Any:
    """The value of the setting ``name``: from ``given`` (an argument, called ``source`` in a
    message) when it is set, else from the environment, else the setting's default."""
    s = SETTINGS[name]
    text, where = (given, source) if given else (os.environ.get(name), None)
    if text is None or (not text and s.empty_is_unset):
        return s.default
    try:
        return s.parse(text)
    except ValueError:
        raise refusal(name, text, where) from None


class SettingWarning(SlangspecWarning):
    """A ``SLANGSPEC_*`` variable that names no setting (a misspelt one is otherwise ignored
    without a word), or a setting's value that cannot do what it says: a
    ``SLANGSPEC_CACHE_SIZE`` below what the cache needs."""


_unknown_checked = False


def check_all() -> None:
    """ValueError for the first setting whose variable cannot be read: asked where a module
    loads, so a bad value fails there and not at the first miss that reads it. Each
    ``SLANGSPEC_*`` variable that is no setting is a SettingWarning, once a process."""
    for name in SETTINGS:
        setting(name)
    global _unknown_checked
    if not _unknown_checked:
        _unknown_checked = True
        for message in unknown_variables():
            warnings.warn(message, SettingWarning, stacklevel=caller_outside())


def unknown_variables_said() -> None:
    """Warn no more in this process of variables that name no setting: the command said
    them (``unknown_variables``)."""
    global _unknown_checked
    _unknown_checked = True


def unknown_variables() -> list[str]:
    """What to say of each ``SLANGSPEC_*`` variable in the environment that names no setting."""
    unknown = sorted(n for n in os.environ if n.startswith(PREFIX) and n not in SETTINGS)
    if not unknown:
        return []
    import difflib  # only once a variable is found wrong

    suffixes = [known.removeprefix(PREFIX) for known in SETTINGS]
    said = []
    for name in unknown:
        near = difflib.get_close_matches(name.removeprefix(PREFIX), suffixes, n=1)
        hint = (
            f"did you mean {PREFIX}{near[0]}?"
            if near
            else f"the settings are {', '.join(SETTINGS)}"
        )
        said.append(f"{name} is set but is no slangspec setting, so it changes nothing; {hint}")
    return said


def caller_outside() -> int:
    """The ``stacklevel`` of a warning raised in the function calling this one that points at
    the first frame outside slangspec: the user's call."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def refusal(name: str, text: str, source: str | None = None, why: str | None = None) -> ValueError:
    """The one wording of a bad value ``text`` of the setting ``name`` (or of the argument
    ``source`` it came from), saying ``why`` when the value is bad for more than its form."""
    s = SETTINGS[name]
    if s.secret:
        shown = f"<{len(text.encode())} bytes>"
    else:
        shown = repr(text if s.shown is None else s.shown(text))
    because = f"{why}; " if why else ""
    return ValueError(f"{source or name}={shown}: {because}expected {s.expected}, like {s.example}")


logger = logging.getLogger("slangspec")
"""The logger every module of slangspec logs under (``logging.getLogger(__name__)``). Quiet by
default, as a library's logger is: ``SLANGSPEC_LOG=info`` (or ``debug``) sends its records to
standard error, from the first module loaded or command run on (``configure_logging``). An
application that configures logging itself can instead set the level of, and a handler on, the
``slangspec`` logger as for any library."""
logger.addHandler(logging.NullHandler())


def configure_logging() -> None:
    """Send the logger's records to standard error at ``SLANGSPEC_LOG``'s level, if set."""
    level = setting("SLANGSPEC_LOG")
    if level is None or any(getattr(h, "_slangspec", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("slangspec %(levelname)s %(name)s: %(message)s"))
    handler._slangspec = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())


compile_counts: Counter[str] = Counter()
"""What ran in this process, for tests and benchmarks to read: "specialize" (type resolution of
a miss), "codegen" (a kernel source generated), "front_end" (a user module reflected), "kernel"
(a kernel compiled: through slangpy on Vulkan, through Slang's C API and NVRTC on CUDA),
"library" (slangpy's Slang library compiled to IR for CUDA builds), "served" (a function
described or a kernel built for this process by the user's compile server)."""
