"""The leaderboards, computed once for many viewers: a cache, single-flight.

With 500 viewers of a competition, every live update makes 500 fetches of
its live part (``/c/{cid}/live``), and the page, its JSON mirror and each
stream's first update ask for the same board too. :class:`BoardCache`
computes the value of a key at most once per ``ttl`` seconds: inside that
window every request gets the same object, and the requests that arrive
while it is being computed await that one computation (one task per key;
its error reaches each of them and is not kept). The live poller, which
knows a board changed, computes it afresh with :meth:`BoardCache.refresh`
(the requests arriving meanwhile await that computation, and one started
earlier does not overwrite it). The keys kept are bounded, the least
recently used go first.

A board is shared: nothing may change one the cache handed out. The HTTP
errors (a ``?run=`` that does not exist) are found before the cache is
asked, so what a computation raises is an internal error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, Generic, NamedTuple, TypeVar

from aiohttp import web

from ..service.store import Competition, ServiceDB
from . import data
from .app_state import ROOM
from .data import LRU
from .schemas import Leaderboard

K = TypeVar("K")
V = TypeVar("V")

Compute = Callable[[], Coroutine[Any, Any, V]]


class BoardKey(NamedTuple):
    """Which board: a competition's, of the run asked for with ``?run=``
    (None: the latest run), pinned to it or not."""

    competition: int
    run: int | None
    pinned: bool


class Signal:
    """Wakes whoever waits for something to hold whenever what it looks at
    may have changed (the counters below, the streams open): a test waits
    on it, not on a clock."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, check: Callable[[], bool]) -> None:
        """Wait until ``check()`` holds, asking again at each :meth:`notify`
        (no timeout: the caller bounds it)."""
        while not check():
            await self._event.wait()


class BoardCache(Generic[K, V]):
    """Values computed at most once per ``ttl`` seconds per key, single-flight,
    the ``size`` most recently used kept (used on the event loop only)."""

    def __init__(self, ttl: float, size: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.size = size
        self.clock = clock
        #: The values computed, by key, with when each was done.
        self.values: OrderedDict[K, tuple[float, V]] = OrderedDict()
        #: The computation in flight of each key.
        self.flights: dict[K, asyncio.Task[V]] = {}
        #: Computations started (calls of a ``compute``).
        self.computed = 0
        #: Requests answered without starting one: a value kept, or one in flight.
        self.hits = 0
        #: Of the hits, those that awaited a computation in flight.
        self.joined = 0
        #: Notified when those counters or the computations in flight change.
        self.changed = Signal()

    async def get(self, key: K, compute: Compute[V]) -> V:
        """The value of ``key``: the one kept if younger than ``ttl``, else the
        one in flight, else ``compute()``'s."""
        kept = self.values.get(key)
        if kept is not None and self.clock() - kept[0] < self.ttl:
            self.values.move_to_end(key)
            self.hits += 1
            return kept[1]
        task = self.flights.get(key)
        if task is None:
            task = self._start(key, compute)
        else:
            self.hits += 1
            self.joined += 1
            self.changed.notify()
        # A request that goes away does not cancel what the others await.
        return await asyncio.shield(task)

    async def refresh(self, key: K, compute: Compute[V]) -> V:
        """Compute ``key``'s value now, whatever is kept (its data changed)."""
        return await asyncio.shield(self._start(key, compute))

    def invalidate(self, match: Callable[[K], bool]) -> None:
        """Forget the values of the keys that ``match``; their computations in
        flight finish for those who await them, and are not kept."""
        for key in [k for k in self.values if match(k)]:
            del self.values[key]
        for key in [k for k in self.flights if match(k)]:
            del self.flights[key]

    async def close(self) -> None:
        """Cancel the computations in flight (the server is stopping)."""
        tasks = list(self.flights.values())
        self.flights.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def _start(self, key: K, compute: Compute[V]) -> asyncio.Task[V]:
        self.computed += 1
        task = asyncio.create_task(compute())
        self.flights[key] = task
        task.add_done_callback(functools.partial(self._done, key))
        self.changed.notify()
        return task

    def _done(self, key: K, task: asyncio.Task[V]) -> None:
        error = None if task.cancelled() else task.exception()  # retrieved, even if no one awaits it
        if self.flights.get(key) is not task:
            return  # refreshed or invalidated meanwhile: a newer value wins
        del self.flights[key]
        if task.cancelled() or error is not None:
            return
        self.values[key] = (self.clock(), task.result())
        self.values.move_to_end(key)
        while len(self.values) > self.size:
            self.values.popitem(last=False)


Boards = BoardCache[BoardKey, Leaderboard]
#: The leaderboards of the pages, their JSON and the live updates.
BOARDS: web.AppKey[Boards] = web.AppKey("boards", BoardCache)


def latest_key(cid: int) -> BoardKey:
    """The key of a competition's board of its latest run (the live updates')."""
    return BoardKey(cid, None, False)


async def latest_board(app: web.Application, comp: Competition) -> Leaderboard:
    """The board of ``comp``'s latest run, through the cache."""

    async def compute() -> Leaderboard:
        run = await app[ROOM].db.call(ServiceDB.latest_run, comp.id)
        return await data.leaderboard(app, comp, run)

    return await app[BOARDS].get(latest_key(comp.id), compute)


def forget(app: web.Application, cid: int) -> None:
    """Forget the boards of competition ``cid``: a write of this server
    changed them (a run started or stopped, a team added), and whoever made
    it sees it on the next request, not ``ttl`` later."""
    app[BOARDS].invalidate(lambda key: key.competition == cid)


#: What the boards are turned into (the live part's HTML, each kind of
#: event), once per board for all who send it: (id, kind) -> (board, bytes),
#: the board kept to check identity (an id may be reused once it is gone).
#: At most 128 of them and :data:`RENDERED_BYTES` in all (a ladder's live
#: part at a term's size weighs megabytes).
RENDERED: web.AppKey[LRU[tuple[int, str], tuple[object, bytes]]] = web.AppKey("rendered_boards", LRU)


def rendered(app: web.Application, board: Leaderboard, kind: str, make: Callable[[], bytes]) -> bytes:
    """``make()``'s bytes for ``board`` as ``kind``, made once per board (the
    cache hands every viewer of a board the same object)."""
    kept = app[RENDERED].get((id(board), kind))
    if kept is not None and kept[0] is board:
        return kept[1]
    body = make()
    app[RENDERED].put((id(board), kind), (board, body), len(body))
    return body


#: What :data:`RENDERED` holds at most, in bytes.
RENDERED_BYTES = 64 << 20
