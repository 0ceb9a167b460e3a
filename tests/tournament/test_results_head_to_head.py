"""A bot's head-to-head and its games' filters over a run folder's recorded
games (issue 35, item 3): four-seat games recorded by hand, a tie included,
each figure counted here from the places written."""

from __future__ import annotations

from pathlib import Path

import pytest

from referee.tournament.results import GameFilter, games_list, head_to_head_of
from referee.tournament.store import TOURNAMENT_DB, Store

#: (seats, places) of each game.
GAMES = [
    (["ada", "bo", "cy", "house"], [2, 4, 1, 3]),
    (["bo", "ada", "house", "cy"], [1, 3, 2, 4]),
    (["ada", "house", "bo", "di"], [1, 2, 2, 4]),  # house and bo tie for 2nd
    (["cy", "bo", "di", "house"], [1, 2, 3, 4]),  # ada is not in it
    (["ada", "di", "bo", "cy"], [4, 1, 2, 3]),
]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    with Store(tmp_path / TOURNAMENT_DB) as store:
        for i, (seats, places) in enumerate(GAMES):
            store.record_game(
                index=i,
                round_=0,
                meeting=i,
                rotation=0,
                deal_seed=i,
                seats=seats,
                game_id=f"g{i}",
                places=places,
                adjudicated=False,
                disqualified=[],
                turns=10,
                result={"places": places},
                faults=[],
                replay=None,
            )
    return tmp_path


def test_each_opponent_counted_from_the_places_the_worst_first(run: Path) -> None:
    ada = head_to_head_of(run, ["ada", "nobody"], house={"house"})
    assert ada["nobody"] == []
    got = {o.opponent: (o.games, o.wins, o.losses, o.draws, o.place, o.house) for o in ada["ada"]}
    assert got == {
        "bo": (4, 2, 2, 0, 2.5, False),  # ahead in games 0, 2; behind in 1, 4
        "cy": (3, 1, 2, 0, 3.0, False),  # ahead in 1; behind in 0, 4
        "house": (3, 2, 1, 0, 2.0, True),  # ahead in 0, 2; behind in 1
        "di": (2, 1, 1, 0, 2.5, False),
    }
    assert [o.opponent for o in ada["ada"]] == ["cy", "bo", "di", "house"]  # rate, then more games first
    cy = next(o for o in ada["ada"] if o.opponent == "cy")
    assert (cy.rate, cy.low, cy.high) == (0.3333, 0.0615, 0.7923)  # 1 of 3, Wilson at 95%
    tie = {o.opponent: o for o in head_to_head_of(run, ["house"])["house"]}["bo"]
    assert (tie.games, tie.wins, tie.losses, tie.draws, tie.rate) == (4, 1, 2, 1, 0.375)


@pytest.mark.parametrize(
    ("where", "games"),
    [
        (GameFilter(), [0, 1, 2, 4]),
        (GameFilter(opponent="house"), [0, 1, 2]),
        (GameFilter(opponent="house", result="won"), [0, 2]),
        (GameFilter(opponent="house", result="lost"), [1]),
        (GameFilter(opponent="house", result="drawn"), []),
        (GameFilter(result="won"), [2]),  # against the table: first
        (GameFilter(result="lost"), [0, 1, 4]),
        (GameFilter(result=2), [0]),
        (GameFilter(opponent="ada"), []),
        (GameFilter(opponent="zed"), []),
    ],
)
def test_a_bots_games_filtered_by_opponent_and_result(run: Path, where: GameFilter, games: list[int]) -> None:
    assert [g.index for g in games_list(run, "ada", None, where)] == games


def test_a_tie_is_a_draw_in_the_filter_too(run: Path) -> None:
    drawn = games_list(run, "house", None, GameFilter(opponent="bo", result="drawn"))
    assert [g.index for g in drawn] == [2]
