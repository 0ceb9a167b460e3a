"""Games watched live (issue 36), as the tests hold them: bots whose moves
wait for the test (:class:`Gate`), and what a watcher must never have seen
(:func:`leaks`: every card of a frame against the cards hidden at that point
of the game, read from the game's record once it is over)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from referee.game import cards as C
from referee.game import new_game
from referee.game.state import GONE, SETUP, GameState
from referee.record import ReplayRecord, steps
from sample_bots import greedy
from sample_bots.sdk import make_app


class Gate:
    """Open: the bots answer at once. Closed: each ``/act`` waits for a
    permit the test gives (:meth:`allow`); :attr:`asked` counts the requests
    that reached a bot, :attr:`moved` is set at each. Used from its loop."""

    def __init__(self) -> None:
        self.open = True
        self.asked = 0
        #: Requests held now (a set-up batch holds one per seat).
        self.held = 0
        self.moved = asyncio.Event()
        self._permits = asyncio.Semaphore(0)

    async def wait(self) -> None:
        self.asked += 1
        self.moved.set()
        if not self.open:
            self.held += 1
            try:
                await self._permits.acquire()
            finally:
                self.held -= 1

    def allow(self, n: int = 1) -> None:
        for _ in range(n):
            self._permits.release()

    def allow_held(self) -> None:
        """Let every request held now be answered (a whole set-up batch)."""
        self.allow(self.held)

    def release_all(self) -> None:
        self.open = True
        self.allow(1000)


def gated_app(gate: Gate) -> web.Application:
    """A greedy bot whose ``/act`` passes `gate` first."""

    @web.middleware
    async def act(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path == "/act":
            await gate.wait()
        return await handler(request)

    app = make_app(greedy.decide, greedy.INFO)
    app.middlewares.append(act)
    return app


ALL_CARDS = frozenset(s for s in C.STR if s)


#: Two house bots at a table of two, one game at a time: the league the watch tests play.
LEAGUE = """
[tournament]
name = "watched"
seed = 3
table_size = 2
concurrency = 1

[timeouts]
move_ms = 5000

[[bots]]
name = "ann"
url = "{a}"

[[bots]]
name = "bo"
url = "{b}"
"""


@contextlib.asynccontextmanager
async def gated_bots(count: int = 2) -> AsyncIterator[tuple[Gate, list[str]]]:
    """`count` gated bots on loopback (one gate for all) and their URLs; released and stopped after."""
    from tests.support.web import serve

    gate = Gate()
    runners, urls = [], []
    try:
        for _ in range(count):
            runner, url = await serve(gated_app(gate))
            runners.append(runner)
            urls.append(url)
        yield gate, urls
    finally:
        gate.release_all()
        for runner in runners:
            await runner.cleanup()


def cards_in(value: Any) -> Counter[str]:
    """Every card named anywhere in a decoded JSON value, counted (several cards share a name: "C")."""
    if isinstance(value, str):
        return Counter([value]) if value in ALL_CARDS else Counter()
    found: Counter[str] = Counter()
    for v in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        found += cards_in(v)
    return found


def _hidden(state: GameState) -> tuple[Counter[str], Counter[str]]:
    """The cards nobody but their holder may know (hands but their publicly
    known cards, the 3DOWN cards, the draw pile; the 3UP too during set-up),
    and every card of the game."""
    hidden: Counter[str] = Counter()
    every: Counter[str] = Counter()
    for seat in range(state.n):
        known = Counter(state.known[seat])
        for c in state.hands[seat]:
            if known[c] > 0:
                known[c] -= 1
            else:
                hidden[C.STR[c]] += 1
        hidden.update(C.STR[c] for c in state.down[seat] if c != GONE)
        if state.phase == SETUP:
            hidden.update(C.STR[c] for c in state.up[seat])
        every.update(C.STR[c] for c in [*state.hands[seat], *state.up[seat], *state.down[seat]] if c != GONE)
    hidden.update(C.STR[c] for c in state.draw)
    every.update(C.STR[c] for c in [*state.draw, *state.pile, *state.cleared, *state.removed])
    return hidden, every


def hidden_by_events(record: ReplayRecord) -> dict[int, tuple[Counter[str], Counter[str]]]:
    """For each length of the game's log: the cards hidden once it had that many events, and all."""
    h = record.header
    state = new_game(h.rules, h.names, random.Random(h.seed))
    out = {len(state.events): _hidden(state)}
    for step in steps(record):
        out[len(step.state.events)] = _hidden(step.state)
    return out


def leaks(frames: Iterable[dict[str, Any]], record: ReplayRecord) -> list[str]:
    """What frames showed that was hidden when they were sent (each frame's
    point in the game is its log's length: ``since`` + its events). A frame's
    table may show each card at most as often as it lies face up then; its
    new events may name no card of a unique name that is hidden then."""
    points = hidden_by_events(record)
    found: list[str] = []
    for f in frames:
        at = f["since"] + len(f["state"]["events"])
        if at not in points:
            found.append(f"a frame at {at} events, a point the game never stopped at")
            continue
        hidden, every = points[at]
        table = cards_in({k: v for k, v in f["state"].items() if k != "events"})
        over = table - (every - hidden)
        if over:
            found.append(f"at {at} events: the table shows {sorted(over.elements())} while hidden")
        unique = {c for c in cards_in(f["state"]["events"]) if every[c] == 1 and hidden[c]}
        if unique:
            found.append(f"at {at} events: the log names {sorted(unique)} while hidden")
    return found


async def next_frame(resp: Any, buf: list[bytes]) -> tuple[str, dict[str, Any]]:
    """The next ``frame`` or ``over`` event of a watcher's stream (comments skipped);
    `buf` keeps what was read past it."""
    data = buf[0] if buf else b""
    while True:
        while b"\n\n" in data:
            raw, data = data.split(b"\n\n", 1)
            lines = raw.decode().splitlines()
            kind = next((x[len("event: ") :] for x in lines if x.startswith("event: ")), None)
            if kind is None:
                continue
            buf[:] = [data]
            return kind, json.loads("".join(x[len("data: ") :] for x in lines if x.startswith("data: ")))
        chunk = await resp.content.readany()
        assert chunk, "the watcher's stream closed"
        data += chunk
