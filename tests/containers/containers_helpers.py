"""Shared state of the container tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

#: Measured figures, printed at the end of the run.
FIGURES: dict[str, str] = {}
#: Why the container tests were skipped (printed at the end of the run).
WHY_SKIPPED: list[str] = []
