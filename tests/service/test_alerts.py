"""No automatic step fails in silence (issue 34, item 3), proved on the core.

With one team and two house bots at tables of four, the ladder waits and
says so as an alert; ``final_at`` passes, the competition freezes, and the
final cannot start: an alert with its cause and its action stands (and a
public version for the leaderboard, naming nothing private). The teacher
does what it says (a third house bot in the league file): the final starts
by itself at the next tick and the alert is resolved. A ladder that fails
(its folder cannot be made: the disk) raises one too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from referee.service import alerts
from referee.service.classroom import Classroom
from referee.service.hosts import InlineHost
from referee.service.practice import in_process
from referee.service.settings import Settings
from referee.service.store import ServiceDB
from sample_bots import greedy
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock

pytestmark = pytest.mark.timeout(120)

LEAGUE = """
[tournament]
name = "alerts"
seed = 5
table_size = 4
schedule = "adaptive"

[stop]
max_games = 8

[timeouts]
move_ms = 300

[ladder]
fill = "none"
{bots}"""

BOT = """
[[bots]]
name = "{name}"
url = "{url}"
"""


@pytest.fixture
async def url() -> AsyncIterator[str]:
    runner = web.AppRunner(make_app(greedy.decide, greedy.INFO), access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


def league(url: str, *names: str) -> str:
    return LEAGUE.format(bots="".join(BOT.format(name=n, url=url) for n in names))


def classroom(db: Path, clock: SteppedClock) -> Classroom:
    from referee.bots.netpolicy import AddressPolicy, parse_networks

    settings = Settings(
        bot_policy=AddressPolicy(allowed=parse_networks("127.0.0.0/8")),
        validation_games=2,
        check_budget_s=60.0,
    )
    return Classroom(db, settings, clock=clock, hosts=InlineHost, practice_runner=in_process)


async def ticks(clock: SteppedClock, ready: Callable[[], Awaitable[object]], step: float = 1) -> None:
    """The service's clock moved on, tick by tick, until `ready()` (what the
    ladder does is seen by the deadline watch's sweep, once a tick)."""
    async with asyncio.timeout(60):  # a bound for a test that is broken, never a wait
        while not await ready():
            await clock.advance(step)


async def standing(room: Classroom, cid: int, step: str) -> alerts.Alert | None:
    return next((a for a in await room.standing_alerts(cid) if a.step == step), None)


async def test_a_final_without_players_raises_an_alert_until_the_teacher_fixes_it(
    tmp_path: Path, url: str
) -> None:
    clock = SteppedClock(wall=time.time(), workers=2)  # the deadline watch and the admission retrier
    room = classroom(tmp_path / "service.sqlite", clock)
    await room.start()
    try:
        comp = await room.create_competition("short", league(url, "house-a", "house-b"))
        team, _ = await room.add_team(comp.id, "ada")
        sub = await room.submit(team, kind="url", url=url)
        assert (await room.pipeline.wait_for(sub.id)).status == "accepted"

        # --- the ladder has 3 players for tables of 4: it waits, and an alert says so
        await room.open(comp.id)

        await ticks(clock, lambda: standing(room, comp.id, "ladder"))
        waiting = await standing(room, comp.id, "ladder")
        assert waiting is not None
        assert "needs at least 4 players" in waiting.cause and "ada v1" in waiting.cause
        assert "house bot" in waiting.action
        assert "ada" not in waiting.public  # the leaderboard's words name nobody

        # --- final_at passes: it freezes, the final cannot start, an alert stands with cause and action
        now = clock.time()
        await room.db.call(ServiceDB.set_deadlines, comp.id, (None, now + 60))
        await clock.advance(61)
        assert (await room.competition(comp.id)).phase == "frozen"
        final = await standing(room, comp.id, "final")
        assert final is not None, await room.standing_alerts(comp.id)
        assert "final_at" in final.cause and "cannot start" in final.cause
        assert "only 3 bots" in final.cause and "add a house bot" in final.action
        assert final.public == alerts.PUBLIC["final"]
        assert await standing(room, comp.id, "ladder") is None  # frozen: no ladder is asked for
        first = final.first_at

        # --- still not fixed a tick later: the same alert, seen again (first raised, last seen)
        await clock.advance(1)
        again = await standing(room, comp.id, "final")
        assert again is not None and again.id == final.id
        assert again.first_at == first and again.last_at > first

        # --- the teacher does what it says: a third house bot; the final starts by itself
        text = league(url, "house-a", "house-b", "house-c")
        await room.check_league(text)
        await room.db.call(ServiceDB.set_league, comp.id, text, "admin (test)")
        await clock.advance(1)
        assert (await room.competition(comp.id)).phase == "final"
        assert await standing(room, comp.id, "final") is None
        history = await room.db.call(ServiceDB.alert_history, comp.id)
        resolved = next(a for a in history if a.id == final.id)
        assert resolved.resolved_at is not None and resolved.resolved_at >= again.last_at
    finally:
        await room.stop()


async def test_a_ladder_that_fails_raises_an_alert(tmp_path: Path, url: str) -> None:
    clock = SteppedClock(wall=time.time(), workers=2)
    room = classroom(tmp_path / "service.sqlite", clock)
    await room.start()
    try:
        comp = await room.create_competition(
            "broken disk", league(url, "house-a", "house-b", "house-c", "house-d")
        )
        # where its ladder's folder goes is a file: the ladder cannot start (the disk, not a team)
        (room.db.data_dir / f"competition-{comp.id}").write_text("in the way")
        await room.open(comp.id)

        async def failed() -> bool:
            lad = room.ladders.get(comp.id)
            return lad is not None and lad.status == "failed"

        await ticks(clock, failed, 5)  # each restart waits on the service's clock
        await clock.advance(1)
        alert = await standing(room, comp.id, "ladder")
        assert alert is not None
        assert "the ladder failed" in alert.cause
        assert "reopen" in alert.action
        assert alert.public == alerts.PUBLIC["ladder"]
        assert str(room.db.data_dir) not in alert.public  # nothing private on the leaderboard
    finally:
        await room.stop()
