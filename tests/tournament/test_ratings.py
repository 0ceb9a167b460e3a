"""Standings from outcomes: TrueSkill by default, V4 series scoring [D14]."""

from __future__ import annotations

import json
from pathlib import Path

from referee.tournament.league import Ratings
from referee.tournament.ratings import Outcome, Table
from referee.report import format_table
from referee.tournament.runner import load_standings, write_outputs

GAMES = [
    # b wins every game but holds many points in the one it does not win outright.
    Outcome(index=0, seats=["a", "b", "c"], places=[2, 1, 3], points=[10, 0, 12]),
    Outcome(index=1, seats=["b", "c", "a"], places=[1, 3, 2], points=[0, 30, 2]),
    Outcome(index=2, seats=["c", "a", "b"], places=[2, 3, 1], points=[3, 4, 0]),
    Outcome(index=3, seats=["a", "b", "c"], places=[1, 2, 3], points=[0, 40, 1]),
]


def table(series: bool) -> Table:
    t = Table(["a", "b", "c"], Ratings(), series=series)
    for o in GAMES:
        t.add(o)
    return t


def test_without_V4_the_table_is_ranked_by_trueskill_and_shows_no_points() -> None:
    rows = table(series=False).standings()
    scores = [r.score for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert all(r.points is None for r in rows)
    assert "points" not in format_table(rows)


def test_D14_V4_the_lowest_total_of_points_wins_the_series() -> None:
    rows = table(series=True).standings()
    totals = {r.bot: r.points for r in rows}
    assert totals == {"a": 16, "b": 40, "c": 46}
    assert [r.bot for r in rows] == ["a", "b", "c"]  # b won most games, a scored fewest points
    assert [r.rank for r in rows] == [1, 2, 3]
    assert "points" in format_table(rows).splitlines()[0]


def test_D14_V4_standings_files_carry_the_points(tmp_path: Path) -> None:
    rows = table(series=True).standings()
    write_outputs(tmp_path, rows, [])
    data = json.loads((tmp_path / "standings.json").read_text())
    assert [(r["bot"], r["points"]) for r in data] == [("a", 16), ("b", 40), ("c", 46)]
    assert (tmp_path / "standings.csv").read_text().splitlines()[0].endswith(",points")
    assert [r.points for r in load_standings(tmp_path)] == [16, 40, 46]
    plain = tmp_path / "plain"
    plain.mkdir()
    write_outputs(plain, table(series=False).standings(), [])
    assert all("points" not in r for r in json.loads((plain / "standings.json").read_text()))


def test_D14_V4_the_leaderboard_page_shows_the_points_it_ranks_by() -> None:
    from referee.web.pages import standings_table

    series = standings_table(1, table(series=True).standings(), None)
    assert ">points</th>" in series and "<td><b>16</b></td>" in series
    assert ">points</th>" not in standings_table(1, table(series=False).standings(), None)
