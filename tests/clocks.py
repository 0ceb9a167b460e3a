"""A clock for the code that takes one (``clock=``): time moves only when a
test says so, so that decays, TTLs and margins are tested without sleeping
and without the machine's load in the figures."""

from __future__ import annotations


class FakeClock:
    """Call it for the time; move it on with ``clock.now += seconds``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
