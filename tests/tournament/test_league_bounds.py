"""Every number of a league file has a range (issue 32, item 4): a value
outside it is refused before anything is sized by it, naming the line, the
table and key, and the range; the CLI exits 2 with that line. And the
``[competition]`` deadlines lie between 1970 and ten years after the clock
given (issue 32, item 8)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import msgspec.inspect as mi
import pytest

from referee.tournament.league import League, LeagueError, parse_league
from tests.support import ROOT
from tests.support.bounds import BASE, FIELDS, HUGE, Range, Size, attacks, case_text, range_text
from tests.support.clocks import FakeClock

CASES = [
    pytest.param(table, key, bound, value, quoted, id=f"{table}.{key}={value[:24]}")
    for table, keys in FIELDS.items()
    for key, bound in keys.items()
    for value, quoted in attacks(bound)
]


@pytest.mark.parametrize("table, key, bound, value, quoted", CASES)
def test_every_number_out_of_its_range_is_refused_naming_line_key_and_range(
    table: str, key: str, bound: Range | Size, value: str, quoted: str
) -> None:
    text, line, shown = case_text(table, key, value)
    started = time.perf_counter()
    with pytest.raises(LeagueError) as e:
        parse_league(text, "l.toml")
    message = str(e.value)
    assert message.startswith(f"l.toml:{line}: {shown} '{key}': must be {range_text(bound)}"), message
    assert f", got {quoted}" in message, message
    assert time.perf_counter() - started < 1.0  # refused before anything is sized by it


def numbers_of(info: mi.Type, path: str) -> set[str]:
    """The dotted paths of every int or float field under `info`."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.IntType | mi.FloatType):
        return {path}
    found: set[str] = set()
    if isinstance(info, mi.StructType):
        for f in info.fields:
            found |= numbers_of(f.type, f"{path}.{f.encode_name}".lstrip("."))
    elif isinstance(info, mi.UnionType):
        for option in info.types:
            found |= numbers_of(option, path)
    elif isinstance(info, mi.ListType):
        found |= numbers_of(info.item_type, path)
    return found


def test_the_table_above_holds_every_number_a_league_file_can_hold() -> None:
    """A number field added to the league (or to a Struct it holds) without a
    range fails here: add it to FIELDS, to the loader's bounds and to the docs."""
    known = {f"{table}.{key}" for table, keys in FIELDS.items() for key in keys}
    found = numbers_of(mi.type_info(League), "")
    assert found - known == set()
    assert {"ladder.concurrency", "rules.deck.copies", "bots.limits.pids"} <= found  # the walk goes deep


@pytest.mark.parametrize(
    "table, key, value",
    [
        ("tournament", "concurrency", "256"),
        ("tournament", "seed", str(HUGE)),
        ("ladder", "concurrency", "1"),
        ("timeouts", "bank_ms", "3600000"),
        ("ratings", "draw_probability", "0"),
        ("containers", "memory", '"64g"'),
        ("containers", "cpus", "0.01"),
        ("containers", "user", '"4294967294:1000"'),
        ("rules.deck", "copies", "10"),
    ],
)
def test_the_ends_of_a_range_are_accepted(table: str, key: str, value: str) -> None:
    text, _, _ = case_text(table, key, value)
    parse_league(text, "l.toml")


def test_a_uid_beyond_32_bits_is_refused() -> None:
    text, line, _ = case_text("containers", "user", '"4294967295:1000"')
    with pytest.raises(
        LeagueError, match=rf"l.toml:{line}: \[containers\] 'user': must be a uid .* 4294967294"
    ):
        parse_league(text, "l.toml")


def test_a_number_too_long_for_python_to_read_is_refused_naming_its_line() -> None:
    """Python reads no integer of more than 4300 digits: tomllib raised a
    bare ValueError, a traceback (a 500 in the service)."""
    text = f"{BASE}\n[faults]\nstrikes = {'9' * 5000}\n"
    with pytest.raises(LeagueError, match=r"^l.toml:10: a number of more than 4300 digits"):
        parse_league(text, "l.toml")


#: The issue's attack, run as the service's ladder runs it: it planned
#: tables for 2**63 - 1 games at once, +334 MiB in 25 s with no game played.
LADDER_ATTACK = """
import asyncio, atexit, sys, tempfile
from pathlib import Path

# Its own peak, printed as it exits: VmHWM is this program's since exec (the
# wait4 figure would count the pages of the test process it was forked from).
atexit.register(lambda: print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:"))))
from referee.bots.factory import BotSpec
from referee.tournament.ladder import Ladder, Wanted, entry_name
from referee.tournament.league import LeagueError, parse_league

text = "[tournament]\\ntable_size = 2\\n\\n[ladder]\\nconcurrency = 9223372036854775807\\n"
try:
    league = parse_league(text, "league.toml", bots_to_come=True)
except LeagueError as e:
    print(e, file=sys.stderr)
    sys.exit(2)
command = [sys.executable, "-m", "sample_bots.greedy", "--port", "{port}"]
wanted = [Wanted(name=entry_name(n, 1), team=n, submission=1, spec=BotSpec(name=n, command=command)) for n in "abc"]
out = Path(tempfile.mkdtemp()) / "ladder"
asyncio.run(Ladder(league, out, wanted=wanted, log=lambda m: None).run())
"""


