"""``python -m referee.cli``: the ``referee`` command."""

from . import main

main()
