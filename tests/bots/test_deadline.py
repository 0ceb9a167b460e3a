"""referee.bots.deadline: asyncio.timeout's behaviour on one shared timer."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
from collections.abc import AsyncIterator, Callable

import pytest

from referee.bots.deadline import Deadline, Deadlines, deadline

#: The two ways to hold a deadline: ``async with`` and the plain ``with`` of the
#: per-request path (nothing in entering or leaving a block awaits).
FORMS = ["async with", "with"]


@contextlib.asynccontextmanager
async def held(form: str, seconds: float) -> AsyncIterator[Deadline]:
    """A block under `deadline(seconds)`, held the `form` way."""
    if form == "async with":
        async with deadline(seconds) as d:
            yield d
    else:
        with deadline(seconds) as d:
            yield d


@pytest.mark.parametrize("form", FORMS)
async def test_an_overrunning_block_raises_timeout_error_at_its_deadline(form: str) -> None:
    loop = asyncio.get_running_loop()
    begun = loop.time()
    with pytest.raises(TimeoutError):
        async with held(form, 0.05) as d:
            await asyncio.sleep(10)
    assert d.expired()
    assert loop.time() - begun == pytest.approx(0.05)  # virtual time: the deadline to the tick


@pytest.mark.parametrize("form", FORMS)
async def test_a_block_that_ends_in_time_is_left_alone(form: str) -> None:
    async with held(form, 1.0) as d:
        await asyncio.sleep(0.01)
    assert not d.expired()
    # The task has no cancellation left pending: it can go on sleeping.
    await asyncio.sleep(0.01)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("form", FORMS)
async def test_a_cancellation_from_elsewhere_stays_a_cancellation(form: str) -> None:
    async def victim() -> None:
        async with held(form, 5.0):
            await asyncio.sleep(10)

    task = asyncio.create_task(victim())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_deadline_already_past_cancels_at_the_first_await() -> None:
    with pytest.raises(TimeoutError):
        async with deadline(-1.0):
            await asyncio.sleep(1)


class ArmedTimers:
    """The running loop as a :class:`Deadlines` uses it (its clock and
    ``call_at``), counting the timers armed and not yet fired or cancelled:
    what the loop has pending of it, seen through the loop's public API."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[asyncio.TimerHandle] = set()
        self.armed = 0
        self.most_at_once = 0

    def time(self) -> float:
        return self.loop.time()

    def live(self) -> int:
        self.pending = {h for h in self.pending if not h.cancelled()}
        return len(self.pending)

    def call_at(self, when: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        def fire() -> None:
            self.pending.discard(handle)
            callback()

        handle = self.loop.call_at(when, fire)
        self.pending.add(handle)
        self.armed += 1
        self.most_at_once = max(self.most_at_once, self.live())
        return handle


class VirtualTimers:
    """A loop's clock and ``call_at`` as a :class:`Deadlines` uses them, on a
    virtual time that moves only when every task of :meth:`run` waits on it:
    it then jumps to the earliest timer and fires it. The figures are the
    code's, not the machine's: a loaded machine cannot stall a block past
    its deadline, and no test waits the time it measures."""

    class Handle:
        def __init__(self, callback: Callable[[], object]) -> None:
            self.callback: Callable[[], object] | None = callback

        def cancel(self) -> None:
            self.callback = None

        def cancelled(self) -> bool:
            return self.callback is None

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, VirtualTimers.Handle]] = []
        self._seq = 0
        self._waiting: dict[asyncio.Task[object], asyncio.Future[None]] = {}

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object]) -> VirtualTimers.Handle:
        handle = VirtualTimers.Handle(callback)
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, handle))
        return handle

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.call_at(self.now + seconds, lambda: fut.done() or fut.set_result(None))
        task = asyncio.current_task()
        assert task is not None
        self._waiting[task] = fut  # type: ignore[index]
        await fut

    def _idle(self, tasks: list[asyncio.Task[object]]) -> bool:
        """Every task done, or waiting on a virtual sleep not yet over."""
        return all(t.done() or (t in self._waiting and not self._waiting[t].done()) for t in tasks)

    async def run(self, tasks: list[asyncio.Task[object]]) -> None:
        """Fire the timers in the order of their times, each once every task waits."""
        while True:
            while not self._idle(tasks):
                await asyncio.sleep(0)  # the tasks' turn: each runs until it waits again
            if all(t.done() for t in tasks):
                return
            when, _, handle = heapq.heappop(self._timers)
            if handle.callback is not None:
                self.now = max(self.now, when)
                callback, handle.callback = handle.callback, None
                callback()


async def test_many_blocks_each_cancelled_at_its_own_deadline_on_one_timer() -> None:
    """Blocks of many lengths, started at once: each that overruns ends at
    its own deadline, to the tick, each that does not is untouched; at most
    one timer is armed at any moment, and none is left pending. On virtual
    time (:class:`VirtualTimers`): on the loop's clock a loaded machine
    stalls blocks past their deadlines and their work alike."""
    clock = VirtualTimers()
    watched = ArmedTimers(clock)  # type: ignore[arg-type] - the loop's part a Deadlines uses
    owner = Deadlines(watched)  # type: ignore[arg-type] - the loop's time and call_at, recorded
    rng = random.Random(7)
    cases = [(rng.uniform(0.02, 0.3), rng.uniform(0.02, 0.3)) for _ in range(60)]

    async def one(limit: float, work: float) -> tuple[bool, float]:
        begun = clock.time()
        try:
            async with owner.after(limit):
                await clock.sleep(work)
        except TimeoutError:
            return True, clock.time() - begun
        return False, clock.time() - begun

    tasks: list[asyncio.Task[object]] = [asyncio.create_task(one(limit, work)) for limit, work in cases]
    await clock.run(tasks)
    results = [t.result() for t in tasks]
    assert any(w > lim for lim, w in cases) and any(w < lim for lim, w in cases)
    for (limit, work), (timed_out, elapsed) in zip(cases, results):
        assert timed_out == (work > limit), (limit, work)
        # an overrunning block ends at its deadline, never before nor after; the others at their work's end
        assert elapsed == (limit if timed_out else work), (limit, work, elapsed)
    assert len(owner) == 0
    assert watched.armed > 1 and watched.most_at_once == 1
    assert watched.live() == 0


async def test_fast_blocks_arm_no_timer_each() -> None:
    """The point of the shared timer: blocks that end early do not each arm
    and cancel a timer of the loop's."""

    watched = ArmedTimers(asyncio.get_running_loop())
    owner = Deadlines(watched)  # type: ignore[arg-type] - the loop's time and call_at, recorded
    for _ in range(500):
        async with owner.after(5.0):
            await asyncio.sleep(0)
    assert watched.armed == 1


def test_each_event_loop_has_its_own_timer() -> None:
    async def used() -> bool:
        async with deadline(0.01):
            await asyncio.sleep(0.05)
        return False

    for _ in range(2):  # a second asyncio.run gets a fresh loop and works the same
        with pytest.raises(TimeoutError):
            asyncio.run(used())
