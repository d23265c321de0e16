"""``python -m slangspec`` runs the ``specialize`` command line."""

from .cli import main

main(prog_name="specialize")
