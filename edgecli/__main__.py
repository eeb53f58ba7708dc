"""``python -m edgecli`` runs the command line, as the ``edgecli`` script does."""

from .cli import console

console()
