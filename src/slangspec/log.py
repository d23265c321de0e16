"""The ``slangspec`` logger, which every module logs under (``logging.getLogger(__name__)``).

Quiet by default, as a library's logger is: ``SLANGSPEC_LOG=info`` (or ``debug``) sends its
records to standard error, from the first module loaded or command run on (``configure``). An
application that configures logging itself can instead set the level of, and a handler on, the
``slangspec`` logger as for any library.
"""

from __future__ import annotations

import logging
import sys

from .cache_store import setting

logger = logging.getLogger("slangspec")
logger.addHandler(logging.NullHandler())


def configure() -> None:
    """Send the logger's records to standard error at ``SLANGSPEC_LOG``'s level, if set."""
    level = setting("SLANGSPEC_LOG")
    if level is None or any(getattr(h, "_slangspec", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("slangspec %(levelname)s %(name)s: %(message)s"))
    handler._slangspec = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