def test_a_ladder_of_huge_concurrency_is_refused_at_once_not_planned() -> None:
    """Before: the ladder grew by ~27 MiB/s planning its first block (+334
    MiB at 10 s, no game played) until killed at the timeout; after:
    refused in a blink with the line and the range."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", LADDER_ATTACK],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    timer = threading.Timer(20, proc.kill)  # the bound of the old code's run
    timer.start()
    try:
        out, err = proc.communicate()
    finally:
        timer.cancel()
    seconds = time.perf_counter() - started
    peak_mib = int(out.strip() or 0) / 1024  # the child's own VmHWM in KiB (none when killed)
    print(f"ladder attack: exit {proc.returncode} after {seconds:.2f} s, peak {peak_mib:.0f} MiB")
    assert proc.returncode == 2, (
        f"exit {proc.returncode} after {seconds:.0f} s, peak {peak_mib:.0f} MiB: {err}"
    )
    assert (
        "league.toml:5: [ladder] 'concurrency': must be a whole number from 1 to 256 (games at once), "
        "got 9223372036854775807"
    ) in err
    assert peak_mib < 200


def test_the_cli_exits_2_with_the_line_and_the_range(tmp_path: Path) -> None:
    path = tmp_path / "league.toml"
    bots = BASE.replace('image = "bot:1"', 'url = "http://127.0.0.1:9002"')
    path.write_text(f"[tournament]\nconcurrency = {HUGE}\n\n{bots}")
    r = subprocess.run(
        [sys.executable, "-m", "referee.cli", "tournament", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2, r.stderr
    assert (
        "league.toml:2: [tournament] 'concurrency': must be a whole number from 1 to 256 (games at once), "
        f"got {HUGE}"
    ) in r.stderr
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------ deadlines (item 8)


def deadline_league(freeze_at: str) -> str:
    return f"[competition]\nfreeze_at = {freeze_at}\n\n{BASE}"


#: The clock of these tests: 2030-01-01 UTC (so that nothing depends on today).
NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    "when",
    [
        "9999-12-31T23:59:59-14:00",  # year 10000 in UTC: answered 500 by every page showing it
        "0001-01-01T00:00:00+14:00",  # year 0 in UTC
        "0001-01-01T00:00:00Z",
        "1900-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "2040-01-01T00:00:01Z",  # ten years and a second after the clock
        "2500-06-01T12:00:00+02:00",
    ],
)
def test_a_deadline_before_1970_or_past_ten_years_is_refused_naming_its_line(when: str) -> None:
    with pytest.raises(LeagueError) as e:
        parse_league(deadline_league(when), "l.toml", clock=FakeClock(NOW))
    message = str(e.value)
    assert message.startswith("l.toml:2: [competition] 'freeze_at': "), message
    assert (
        "is out of range: a deadline is a time from 1970-01-01 00:00:00 UTC to ten years from now " in message
    )
    assert "(2040-01-01 00:00:00 UTC)" in message


@pytest.mark.parametrize(
    "when", ["1970-01-01T00:00:00Z", "2020-05-05T10:00:00+02:00", "2040-01-01T00:00:00Z"]
)
def test_a_deadline_from_1970_to_ten_years_ahead_is_accepted(when: str) -> None:
    league = parse_league(deadline_league(when), "l.toml", clock=FakeClock(NOW))
    assert league.competition.freeze_at == datetime.datetime.fromisoformat(when)


def test_a_deadline_is_checked_against_the_clock_given() -> None:
    text = deadline_league("2035-01-01T00:00:00Z")
    parse_league(text, "l.toml", clock=FakeClock(NOW))
    with pytest.raises(LeagueError, match="to ten years from now"):
        parse_league(text, "l.toml", clock=FakeClock(NOW - 10 * 365 * 86400))


def test_a_league_built_in_code_is_checked_with_the_same_ranges() -> None:
    """A League built in code, not read from a file (the service's runs add
    their teams' bots to one), is checked with the same ranges."""
    from referee.tournament.league import LadderTable, TomlLines, check_league

    league = msgspec.structs.replace(parse_league(BASE, "l.toml"), ladder=LadderTable(concurrency=HUGE))
    with pytest.raises(LeagueError, match=r"\[ladder\] 'concurrency': must be a whole number from 1 to 256"):
        check_league(league, "l.toml", TomlLines(BASE))


def test_the_turn_limit_is_configurable_within_its_range() -> None:
    """[D12] "default 1,000 turns, configurable": the default and any limit from 1 to
    100,000 turns play; a limit beyond is refused naming the line and the range."""
    assert parse_league(BASE, "l.toml").rules.turn_limit == 1000
    for turns in ("1", "1000", "100000"):
        text, _, _ = case_text("rules", "turn_limit", turns)
        assert parse_league(text, "l.toml").rules.turn_limit == int(turns)
    text, line, _ = case_text("rules", "turn_limit", "100001")
    with pytest.raises(
        LeagueError, match=rf"l.toml:{line}: \[rules\] 'turn_limit': must be a whole number from 1 to 100000"
    ):
        parse_league(text, "l.toml")
