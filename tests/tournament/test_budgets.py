"""A budget for any schedule (issue 34 item 5) and an adaptive league extended
after it stopped at its budget (item 4): ``[stop] max_games`` caps a
round-robin and a balanced schedule; a competition's league keeps ``top``
for its final and says where it has no meaning; an extended schedule plans
the games it played exactly as it did, then goes on."""

from __future__ import annotations

import random

import msgspec
import pytest

from referee.tournament.league import League, LeagueError, Ratings, league_notes, parse_league
from referee.tournament.ratings import Outcome, Table
from referee.tournament.runner import league_fingerprint
from referee.tournament.schedule import AdaptiveScheduler, GameSpec, Scheduler, make_scheduler

BOTS = "".join(f'\n[[bots]]\nname = "b{i}"\nurl = "http://127.0.0.1:{9000 + i}"\n' for i in range(5))


def league(tournament: str, stop: str = "", *, bots: str = BOTS, to_come: bool = False) -> League:
    return parse_league(f"[tournament]\n{tournament}\n[stop]\n{stop}\n{bots}", "l.toml", bots_to_come=to_come)


def every_game(s: Scheduler) -> list[GameSpec]:
    out: list[GameSpec] = []
    k = 0
    while block := s.block(k, None):
        out += block
        k += 1
    return out


@pytest.mark.parametrize("schedule", ["round-robin", "balanced"])
def test_max_games_caps_a_round_robin_and_a_balanced_schedule(schedule: str) -> None:
    full = every_game(make_scheduler(league(f'schedule = "{schedule}"\ntable_size = 2\nrounds = 4')))
    capped_league = league(f'schedule = "{schedule}"\ntable_size = 2\nrounds = 4', "max_games = 15")
    s = make_scheduler(capped_league)
    assert s.total is not None and s.total <= 15
    games = every_game(s)
    assert len(full) > 15 and 0 < len(games) <= 15
    assert s.stopped == "max_games"
    if schedule == "round-robin":
        assert games == full[:15]  # the schedule's first games, in its order
    else:  # whole tables of its rounds only
        assert len(games) == 14
        key = {(g.round, g.meeting, g.rotation, g.deal_seed, g.seats) for g in full}
        assert all((g.round, g.meeting, g.rotation, g.deal_seed, g.seats) in key for g in games)


def test_top_is_refused_where_it_has_no_meaning_and_kept_for_a_final() -> None:
    with pytest.raises(LeagueError, match=r"l.toml:4: \[stop\] 'top': only an adaptive league settles"):
        league('schedule = "balanced"', "top = 2")
    kept = league('schedule = "balanced"', "top = 2\nmax_games = 40", bots="", to_come=True)
    notes = league_notes(kept)
    assert any("top = 2 counts in the final" in n for n in notes)
    assert any(
        "max_games = 40 is the game budget of the final" in n and "the ladder has none" in n for n in notes
    )
    assert league_notes(league('schedule = "adaptive"')) == []


def simulate(s: AdaptiveScheduler, names: list[str]) -> list[GameSpec]:
    """Blocks as the runner plans them: block k from the standings after the
    blocks before k-1; each game's places from fixed strengths and its deal."""
    strength = {n: i * 0.15 for i, n in enumerate(names)}
    table = Table(names, Ratings())
    blocks: list[list[GameSpec]] = []
    applied = 0
    k = 0
    while True:
        standings = None
        if k >= 2:
            for block in blocks[applied : k - 1]:
                for g in block:
                    luck = random.Random(g.deal_seed)
                    score = {n: strength[n] + luck.gauss(0, 1) for n in g.seats}
                    order = sorted(g.seats, key=lambda n: -score[n])
                    table.add(
                        Outcome(
                            index=g.index, seats=list(g.seats), places=[order.index(n) + 1 for n in g.seats]
                        )
                    )
            applied = k - 1
            standings = table.standings(0.95)
        block = s.block(k, standings)
        if not block:
            return [g for b in blocks for g in b]
        blocks.append(block)
        k += 1


def test_an_extended_adaptive_schedule_replays_its_games_then_goes_on() -> None:
    names = [f"b{i}" for i in range(6)]
    first = AdaptiveScheduler(names, 2, 1, True, 7, max_games=40)
    played = simulate(first, names)
    assert first.stopped == "max_games" and len(played) == 40
    extended = AdaptiveScheduler(names, 2, 1, True, 7, max_games=100, extended_from=[40])
    more = simulate(extended, names)
    assert more[:40] == played  # the same games, the same seeds
    assert 40 < len(more) <= 100
    # the budget alone (not the games it plans) changes the weights: without the stages the plan differs
    plain = simulate(AdaptiveScheduler(names, 2, 1, True, 7, max_games=100), names)
    assert plain[:40] != played


def test_an_extended_league_is_the_same_league_to_its_resume() -> None:
    base = league('schedule = "adaptive"\ntable_size = 2', "max_games = 40")
    extended = msgspec.structs.replace(
        base, stop=msgspec.structs.replace(base.stop, extended_from=[40], max_games=90)
    )
    assert league_fingerprint(extended) == league_fingerprint(base)
    other = msgspec.structs.replace(base, stop=msgspec.structs.replace(base.stop, max_games=90))
    assert league_fingerprint(other) != league_fingerprint(base)
    assert make_scheduler(extended).limit == 40  # until it reaches its first budget
