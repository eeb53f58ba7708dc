"""``python -m edgecli`` runs the command line, as the ``edgecli`` script does."""

from .cli import main

main(prog_name="edgecli")
