"""The service's built-in house bots (issue 34, item 1), proved on its core.

A competition made with no league text gets the default league with the
three built-in house bots; a team practises against each of them; a
ladder of one team at tables of four plays, its empty seats filled by
built-in bots; so does the final, whose fillers are flagged as house bots
and left out of the grading CSV on request. The service runs without
``--allow-house-commands``: the built-in bots are its own programs, not a
league file's commands. Here they play as commands (the image form is
tests/containers/test_house_images.py's)."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from referee.bots.netpolicy import AddressPolicy, parse_networks
from referee.service.classroom import Classroom
from referee.service.default_league import DEFAULT_LEAGUE
from referee.service.errors import Invalid
from referee.service.grading import standings_csv
from referee.service.hosts import InlineHost
from referee.service.practice import in_process
from referee.service.runs import check_league_text
from referee.service.settings import Settings
from referee.service.store import Run, ServiceDB, Team
from referee.service.store.practice import get_game
from referee.tournament.ladder import ladder_entries
from referee.tournament.results import count_games
from sample_bots import greedy
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock

pytestmark = pytest.mark.timeout(180)

#: One team's bot at tables of four, one built-in house bot: the ladder and the final fill two seats.
LONELY = """
[tournament]
table_size = 4
schedule = "adaptive"

[stop]
max_games = 8

[ladder]
concurrency = 2
fill = "greedy"

[[bots]]
name = "house-tactician"
builtin = "tactician"
"""


@pytest.fixture
async def team_bot() -> AsyncIterator[str]:
    runner = web.AppRunner(make_app(greedy.decide, greedy.INFO), access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.fixture
async def room(tmp_path: Path) -> AsyncIterator[Classroom]:
    settings = Settings(  # no --allow-house-commands: the built-in bots need none
        bot_policy=AddressPolicy(allowed=parse_networks("127.0.0.0/8")),
        validation_games=2,
        check_budget_s=60.0,
        practice_per_hour=10,
    )
    clock = SteppedClock(wall=time.time(), workers=2)
    room = Classroom(
        tmp_path / "service.sqlite", settings, clock=clock, hosts=InlineHost, practice_runner=in_process
    )
    await room.start()
    yield room
    await room.stop()


async def until(room: Classroom, ready: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(120):  # a bound for a broken test, never a wait
        await room.until(ready)


async def accepted_team(room: Classroom, cid: int, url: str, name: str = "ada") -> Team:
    team, _token = await room.add_team(cid, name)
    sub = await room.submit(team, kind="url", url=url)
    verdict = await room.pipeline.wait_for(sub.id)
    assert verdict.status == "accepted", verdict.reason
    return team


async def test_a_competition_without_a_league_gets_the_built_in_house_bots(room: Classroom) -> None:
    for text in (None, "", "  \n"):
        comp = await room.create_competition(f"class {text!r}", text)
        assert comp.league_toml == DEFAULT_LEAGUE
    bots = check_league_text(DEFAULT_LEAGUE).bots
    assert {b.name: b.builtin for b in bots} == {
        "house-random": "random",
        "house-greedy": "greedy",
        "house-tactician": "tactician",
    }
    # a league file names them with line numbers like every field
    with pytest.raises(Invalid, match=r"league:3: \[\[bots\]\] #1 'builtin': 'best' is not a built-in"):
        await room.create_competition("typo", '[[bots]]\nname = "house-best"\nbuiltin = "best"\n')
    with pytest.raises(Invalid, match=r"league:4: \[\[bots\]\] #1 'command': a built-in house bot"):
        await room.create_competition(
            "both", '[[bots]]\nname = "h"\nbuiltin = "greedy"\ncommand = ["python", "evil.py", "{port}"]\n'
        )
    # a league file's own command is still refused without --allow-house-commands
    with pytest.raises(Invalid, match="allow-house-commands"):
        await room.create_competition(
            "own",
            '[[bots]]\nname = "h"\ncommand = ["python", "-m", "sample_bots.greedy", "--port", "{port}"]\n',
        )


async def test_practice_against_each_built_in_house_bot(room: Classroom, team_bot: str) -> None:
    comp = await room.create_competition("duels", DEFAULT_LEAGUE.replace("table_size = 4", "table_size = 2"))
    team = await accepted_team(room, comp.id, team_bot)
    for builtin in ("random", "greedy", "tactician"):
        game = await room.ask_practice(team, [f"house:house-{builtin}"])

        async def ended(gid: int = game.id) -> bool:
            g = await room.db.call(get_game, gid)
            return g is not None and g.status in ("finished", "failed")

        await until(room, ended)
        done = await room.db.call(get_game, game.id)
        assert done is not None and done.status == "finished", (builtin, done)


async def games_of(room: Classroom, cid: int, kind: str) -> int:
    run = await room.db.call(ServiceDB.latest_run_of, cid, kind)
    return 0 if run is None or not run.out_dir else await asyncio.to_thread(count_games, run.out_dir)


async def test_one_team_plays_the_ladder_and_the_final_at_tables_of_four(
    room: Classroom, team_bot: str
) -> None:
    comp = await room.create_competition("lonely", LONELY)
    await accepted_team(room, comp.id, team_bot)

    # the ladder: 1 team + 1 house bot, the two empty seats filled by built-in greedy bots
    await room.open(comp.id)

    async def ladder_played() -> bool:
        return await games_of(room, comp.id, "ladder") >= 4

    await until(room, ladder_played)
    ladder = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
    assert ladder is not None
    active = {e.name for e in ladder_entries(ladder.out_dir) if e.status == "active"}
    assert active == {"ada v1", "house-tactician", "house-greedy-1", "house-greedy-2"}

    # the final: the same seats filled, the fillers house bots
    await room.freeze(comp.id)
    final = await room.start_final(comp.id)

    async def final_done() -> bool:
        run = await room.db.call(ServiceDB.run, final.id)
        return run is not None and run.status in ("finished", "failed")

    await until(room, final_done)
    done = await room.db.call(ServiceDB.run, final.id)
    assert isinstance(done, Run) and done.status == "finished", done
    assert await games_of(room, comp.id, "final") >= 4
    text = await room.db.call(standings_csv, done)
    assert text is not None
    rows = {r["bot"]: r for r in csv.DictReader(io.StringIO(text))}
    assert set(rows) == {"ada", "house-tactician", "house-greedy-1", "house-greedy-2"}, rows
    assert {b for b, r in rows.items() if r["house"] == "yes"} == {
        "house-tactician",
        "house-greedy-1",
        "house-greedy-2",
    }
    teams_only = await room.db.call(standings_csv, done, False)
    assert teams_only is not None
    assert [r["bot"] for r in csv.DictReader(io.StringIO(teams_only))] == ["ada"]
