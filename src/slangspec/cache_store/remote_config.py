"""Where the remote tier is and how this process may use it, read from its settings: apart from
the tier itself, so that a process without a remote imports nothing that speaks to one."""

from __future__ import annotations

from dataclasses import field

from ..define import frozen
from ..settings import SETTINGS, setting, url_shown


@frozen
class RemoteSettings:
    """Where the remote tier is and how this process may use it."""

    url: str
    secret: bytes | None = None
    read_only: bool = False
    trust_all: bool = False
    """Whether to use the server without a secret, trusting every writer of it; without a
    secret, the settings are refused otherwise."""
    given_as: str = field(default="SLANGSPEC_REMOTE", compare=False, repr=False)
    """The setting or argument the URL came from, for messages."""
    timeout: float = SETTINGS["SLANGSPEC_REMOTE_TIMEOUT"].default
    """The seconds one call to the server may take, its whole reply included."""

    def __post_init__(self) -> None:
        if self.secret is None and not self.trust_all:
            raise ValueError(
                f"{self.given_as}={self.shown!r}: SLANGSPEC_REMOTE_SECRET is not set, and "
                "without it anyone who can write to the server can make this machine run a "
                "kernel of their choosing; set SLANGSPEC_REMOTE_SECRET (16 bytes or more, the "
                "same on every machine), or SLANGSPEC_REMOTE_TRUST_ALL=1 "
                "(remote_trust_all=True) to trust every writer of the server"
            )

    def __repr__(self) -> str:
        secret = "a secret" if self.secret is not None else "no secret"
        return f"<RemoteSettings {self.shown}, {secret}>"

    @property
    def shown(self) -> str:
        """The URL without its password, for messages."""
        return url_shown(self.url)


def remote_settings(url: str | None = None, trust_all: bool | None = None) -> RemoteSettings | None:
    """The remote tier named by ``url``, else by ``SLANGSPEC_REMOTE``; None when neither is set.
    ValueError naming the setting when a value is not one it accepts, or when there is no
    secret and trusting every writer (``trust_all``, else ``SLANGSPEC_REMOTE_TRUST_ALL``) was
    not asked for."""
    chosen = setting("SLANGSPEC_REMOTE", url, "remote")
    if chosen is None:
        return None
    return RemoteSettings(
        chosen,
        setting("SLANGSPEC_REMOTE_SECRET"),
        setting("SLANGSPEC_REMOTE_MODE") == "read",
        setting("SLANGSPEC_REMOTE_TRUST_ALL") if trust_all is None else trust_all,
        "remote" if url else "SLANGSPEC_REMOTE",
        setting("SLANGSPEC_REMOTE_TIMEOUT"),
    )
