"""Shared state of the container tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

#: Measured figures, printed at the end of the run.
FIGURES: dict[str, str] = {}
#: Why the container tests were skipped (printed at the end of the run).
WHY_SKIPPED: list[str] = []


async def wait_for_line(path: Path, prefix: str, timeout: float = 5.0) -> str:
    """The first line of `path` starting with `prefix`, waiting for it to appear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {prefix!r} line in {path}:\n{path.read_text() if path.exists() else ''}")
