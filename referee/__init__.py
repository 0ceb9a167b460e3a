"""The referee for 3UP 3DOWN bot tournaments."""

from __future__ import annotations

# First, before any compiled module can load: compiled or source (issue 16).
from ._compiled import status as engine_status

__all__ = ["__version__", "engine_status", "version"]

#: The release (pyproject.toml reads it from here; CHANGELOG.md lists what each one holds).
__version__ = "0.2.0"


def version() -> str:
    """This referee's version: what ``referee --version`` prints, replays and the bots' User-Agent carry."""
    return __version__
