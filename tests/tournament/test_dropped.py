"""A bot that stops answering is dropped from the rest of the run, and the
run goes on for everyone else (issue 14; the classroom service's runs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from protocol.messages import Timeouts
from referee.bots import free_port
from referee.bots.factory import BotSpec
from referee.tournament.league import League, LeagueError, TournamentTable
from referee.tournament.runner import DEAD_GAMES, Tournament
from tests.support.programs.zoo import good_app, serve, zoo_app


def league_of(urls: dict[str, str], rounds: int = 3) -> League:
    return League(
        tournament=TournamentTable(name="drop", seed=3, table_size=2, rounds=rounds, concurrency=1),
        timeouts=Timeouts(move_ms=300),
        bots=[BotSpec(name=n, url=u) for n, u in urls.items()],
    )


async def test_a_bot_that_dies_mid_run_is_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    async with (
        serve(good_app("a")) as a,
        serve(good_app("b")) as b,
        serve(zoo_app("dies", after=2, name="dies")) as dies,
    ):
        t = Tournament(
            league_of({"a": a, "b": b, "dies": dies}),
            tmp_path / "out",
            progress=False,
            drop_unreachable=True,
            log=lambda m: None,
        )
        began = time.perf_counter()
        rows = await t.run()
        took = time.perf_counter() - began
    assert "dies" in t.dropped and "stopped answering" in t.dropped["dies"]
    assert rows[-1].bot == "dies" and all(r.games == rows[0].games for r in rows)
    assert rows[0].faults == {} and rows[1].faults == {}
    # once dropped, its games cost no timeouts: far below 3 strikes x 300 ms per game
    games_of_dies = rows[-1].games
    assert took < games_of_dies * 0.3 * 3, (took, games_of_dies)
    import sqlite3

    db = sqlite3.connect(tmp_path / "out" / "tournament.sqlite")
    details = [d for (d,) in db.execute("SELECT detail FROM faults WHERE bot = 'dies' ORDER BY game_idx")]
    assert any("dropped from this run" in d for d in details)
    assert DEAD_GAMES == 2


async def test_a_bot_unreachable_at_the_start_is_dropped_when_asked(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    async with serve(good_app("a")) as a, serve(good_app("b")) as b:
        urls = {"a": a, "b": b, "gone": nowhere}
        with pytest.raises(LeagueError, match="'gone'"):  # the CLI's default: stop at once, naming it
            await Tournament(league_of(urls), tmp_path / "cli", progress=False, log=lambda m: None).run()
        t = Tournament(
            league_of(urls), tmp_path / "service", progress=False, drop_unreachable=True, log=lambda m: None
        )
        rows = await t.run()
    assert "could not be reached" in t.dropped["gone"]
    assert rows[-1].bot == "gone" and rows[-1].games == rows[0].games > 0
    assert sum(rows[-1].faults.values()) > 0 and rows[0].faults == {}
