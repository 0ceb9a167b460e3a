"""Standings from outcomes: TrueSkill by default, V4 series scoring [D14]."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from referee.report import format_table
from referee.tournament.league import Ratings
from referee.tournament.ratings import LatencyHistogram, Outcome, Table
from referee.tournament.runner import load_standings, write_outputs
from tests.support.budget import scaled

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


# ---------------------------------------------------------------- latencies


@settings(max_examples=scaled(200))
@given(
    st.lists(st.floats(min_value=0.0, max_value=60_000.0, allow_nan=False), min_size=1, max_size=400),
    st.sampled_from([1, 5, 50, 95, 99, 100]),
)
def test_latency_percentiles_are_within_half_a_percent_of_the_exact_ones(values: list[float], p: int) -> None:
    h = LatencyHistogram()
    h.extend(values)
    exact = sorted(values)[max(0, math.ceil(p / 100 * len(values)) - 1)]  # nearest rank
    got = h.percentile(p)
    if exact <= LatencyHistogram.FLOOR_MS:
        assert got == LatencyHistogram.FLOOR_MS
    else:
        assert abs(got - exact) <= 0.005 * exact + 1e-12, (got, exact)


def test_a_bots_latencies_take_bounded_memory_however_many_games_it_plays() -> None:
    """A standing's latency figures cost the same at game 100,000 as at game
    10: the table keeps a histogram, not every latency (issue 15)."""
    t = Table(["a", "b"], Ratings())
    rng = random.Random(7)
    for i in range(2_000):
        lat = [[rng.lognormvariate(1.5, 0.8) for _ in range(50)] for _ in range(2)]
        t.add(Outcome(index=i, seats=["a", "b"], places=[1, 2] if i % 2 else [2, 1], latencies=lat))
    h = t.latencies["a"]
    assert h.count == 100_000
    assert len(h.counts) < 1_200  # ~230 buckets a decade over the values' range
    row = {s.bot: s for s in t.standings()}["a"]
    assert row.latency_p50_ms is not None and row.latency_p95_ms is not None
    # lognormal(1.5, 0.8): median e^1.5 = 4.48 ms, p95 e^(1.5 + 1.645*0.8) = 16.6 ms
    assert 4.2 < row.latency_p50_ms < 4.8 and 15.0 < row.latency_p95_ms < 18.5
    assert LatencyHistogram().percentile(50) != LatencyHistogram().percentile(50)  # NaN when empty
