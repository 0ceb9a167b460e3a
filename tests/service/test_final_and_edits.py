"""Issue 34 items 2 and 4 on the service core (as tests/service/test_semester.py
drives it: a stepped clock, everything on the test's loop, real HTTP bots
on loopback, waits on the service's own changes).

A league edit reaches the open ladder: a ladder stalled for want of players
plays once the teacher adds a house bot to the league, on the new version's
timeouts, and retires the house bot the next version removes; what it cannot
take while open is said. A final on a small budget ends unsettled, says how
many games each unsettled pair needs, and is extended: more games of the
same run, same folder, same seed, its first games untouched."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from referee.service.classroom import Classroom
from referee.service.errors import Conflict, Invalid
from referee.service.hosts import InlineHost
from referee.service.practice import in_process
from referee.service.runs import decode_league
from referee.service.settings import Settings
from referee.service.store import Run, ServiceDB
from referee.tournament.ladder import ladder_entries
from referee.tournament.results import count_games
from sample_bots import greedy
from sample_bots import random as sample_random
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock

pytestmark = pytest.mark.timeout(120)

HEAD = """
[tournament]
name = "edits"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 4

[timeouts]
move_ms = {move_ms}

[ladder]
concurrency = 2
fill = "none"
"""

HOUSE = """
[[bots]]
name = "house-greedy"
url = "{url}"
"""


@pytest.fixture
async def bots() -> AsyncIterator[dict[str, str]]:
    apps = {
        "house": make_app(greedy.decide, greedy.INFO),
        "greedy": make_app(greedy.decide, greedy.INFO),
        "random": make_app(sample_random.RandomBot(seed=3).decide, sample_random.INFO),
    }
    runners, urls = [], {}
    for name, app in apps.items():
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        urls[name] = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield urls
    for runner in runners:
        await runner.cleanup()


def classroom(db: Path, clock: SteppedClock) -> Classroom:
    from referee.bots.netpolicy import AddressPolicy, parse_networks

    settings = Settings(
        bot_policy=AddressPolicy(allowed=parse_networks("127.0.0.0/8")),
        validation_games=2,
        check_budget_s=60.0,
    )
    return Classroom(db, settings, clock=clock, hosts=InlineHost, practice_runner=in_process)


async def until(room: Classroom, ready: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(60):  # a bound for a broken test, never a wait
        await room.until(ready)


async def settle_loop() -> None:
    """Let the ladder, on this loop, get as far as it can (no clock involved)."""
    for _ in range(200):
        await asyncio.sleep(0)


def games_of(out_dir: str) -> list[tuple[int, int, str]]:
    db = sqlite3.connect(Path(out_dir) / "tournament.sqlite")
    try:
        return list(db.execute("SELECT idx, deal_seed, seats FROM games ORDER BY idx"))
    finally:
        db.close()


async def test_a_league_edit_reaches_the_open_ladder_and_an_unsettled_final_is_extended(
    tmp_path: Path, bots: dict[str, str]
) -> None:
    clock = SteppedClock(wall=time.time(), workers=2)
    room = classroom(tmp_path / "service.sqlite", clock)
    await room.start()
    comp = await room.create_competition("edits", HEAD.format(move_ms=300))
    ada, _ = await room.add_team(comp.id, "ada")
    sub = await room.submit(ada, kind="url", url=bots["greedy"])
    assert (await room.pipeline.wait_for(sub.id)).status == "accepted"

    # --- the ladder opens with one player: it waits for want of players
    await room.open(comp.id)
    lad = room.ladders[comp.id]
    await lad.ladder.started.wait()
    await settle_loop()
    assert lad.waiting is not None and "needs at least 2 players" in lad.waiting
    ladder = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
    assert ladder is not None and count_games(ladder.out_dir) == 0

    # --- the teacher adds a house bot (and changes the timeouts, and the rules): the ladder plays it
    text = HEAD.format(move_ms=900) + "\n[rules]\nturn_limit = 500\n" + HOUSE.format(url=bots["house"])
    version, notes = await room.edit_league(comp.id, text, "teacher")
    assert version.version == 2
    assert notes[0] == "the open ladder plays version 2 from its next games"
    assert any(n.startswith("[rules]: the ladder keeps what it opened with") for n in notes), notes
    assert any("max_games = 4 is the game budget of the final" in n for n in notes), notes

    async def ladder_played(n: int) -> bool:
        return count_games(ladder.out_dir) >= n

    await until(room, lambda: ladder_played(4))
    entries = {e.name: e.status for e in ladder_entries(ladder.out_dir)}
    assert entries == {"ada v1": "active", "house-greedy": "active"}
    again = await room.db.call(ServiceDB.run, ladder.id)
    assert again is not None and again.league_version == version.id  # the page says: version 2
    played = decode_league(again.league_json)
    assert played.timeouts.move_ms == 900  # the new timeouts
    assert played.rules.turn_limit != 500  # the rules it opened with
    assert lad.ladder.league.timeouts.move_ms == 900  # its next games play them

    # --- a version without the house bot: it retires, and the ladder waits again
    v3, _ = await room.edit_league(comp.id, HEAD.format(move_ms=900), "teacher")
    retired = {e.name: e for e in ladder_entries(ladder.out_dir)}["house-greedy"]
    assert retired.status == "retired" and retired.reason == "removed from the league file"
    assert v3.version == 3

    # --- a second team; the freeze; a final of 4 games at most
    bob, _ = await room.add_team(comp.id, "bob")
    sub = await room.submit(bob, kind="url", url=bots["random"])
    assert (await room.pipeline.wait_for(sub.id)).status == "accepted"
    with pytest.raises(Conflict, match="only a finished final is extended"):
        await room.extend_final(comp.id, 10)
    await room.freeze(comp.id)
    final = await room.start_final(comp.id, seed=3)

    async def final_done() -> bool:
        run = await room.db.call(ServiceDB.run, final.id)
        return run is not None and run.status == "finished"

    await until(room, final_done)
    before = games_of(final.out_dir)
    assert len(before) == 4

    # --- unsettled: the estimate per pair is there
    shown, pairs, suggested = await room.final_estimate(comp.id)
    assert shown is not None and shown.id == final.id
    assert len(pairs) == 1 and {pairs[0].upper, pairs[0].lower} == {"ada", "bob"}
    assert all(p.more is None or p.more > 0 for p in pairs)
    assert suggested is None or suggested >= 2

    with pytest.raises(Invalid, match="'games': at least 2"):
        await room.extend_final(comp.id, 1)
    with pytest.raises(Invalid, match="'games': the final's budget would be"):
        await room.extend_final(comp.id, 10**8)

    # --- extended: the same run plays on, its first games untouched, until settled or the new budget
    extended = await room.extend_final(comp.id, 30)
    assert extended.id == final.id and extended.out_dir == final.out_dir
    await until(room, final_done)
    after = games_of(final.out_dir)
    assert after[:4] == before and len(after) > 4
    run = await room.db.call(ServiceDB.run, final.id)
    assert isinstance(run, Run) and run.status == "finished" and run.total_games == 34
    league = decode_league(run.league_json)
    assert league.stop.extended_from == [4] and league.stop.max_games == 34
    assert league.tournament.seed == decode_league(final.league_json).tournament.seed
    _, left, _ = await room.final_estimate(comp.id)
    assert not left or len(after) > 34 - 2  # settled, or the new budget spent
    await room.stop()
