"""Deadlines for many calls at once, on one loop timer.

``async with deadline(seconds):`` behaves like :func:`asyncio.timeout`: the
block is cancelled when it overruns and :class:`TimeoutError` comes out of
it; a cancellation from elsewhere stays a :class:`asyncio.CancelledError`.

The difference is the timer. :func:`asyncio.timeout` schedules a timer for
every block and cancels it when the block ends early, which is what nearly
every bot request does: measured here, arming and cancelling that timer cost
about 5 µs a request over loopback, as much as all the rest of the transport.
A :class:`Deadlines` keeps one timer per event loop, armed for the earliest
deadline pending. A block that ends early only leaves the set; the timer is
re-armed only when a new deadline is earlier than the armed one, and when it
fires it cancels what is overdue and re-arms for the earliest deadline left.
A game of fast replies thus arms about one timer per move limit, not one per
request, and an overdue block is still cancelled at its own deadline.

Nothing in entering or leaving a block awaits, so inside a task a plain
``with deadline(seconds):`` does the same as ``async with`` without making
two coroutines a call (the per-request path uses it).
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType

__all__ = ["Deadline", "Deadlines", "deadline"]


class Deadlines:
    """The deadlines of one event loop's calls, on a single timer."""

    __slots__ = ("__weakref__", "_loop", "_pending", "_handle", "_armed_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        #: The blocks in progress (a dict as an ordered set).
        self._pending: dict[Deadline, None] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    def after(self, seconds: float) -> Deadline:
        """A deadline `seconds` from now (loop time)."""
        return Deadline(self, self._loop.time() + seconds)

    def __len__(self) -> int:
        """How many blocks are in progress."""
        return len(self._pending)

    def _add(self, entry: Deadline) -> None:
        self._pending[entry] = None
        handle = self._handle
        if handle is None or entry.when < self._armed_at:
            if handle is not None:
                handle.cancel()
            self._arm(entry.when)

    def _discard(self, entry: Deadline) -> None:
        self._pending.pop(entry, None)

    def _arm(self, when: float) -> None:
        self._armed_at = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        pending = self._pending
        now = self._loop.time()
        for entry in [e for e in pending if e.when <= now]:
            del pending[entry]
            entry._expire()
        if pending:
            self._arm(min(e.when for e in pending))


class Deadline:
    """One block's deadline (``async with``); see :func:`deadline`."""

    __slots__ = ("_owner", "when", "_task", "_cancelling", "_expired")

    def __init__(self, owner: Deadlines, when: float) -> None:
        self._owner = owner
        #: Loop time at which the block is cancelled.
        self.when = when
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def expired(self) -> bool:
        """Whether the block was cancelled for overrunning."""
        return self._expired

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline is used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._owner._add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._expired:
            self._owner._discard(self)
            return
        assert self._task is not None
        # As asyncio.timeout: ours unless someone else asked to cancel too.
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    async def __aenter__(self) -> Deadline:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def _expire(self) -> None:
        assert self._task is not None
        self._expired = True
        self._task.cancel()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = weakref.WeakKeyDictionary()
#: The loop used last and its Deadlines (one loop runs for a long time).
_last: tuple[asyncio.AbstractEventLoop, Deadlines] | None = None


def deadline(seconds: float) -> Deadline:
    """``async with deadline(s):`` cancels the block after `s` seconds, with
    :class:`TimeoutError`, on the running loop's shared timer."""
    global _last
    loop = asyncio.get_running_loop()
    last = _last
    if last is not None and last[0] is loop:
        return last[1].after(seconds)
    owner = _by_loop.get(loop)
    if owner is None:
        owner = _by_loop[loop] = Deadlines(loop)
    _last = (loop, owner)
    return owner.after(seconds)
