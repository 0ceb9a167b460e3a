"""A whole semester of the classroom service, driven through its core (issue 33).

No HTTP to the service and no sleep: the test holds the
:class:`~referee.service.classroom.Classroom` itself, on a clock that moves
only when the test says (:class:`~clocks.SteppedClock`), with its runs,
ladders and practice games on the test's own event loop
(:class:`~referee.service.hosts.InlineHost`, the in-process practice
runner). The bots are real HTTP bots on loopback, served by the same loop.

The story, with its checks at each step: the teacher makes a competition
with a house bot; teams join (a name clash refused); they submit (a good
bot, another, one that crashes, one that answers illegal moves, one too
slow) and each is accepted or refused for its own reason; the ladder
opens and plays; the service restarts in the middle and loses nothing; a
team is renamed and another withdrawn; a team practises against the house
bot; the freeze and the final come by their deadlines as the clock
passes them; the final's CSV names every team that played it.
"""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from referee.service.classroom import Classroom
from referee.service.errors import Conflict, Invalid
from referee.service.grading import standings_csv
from referee.service.runs import decode_league
from referee.service.store import Run, ServiceDB
from referee.tournament.ladder import ladder_entries
from referee.tournament.results import RunRatings
from sample_bots import greedy
from sample_bots import random as sample_random
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock
from tests.support.service import classroom, games_of, serving, until

pytestmark = pytest.mark.timeout(120)

LEAGUE = """
[tournament]
name = "semester"
seed = 11
table_size = 2
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 24

[timeouts]
move_ms = 300

[ladder]
concurrency = 2
catch_up = 2

[[bots]]
name = "house-greedy"
url = "{house}"
"""


