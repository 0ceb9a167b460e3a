"""The referee for 3UP 3DOWN bot tournaments."""

from __future__ import annotations

import functools
from importlib import metadata

# First, before any compiled module can load: compiled or source (issue 16).
from ._compiled import status as engine_status

__all__ = ["engine_status", "version"]


@functools.cache
def version() -> str:
    """The installed referee's version (read once: importlib.metadata takes ~0.5 ms)."""
    try:
        return metadata.version("referee")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout
        return "0"
