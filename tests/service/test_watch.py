"""A game watched while it plays (issue 36), on the service's core: a run's
game in flight is listed, followed frame by frame while the test lets its
bots move one request at a time, and no frame ever holds a card that was
hidden (a hand's, a 3DOWN card, the draw pile's, a 3UP during set-up) at
the point of the game it shows, checked against the game's record once it
is over. Bounds: a game's watchers are capped; a game no longer in play is
not found. No HTTP to the service, no sleep: the test waits on the bots'
requests and the service's change signal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from referee.bots.netpolicy import AddressPolicy, parse_networks
from referee.service.classroom import Classroom
from referee.service.errors import NotFound, RateLimited
from referee.service.hosts import InlineHost
from referee.service.settings import Settings
from referee.service.watch import Feed
from tests.support.clocks import SteppedClock
from tests.support.watch import LEAGUE, Gate, gated_bots, leaks

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def gate() -> AsyncIterator[tuple[Gate, list[str]]]:
    async with gated_bots() as held:
        yield held


async def next_move(room: Classroom, gate: Gate, feed: Feed) -> None:
    """Let the requests held be answered (one, or a set-up batch); return once
    the next reached a bot or the game is recorded."""
    gate.moved.clear()
    gate.allow_held()

    async def over() -> bool:
        return feed.match.record.result is not None

    waits = {asyncio.ensure_future(gate.moved.wait()), asyncio.ensure_future(room.until(over))}
    async with asyncio.timeout(30):  # a bound for a broken test, never a wait
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()


async def test_a_watcher_sees_public_cards_only(tmp_path: Path, gate: tuple[Gate, list[str]]) -> None:
    g, (a, b) = gate
    settings = Settings(
        bot_policy=AddressPolicy(allowed=parse_networks("127.0.0.0/8")), max_watchers_per_game=2
    )
    room = Classroom(
        tmp_path / "service.sqlite", settings, clock=SteppedClock(1_800_000_000.0), hosts=InlineHost
    )
    await room.start()
    try:
        comp = await room.create_competition("watched", LEAGUE.format(a=a, b=b))
        g.open = False  # every move waits for the test from now on
        run = await room.start_run(comp.id)
        async with asyncio.timeout(30):
            await g.moved.wait()  # the first request reached a bot: the game is in flight
        live = room.live_games(comp.id)
        assert [(x.run, x.kind, sorted(x.names)) for x in live] == [(run.id, "run", ["ann", "bo"])]
        idx = live[0].game
        feed = room.watch_game(comp.id, run.id, idx)
        second = room.watch_game(comp.id, run.id, idx)
        assert second is feed  # one feed for all its watchers
        with pytest.raises(RateLimited, match="watchers"):
            room.watch_game(comp.id, run.id, idx)
        room.unwatch(second)

        frames: list[dict[str, Any]] = [json.loads(feed.frame(0))]
        since = feed.events
        first = frames[0]["state"]
        assert first["phase"] == "setup" and first["current"] is None and "you" not in first
        assert all(p["up"] == [] for p in first["players"]), "a 3UP shown during set-up"
        while not feed.over:
            await next_move(room, g, feed)
            if feed.advance():
                frame = json.loads(feed.frame(since))
                assert "you" not in frame["state"]
                frames.append(frame)
                since = feed.events
        assert len(frames) > 20, "the game was followed move by move"
        assert frames[-1]["places"] == list(feed.match.record.result.places)  # type: ignore[union-attr]
        assert leaks(frames, feed.match.record) == []
        # all the events, in order, once each: nothing was skipped
        assert sum(len(f["state"]["events"]) for f in frames) == feed.events
        room.unwatch(feed)
        g.release_all()
        async with asyncio.timeout(60):
            await room.until(lambda: _ended(room, run.id))
        with pytest.raises(NotFound, match="not being played"):
            room.watch_game(comp.id, run.id, idx)
        assert room.live_games(comp.id) == []
    finally:
        g.release_all()
        await room.stop()


async def _ended(room: Classroom, rid: int) -> bool:
    work = room.runs.get(rid)
    return work is None or not work.alive()


def test_a_frame_is_plain_json() -> None:
    """The frame is msgspec-encodable as the web sends it (no engine object inside)."""
    from referee.service.watch import Frame

    body = msgspec.json.encode(Frame(run=1, game=2, names=["a"], since=0, state={"pile": []}))
    assert json.loads(body)["game"] == 2
