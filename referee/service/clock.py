"""The service's time, injected (issue 33): what it reads of the clock and
how it waits go through one :class:`Clock`.

The real service runs on :data:`SYSTEM` (``time.time``, ``time.monotonic``,
``asyncio.sleep``); a test passes a clock of its own whose time moves only
when the test says, so deadlines, retries and restarts are tested in no time
and the same on a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (deadlines, "accepted at")."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (pauses, rates)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait this long on this clock."""
        ...


class SystemClock:
    """The machine's clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM: Clock = SystemClock()
