"""A clock for the code that takes one (``clock=``): time moves only when a
test says so, so that decays, TTLs and margins are tested without sleeping
and without the machine's load in the figures."""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


class FakeClock:
    """Call it for the time; move it on with ``clock.now += seconds``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class SteppedClock:
    """A :class:`referee.service.clock.Clock` whose time moves only by
    :meth:`advance`: the sleepers due by then wake in the order of their
    times, each seeing the time it asked for. Wall time (:meth:`time`) and
    the monotonic clock move together.

    `workers`: how many of the service's tasks sleep on it when it is idle
    (the deadline watch, the admission retrier): :meth:`advance` waits, before
    the time moves and after each wake, until that many sleep again, so
    every tick's work is done before the next one (no tick is skipped
    because its worker was still busy with the last)."""

    def __init__(self, wall: float, monotonic: float = 1000.0, *, workers: int = 0) -> None:
        import asyncio
        import heapq

        self._asyncio, self._heapq = asyncio, heapq
        self._wall0, self._mono0, self._t = wall, monotonic, 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0
        self.workers = workers
        self._slept: asyncio.Condition | None = None

    def time(self) -> float:
        return self._wall0 + self._t

    def monotonic(self) -> float:
        return self._mono0 + self._t

    def _sleeping(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def _cond(self) -> object:
        if self._slept is None:
            self._slept = self._asyncio.Condition()
        return self._slept

    async def sleep(self, seconds: float) -> None:
        fut: object = self._asyncio.get_running_loop().create_future()
        self._seq += 1
        self._heapq.heappush(self._sleepers, (self._t + max(0.0, seconds), self._seq, fut))  # type: ignore[arg-type]
        cond = self._cond()
        async with cond:  # type: ignore[attr-defined]
            cond.notify_all()  # type: ignore[attr-defined]
        try:
            await fut  # type: ignore[misc]
        finally:
            if not fut.done():  # type: ignore[attr-defined]
                fut.cancel()  # type: ignore[attr-defined]

    async def settled(self) -> None:
        """Until :attr:`workers` tasks sleep on this clock (the service is idle on it)."""
        cond = self._cond()
        async with self._asyncio.timeout(60):  # a bound for a broken test, never a wait
            async with cond:  # type: ignore[attr-defined]
                await cond.wait_for(lambda: self._sleeping() >= self.workers)  # type: ignore[attr-defined]

    async def advance(self, seconds: float) -> None:
        """Move the time on by `seconds`, waking every sleeper due meanwhile,
        in the order of their times, each tick's work done before the next."""
        await self.settled()
        target = self._t + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, fut = self._heapq.heappop(self._sleepers)
            if fut.done():
                continue
            self._t = max(self._t, due)
            fut.set_result(None)
            await self.settled()
        self._t = target


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when nothing on it can run: then
    it jumps to its earliest timer (trio's "autojump" clock). Time spent
    computing is zero; a timer fires when everything else on the loop waits.

    For tests whose parties all live on one loop (the match runner and bots
    on loopback): a deadline fires when the bot really hangs, never because a
    loaded machine stalled the process between a reply and its reading, and
    nobody waits the deadlines out. A wait counts as "nothing can run" once
    the selector stays empty for `grace_s` of real time (bytes written to a
    loopback socket are readable at once; the grace covers the kernel
    delivering them late) and no work of this loop's is in a thread
    (:meth:`run_in_executor`: the sample bots' decide): time stands still
    while a thread works.
    """

    def __init__(self, grace_s: float = 0.1) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self.grace_s = grace_s
        #: The virtual time; it starts where the real clock is.
        self.now = time.monotonic()
        #: Calls of :meth:`run_in_executor` not done yet.
        self._in_threads = 0

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor: Any, func: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        future = super().run_in_executor(executor, func, *args)
        self._in_threads += 1

        def done(_: object) -> None:
            self._in_threads -= 1

        future.add_done_callback(done)
        return future


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The selector of a :class:`VirtualTimeLoop`: a wait for a timer that
    nothing else ends within the grace is jumped over."""

    loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self.loop
        if loop is None or timeout is None or timeout <= 0 or loop._in_threads:
            return super().select(timeout)  # type: ignore[no-any-return]
        events: list[tuple[selectors.SelectorKey, int]] = super().select(min(timeout, loop.grace_s))
        if not events:
            loop.now += timeout  # the earliest timer is due
        return events
