"""The league file: every bad input is a clear error naming its line and key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from referee.tournament.league import LeagueError, parse_league

GOOD = """\
[tournament]
name = "Test league"
seed = 7
table_size = 3
rounds = 2

[rules]
reverses = true

[timeouts]
move_ms = 500

[[bots]]
name = "a"
url = "http://127.0.0.1:9001"

[[bots]]
name = "b"
command = ["python", "-m", "sample_bots.greedy", "--port", "{port}"]

[[bots]]
name = "c"
url = "unix:/tmp/c.sock"
secret = "s3cret"
"""


def test_good_league_decodes_with_tournament_defaults() -> None:
    league = parse_league(GOOD, "league.toml")
    assert league.tournament.table_size == 3 and league.tournament.rounds == 2
    assert league.rules.reverses
    assert league.rules.play_for_places  # [D11] tournaments play for places by default
    assert league.timeouts.move_ms == 500 and league.timeouts.start_ms == 5000
    assert [b.name for b in league.bots] == ["a", "b", "c"]
    assert league.faults.strikes == 3


def test_play_for_places_can_be_switched_off() -> None:
    league = parse_league(GOOD.replace("reverses = true", "play_for_places = false"), "l.toml")
    assert not league.rules.play_for_places


@pytest.mark.parametrize(
    "change, message",
    [
        # unknown keys, at every level, with their line
        (("reverses = true", "revreses = true"), r"l.toml:8: \[rules\] unknown key 'revreses'"),
        (("seed = 7", "sed = 7"), r"l.toml:3: \[tournament\] unknown key 'sed'"),
        (('secret = "s3cret"', 'secrt = "s3cret"'), r"l.toml:24: \[\[bots\]\] #3: unknown key 'secrt'"),
        # wrong types
        (
            ("seed = 7", 'seed = "seven"'),
            r"l.toml:3: \[tournament\] 'seed': must be a whole number from 0 to 9223372036854775807 \(a seed\), "
            r"got 'seven'",
        ),
        (
            ('url = "http://127.0.0.1:9001"', "url = 9001"),
            r"l.toml:15: \[\[bots\]\] #1 'url': expected a string",
        ),
        (
            ("move_ms = 500", "move_ms = -5"),
            r"l.toml:11: \[timeouts\] 'move_ms': must be a whole number from 1 to 60000",
        ),
        # a 7-seat table
        (
            ("table_size = 3", "table_size = 7"),
            r"l.toml:4: \[tournament\] 'table_size': must be a whole number from 2 to 6 \(players at a table\)",
        ),
        # a bot without a name, or without any address
        (('name = "a"\n', ""), r"l.toml:13: \[\[bots\]\] #1 'name': is required"),
        (
            ('url = "http://127.0.0.1:9001"\n', ""),
            r"\[\[bots\]\] #1: bot 'a' needs exactly one of url, command, image",
        ),
        # duplicate names
        (('name = "c"', 'name = "a"'), r"l.toml:\d+: \[\[bots\]\] #3 'name': duplicate bot name 'a'"),
        # a command without {port}
        (('"--port", "{port}"', '"--port", "8000"'), r"\[\[bots\]\] #2 'command': must contain \{port\}"),
        # a bad URL
        (('url = "http://127.0.0.1:9001"', 'url = "127.0.0.1:9001"'), r"'url': expected http://host:port"),
        # rules a game cannot be played with
        (("reverses = true", 'deck = "tiny"'), r"\[rules\] unknown deck preset 'tiny'"),
        (
            ("reverses = true", "turn_limit = 0"),
            r"l.toml:8: \[rules\] 'turn_limit': must be a whole number from 1 to 100000",
        ),
    ],
)
def test_bad_league_files(change: tuple[str, str], message: str) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(LeagueError, match=message):
        parse_league(text, "l.toml")


def test_not_toml_at_all() -> None:
    with pytest.raises(LeagueError, match=r"l.toml: not valid TOML"):
        parse_league("[tournament\nseed = ", "l.toml")


def test_too_few_bots_for_a_table() -> None:
    text = GOOD.replace("table_size = 3", "table_size = 4")
    with pytest.raises(LeagueError, match=r"'table_size': 4 seats per table but only 3 bots"):
        parse_league(text, "l.toml")


def test_no_bots() -> None:
    with pytest.raises(LeagueError, match="no bots"):
        parse_league("[tournament]\nseed = 1\n", "l.toml")


def test_deck_table_in_rules() -> None:
    text = GOOD.replace(
        "reverses = true",
        textwrap.dedent("""\
        [rules.deck]
        colours = "ROY"
        """),
    )
    league = parse_league(text, "l.toml")
    assert league.rules.resolved_deck().colours == "ROY"
    with pytest.raises(LeagueError, match=r"l.toml:9: \[rules.deck\] unknown key 'colors'"):
        parse_league(text.replace('colours = "ROY"', 'colors = "ROY"'), "l.toml")


def test_sample_leagues_parse() -> None:
    from pathlib import Path

    from referee.tournament.league import load_league

    root = Path(__file__).resolve().parents[2] / "tournaments"
    for path in sorted(root.glob("*.toml")):
        league = load_league(path)
        assert league.bots, path


@pytest.mark.parametrize("bots, size", [(5, 4), (4, 2), (3, 3), (6, 3)])
def test_D3_tournaments_rotate_seats_so_every_bot_starts_equally_often(bots: int, size: int) -> None:
    """Seat 0 starts [D3]; the schedule rotates each meeting through every
    seat, with the same deal (duplicate deals), so each bot starts as often
    as any other and sits in every seat of every deal once."""
    from collections import Counter

    from referee.tournament.schedule import make_schedule

    names = [f"b{i}" for i in range(bots)]
    games = make_schedule(names, size, rounds=2, duplicate=True, seed=7)
    starts = Counter(g.seats[0] for g in games)
    assert set(starts) == set(names) and len(set(starts.values())) == 1
    by_deal: dict[int, list[tuple[str, ...]]] = {}
    for g in games:
        by_deal.setdefault(g.deal_seed, []).append(g.seats)
    for seatings in by_deal.values():
        assert len(seatings) == size
        for seat in range(size):
            assert len({s[seat] for s in seatings}) == size  # each bot in each seat once


@pytest.mark.parametrize("bots, size, rounds", [(5, 4, 2), (4, 2, 1), (3, 3, 3), (6, 3, 1)])
def test_schedule_size_counts_the_schedule(bots: int, size: int, rounds: int) -> None:
    from referee.tournament.schedule import make_schedule, schedule_size

    names = [f"b{i}" for i in range(bots)]
    assert schedule_size(bots, size, rounds) == len(make_schedule(names, size, rounds, True, 1))


# ------------------------------------------------- schedules (issue 13)


def many_bots(n: int) -> str:
    return "".join(f'[[bots]]\nname = "b{i}"\nurl = "http://127.0.0.1:{9000 + i}"\n\n' for i in range(n))


def test_schedule_defaults_to_round_robin_with_the_stop_defaults() -> None:
    league = parse_league(GOOD, "l.toml")
    assert league.tournament.schedule == "round-robin"
    assert league.stop.confidence == 0.95 and league.stop.top is None and league.stop.max_games is None
    assert league.stop.game_limit(10, 4) == 800


def test_adaptive_league_with_its_stop_table() -> None:
    text = GOOD.replace("rounds = 2", 'rounds = 2\nschedule = "adaptive"') + textwrap.dedent("""
        [stop]
        confidence = 0.9
        top = 2
        max_games = 300
        """)
    league = parse_league(text, "l.toml")
    assert league.tournament.schedule == "adaptive"
    assert (league.stop.confidence, league.stop.top, league.stop.max_games) == (0.9, 2, 300)
    from referee.tournament.schedule import AdaptiveScheduler, make_scheduler

    s = make_scheduler(league)
    assert isinstance(s, AdaptiveScheduler) and s.limit == 300 and s.top == 2 and s.total is None


@pytest.mark.parametrize(
    "schedule, stop, message",
    [
        (
            '"swiss"',
            "",
            r"l.toml:6: \[tournament\] 'schedule': expected one of 'round-robin', "
            r"'balanced', 'adaptive', got 'swiss'",
        ),
        ("3", "", r"l.toml:6: \[tournament\] 'schedule': expected a string, got a whole number"),
        (
            '"adaptive"',
            "confidence = 1.0",
            r"l.toml:\d+: \[stop\] 'confidence': must be a number between 0.5 and 1",
        ),
        (
            '"adaptive"',
            "confidence = 0.5",
            r"\[stop\] 'confidence': must be a number between 0.5 and 1 \(both excluded\)",
        ),
        ('"adaptive"', "top = 0", r"\[stop\] 'top': must be a whole number from 1 to 1000 \(ranks\), got 0"),
        ('"adaptive"', "max_games = 2", r"\[stop\] 'max_games': must be at least table_size \(3\)"),
        (
            '"adaptive"',
            "max_games = 1.5",
            r"\[stop\] 'max_games': must be a whole number from 2 to 10000000 \(games\), got 1.5",
        ),
        (
            '"adaptive"',
            "confidnce = 0.9",
            r"l.toml:\d+: \[stop\] unknown key 'confidnce' "
            r"\(expected one of: confidence, extended_from, max_games, top\)",
        ),
        (
            '"round-robin"',
            "top = 3",
            r"l.toml:\d+: \[stop\] 'top': only an adaptive league settles its first",
        ),
        ('"balanced"', "extended_from = [10]", r"\[stop\] 'extended_from': the budgets a league stopped at"),
        (
            '"adaptive"',
            "extended_from = [40]\nmax_games = 30",
            r"\[stop\] 'extended_from': the budgets a league stopped at, each at least table_size, rising",
        ),
    ],
)
def test_bad_schedules_and_stops(schedule: str, stop: str, message: str) -> None:
    text = GOOD.replace("rounds = 2", f"rounds = 2\nschedule = {schedule}")
    if stop:
        text += f"\n[stop]\n{stop}\n"
    with pytest.raises(LeagueError, match=message):
        parse_league(text, "l.toml")


def test_a_round_robin_too_big_to_play_is_refused_at_load_time() -> None:
    head = "[tournament]\nseed = 1\ntable_size = 6\n"
    with pytest.raises(
        LeagueError,
        match=r"^league.toml:3: \[tournament\] 'table_size': round-robin of 30 bots "
        r"at 6-seat tables is 3,562,650 games; use schedule = \"balanced\" or \"adaptive\"$",
    ):
        parse_league(head + many_bots(30), "league.toml")
    with pytest.raises(
        LeagueError, match=r"^league.toml:4: \[tournament\] 'schedule': round-robin of 30 bots"
    ):
        parse_league(head + 'schedule = "round-robin"\n' + many_bots(30), "league.toml")
    with pytest.raises(
        LeagueError, match=r"round-robin of 20 bots at 4-seat tables x 300 rounds is 5,814,000 games"
    ):
        parse_league("[tournament]\ntable_size = 4\nrounds = 300\n" + many_bots(20), "league.toml")
    # just under the limit, or another schedule: fine
    assert parse_league("[tournament]\ntable_size = 6\n" + many_bots(20), "l.toml").tournament.table_size == 6
    league = parse_league(head + 'schedule = "balanced"\nrounds = 10\n' + many_bots(1000), "l.toml")
    from referee.tournament.schedule import BalancedScheduler, make_scheduler

    s = make_scheduler(league)
    assert isinstance(s, BalancedScheduler) and s.total == 10 * 996


# ------------------------------------------------- nesting (issue 24, item 7)

#: 10,000 levels of arrays: tomllib recurses once per level (RecursionError).
DEEP_ARRAYS = "[tournament]\nseed = " + "[" * 10_000 + "]" * 10_000 + "\n"
#: 10,000 levels of inline tables.
DEEP_TABLES = "[tournament]\nseed = " + "{a = " * 10_000 + "1" + "}" * 10_000 + "\n"
#: Dotted keys nest without recursion in tomllib, but whatever walks the data next recurses.
DEEP_KEYS = GOOD + "[containers]\n" + "a." * 10_000 + "a = 1\n"


@pytest.mark.parametrize("text", [DEEP_ARRAYS, DEEP_TABLES], ids=["arrays", "inline-tables"])
def test_a_league_file_nested_10000_deep_is_a_league_error(text: str) -> None:
    """Attack: a league file 10,000 levels deep was a RecursionError (a 500
    in the service, a traceback from the CLI): now it is a LeagueError."""
    with pytest.raises(LeagueError, match=r"^l.toml: nested too deeply"):
        parse_league(text, "l.toml")


def test_deep_dotted_keys_are_refused_before_tomllib_reads_them() -> None:
    """Attack: tomllib builds them without recursion, but in a time that
    grows with the square of their parts: 30,000 (60 KB, under the
    service's body limit) blocked the service's event loop ~20 s. Refused
    by their dots first."""
    import time

    began = time.perf_counter()
    with pytest.raises(LeagueError, match=r"^l.toml:26: 10000 dots on one line, at most 100"):
        parse_league(DEEP_KEYS, "l.toml")
    with pytest.raises(LeagueError, match=r"^l.toml:1: 30000 dots on one line, at most 100"):
        parse_league("a." * 30_000 + "a = 1\n", "l.toml")
    assert time.perf_counter() - began < 1.0  # generous: it takes milliseconds


def test_a_league_file_dotted_as_deep_as_allowed_is_measured_and_refused() -> None:
    """Below the dots' limit, the depth of what tomllib built is measured
    without recursion and refused past 32 levels."""
    with pytest.raises(LeagueError, match=r"nested too deeply: 101 levels of tables and arrays, at most 32"):
        parse_league("a." * 100 + "a = 1\n", "l.toml")


def test_a_league_file_a_little_too_deep_is_refused_with_its_depth() -> None:
    text = GOOD + "[containers]\nx = " + "[" * 40 + "]" * 40 + "\n"
    with pytest.raises(LeagueError, match=r"nested too deeply: 42 levels of tables and arrays, at most 32"):
        parse_league(text, "l.toml")


def test_the_cli_says_a_league_file_is_nested_too_deeply(tmp_path: Path) -> None:
    """``referee tournament`` on it: one line naming the file, exit code 2, no traceback."""
    league = tmp_path / "deep.toml"
    league.write_text(DEEP_ARRAYS, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-m", "referee.cli", "tournament", str(league), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr
    assert f"error: {league}: nested too deeply" in r.stderr


def test_a_configuration_file_nested_10000_deep_is_a_config_error(tmp_path: Path) -> None:
    from referee.config import ConfigError, load_toml_struct

    path = tmp_path / "rules.toml"
    path.write_text("[rules]\nx = " + "[" * 10_000 + "]" * 10_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_toml_struct(path, "rules", dict)
