"""A person who walks away from their seat (issue 36), on the service's core.

A team member seated at a practice game against the house bot
(:meth:`~referee.service.classroom.Classroom.play_practice_human`) sees
the game's start, then the page goes away: for the core that is its seat's
front end leaving (:meth:`~referee.bots.human.HumanSeat.leave`, what the
web's WebSocket does when it closes). The game does not hang on the
person's clock: the fault policy plays for the seat until it is
disqualified, and the game ends recorded as the team's practice game, with
its replay. No HTTP to the service and no sleep: the wait is on the
service's change signal (tests/web/test_web_seat.py keeps what only the
web does: the socket closing leaves the seat, the Origin check).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from referee.replay import read as read_replay
from referee.service.store.practice import get_game, team_games
from referee.tournament.results import replay_path
from sample_bots import greedy
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock
from tests.support.service import classroom, serving, until
from tests.support.web import league_text

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def house() -> AsyncIterator[str]:
    async with serving({"house": lambda: make_app(greedy.decide, greedy.INFO)}) as urls:
        yield urls["house"]


async def test_a_seat_whose_page_went_away_is_played_by_the_fault_policy_and_the_game_is_recorded(
    tmp_path: Path, house: str
) -> None:
    room = classroom(tmp_path / "service.sqlite", SteppedClock(wall=time.time()))
    await room.start()
    try:
        comp = await room.create_competition("class", league_text(house={"house-greedy": house}))
        team, _ = await room.add_team(comp.id, "ada")
        hg = await room.play_practice_human(team, ["house:house-greedy"])
        assert room.human_game(hg.game.id, team) is hg
        assert hg.hold()  # a front end took the seat
        first = await hg.seat.prompts.get()  # the page got the game's start...
        assert first.kind == "start"
        hg.seat.leave()  # ...and went away

        async def ended() -> bool:
            game = await room.db.call(get_game, hg.game.id)
            return game is not None and game.status != "playing"

        await until(room, ended)
        game = await room.db.call(get_game, hg.game.id)
        assert game is not None
        listed = await room.db.call(team_games, team.id)
    finally:
        await room.stop()
    # recorded as the team's practice game, with the person's seat
    assert game.status == "finished" and game.error is None, game
    assert [g.id for g in listed] == [game.id]
    assert game.seats[0].kind == "human" and len(game.results) == 1, game
    assert hg.over.is_set() and hg.game.id not in room.human_games
    # the seat was played by the fault policy: connection faults until it was disqualified
    path = replay_path(game.out_dir, 0)
    assert path is not None
    record = read_replay(path)
    assert record.result is not None
    seat = game.results[0].seat
    assert seat in record.result.disqualified
    assert {f.kind for f in record.result.faults[seat]} == {"connection"}