def misbehaving(kind: str) -> web.Application:
    """A greedy bot whose ``/act`` misbehaves: "crashing" answers 500,
    "illegal" names an action past the legal ones, "slow" answers after the deadline."""

    @web.middleware
    async def act(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path != "/act":
            return await handler(request)
        if kind == "crashing":
            return web.Response(status=500, text="Traceback: the student's bug")
        if kind == "illegal":
            body = await request.json()
            return web.json_response({"request_id": body["request_id"], "index": len(body["legal"]) + 5})
        await asyncio.sleep(1.0)  # past move_ms (300), every move
        return await handler(request)

    app = make_app(greedy.decide, greedy.INFO)
    app.middlewares.append(act)
    return app


APPS: dict[str, Callable[[], web.Application]] = {
    "house": lambda: make_app(greedy.decide, greedy.INFO),
    "greedy": lambda: make_app(greedy.decide, greedy.INFO),
    "random": lambda: make_app(sample_random.RandomBot(seed=3).decide, sample_random.INFO),
    "crashing": lambda: misbehaving("crashing"),
    "illegal": lambda: misbehaving("illegal"),
    "slow": lambda: misbehaving("slow"),
}


@pytest.fixture
async def bots() -> AsyncIterator[dict[str, str]]:
    async with serving(APPS) as urls:
        yield urls


async def test_a_semester(tmp_path: Path, bots: dict[str, str]) -> None:
    clock = SteppedClock(wall=time.time(), workers=2)  # the deadline watch and the admission retrier
    db = tmp_path / "service.sqlite"
    room = classroom(db, clock)
    await room.start()

    # --- the teacher makes the competition; teams join
    comp = await room.create_competition("semester", LEAGUE.format(house=bots["house"]))
    with pytest.raises(Invalid, match="'league'"):
        await room.create_competition("broken", "[tournament]\ntable_size = 99\n")
    teams = {name: (await room.add_team(comp.id, name))[0] for name in ("ada", "bob", "cy", "dee", "eve")}
    with pytest.raises(Invalid, match="exists already"):
        await room.add_team(comp.id, "ada")
    with pytest.raises(Invalid, match="house bot"):
        await room.add_team(comp.id, "house-greedy")

    # --- submissions: each accepted or refused for its own reason
    subs = {
        "ada": await room.submit(teams["ada"], kind="url", url=bots["greedy"]),
        "bob": await room.submit(teams["bob"], kind="url", url=bots["random"]),
        "cy": await room.submit(teams["cy"], kind="url", url=bots["crashing"]),
        "dee": await room.submit(teams["dee"], kind="url", url=bots["illegal"]),
        "eve": await room.submit(teams["eve"], kind="url", url=bots["slow"]),
    }
    verdicts = {name: await room.pipeline.wait_for(sub.id) for name, sub in subs.items()}
    assert verdicts["ada"].status == "accepted", verdicts["ada"].reason
    assert verdicts["bob"].status == "accepted", verdicts["bob"].reason
    for name in ("cy", "dee", "eve"):
        assert verdicts[name].status == "refused", (name, verdicts[name])
    assert "500" in (verdicts["cy"].reason or "") or "error" in (verdicts["cy"].reason or "").lower()
    assert "illegal" in (verdicts["dee"].reason or "").lower()
    assert "time" in (verdicts["eve"].reason or "").lower()

    # --- the ladder opens and plays
    await room.open(comp.id)
    with pytest.raises(Conflict, match="only a competition in setup or frozen opens"):
        await room.open(comp.id)

    async def played(n: int) -> bool:
        return await games_of(room, comp.id) >= n

    await until(room, lambda: played(6))
    ladder = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
    assert ladder is not None
    names = {e.name for e in ladder_entries(ladder.out_dir) if e.status == "active"}
    assert {"house-greedy", "ada v1", "bob v1"} <= names

    # --- the service restarts in the middle: nothing is lost, the ladder plays on
    before = await games_of(room, comp.id)
    await room.stop()
    room = classroom(db, clock)
    await room.start()
    assert await games_of(room, comp.id) >= before
    await until(room, lambda: played(before + 4))
    again = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
    assert again is not None and again.out_dir == ladder.out_dir  # the same ladder, over its folder

    # --- a team renamed keeps its entry; a team withdrawn retires from the ladder
    bob = await room.rename_team(teams["bob"], "robert")
    assert bob.name == "robert"
    with pytest.raises(Invalid, match="exists already"):
        await room.rename_team(teams["ada"], "robert")
    await room.withdraw_team(teams["cy"])
    entries = {e.name: e for e in ladder_entries(ladder.out_dir)}
    assert entries["bob v1"].status == "active"  # an entry keeps the name it came in with

    # --- practice against the house bot, played to its end
    game = await room.ask_practice(teams["ada"], ["house:house-greedy"])

    async def practised() -> bool:
        from referee.service.store.practice import get_game

        g = await room.db.call(get_game, game.id)
        return g is not None and g.status in ("finished", "failed")

    await until(room, practised)
    from referee.service.store.practice import get_game

    done = await room.db.call(get_game, game.id)
    assert done is not None and done.status == "finished", done

    # --- the deadlines: the freeze, then the final, as the clock passes them
    now = clock.time()
    await room.db.call(ServiceDB.set_deadlines, comp.id, (now + 3600, now + 7200))
    await clock.advance(3599)
    assert (await room.competition(comp.id)).phase == "open"
    await clock.advance(2)
    await until(room, lambda: phase_is(room, comp.id, "frozen"))
    with pytest.raises(Conflict, match="submissions are closed"):
        await room.submit(teams["ada"], kind="url", url=bots["greedy"])
    await clock.advance(3600)
    await until(room, lambda: phase_is(room, comp.id, "final"))

    async def final_done() -> bool:
        final = await room.db.call(ServiceDB.latest_run_of, comp.id, "final")
        return final is not None and final.status == "finished"

    await until(room, final_done)
    final = await room.db.call(ServiceDB.latest_run_of, comp.id, "final")
    assert isinstance(final, Run)
    text = await room.db.call(standings_csv, final)
    assert text is not None
    rows = list(csv.DictReader(io.StringIO(text)))
    played_by = {r.get("team") or r.get("name") for r in rows}
    assert {"ada", "robert"} <= played_by, rows
    assert not {"cy", "dee", "eve"} & played_by  # refused or withdrawn: not in the final

    # a finished run's ratings are checkpointed at its last game, so that the first view after a
    # start replays none: the ladder's (finished at the freeze) and the final's
    ladder = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
    for run in (ladder, final):
        assert isinstance(run, Run) and run.status == "finished", run
        fresh = RunRatings(decode_league(run.league_json), ladder=run.kind == "ladder")
        snap = fresh.update(run.out_dir)
        assert snap.games > 0 and fresh.started_from == snap.games, (run.kind, fresh.started_from, snap.games)

    await room.stop()


async def phase_is(room: Classroom, cid: int, phase: str) -> bool:
    return (await room.competition(cid)).phase == phase
