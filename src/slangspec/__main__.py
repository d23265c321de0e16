"""``python -m slangspec`` runs the ``specialize`` command line."""

from .cli import run

run()
