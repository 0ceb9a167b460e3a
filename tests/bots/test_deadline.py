"""referee.bots.deadline: asyncio.timeout's behaviour on one shared timer."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from referee.bots.deadline import Deadlines, deadline


async def test_an_overrunning_block_raises_timeout_error_at_its_deadline() -> None:
    loop = asyncio.get_running_loop()
    begun = loop.time()
    with pytest.raises(TimeoutError):
        async with deadline(0.05) as d:
            await asyncio.sleep(10)
    elapsed = loop.time() - begun
    assert d.expired()
    assert 0.05 <= elapsed < 1.0


async def test_a_block_that_ends_in_time_is_left_alone() -> None:
    async with deadline(1.0) as d:
        await asyncio.sleep(0.01)
    assert not d.expired()
    # The task has no cancellation left pending: it can go on sleeping.
    await asyncio.sleep(0.01)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    async def victim() -> None:
        async with deadline(5.0):
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


async def test_many_blocks_each_cancelled_at_its_own_deadline_on_one_timer() -> None:
    """Blocks of many lengths, started at once: each that overruns ends at
    its own deadline (never before it), each that does not is untouched; at
    most one timer is armed at any moment, and none is left pending."""
    loop = asyncio.get_running_loop()
    watched = ArmedTimers(loop)
    owner = Deadlines(watched)  # type: ignore[arg-type] - the loop's time and call_at, recorded
    rng = random.Random(7)
    cases = [(rng.uniform(0.02, 0.3), rng.uniform(0.02, 0.3)) for _ in range(60)]

    async def one(limit: float, work: float) -> tuple[bool, float]:
        begun = loop.time()
        try:
            async with owner.after(limit):
                await asyncio.sleep(work)
        except TimeoutError:
            return True, loop.time() - begun
        return False, loop.time() - begun

    results = await asyncio.gather(*(one(limit, work) for limit, work in cases))
    finished = 0
    for (limit, work), (timed_out, elapsed) in zip(cases, results):
        if timed_out:
            assert elapsed >= limit - 0.002, (limit, elapsed)  # never before its deadline
        if work < limit - 0.01:
            # Only a loop stalled past the deadline too may time such a block out.
            assert not timed_out or elapsed >= limit, (limit, work, elapsed)
            finished += not timed_out
        elif work > limit + 0.01:
            assert timed_out, (limit, work)
            assert elapsed < work, (limit, work, elapsed)
    assert finished >= sum(1 for limit, work in cases if work < limit - 0.01) // 2
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
