"""The league file: a TOML description of a tournament.

Decoded with msgspec into typed Structs. Every error names the key, the line
and what was expected, before any game starts::

    league.toml:14: [[bots]] #2 'url': expected a string (http://host:port), got 8001

Unknown keys are refused everywhere (a misspelt variant must not be silently
off), although the wire Structs it reuses (``Rules``, ``Timeouts``) accept
unknown fields for forward compatibility of bots.
"""

from __future__ import annotations

import datetime
import math
import re
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from protocol.messages import MAX_PLAYERS, MIN_PLAYERS, Rules, Timeouts

from ..bots.factory import BotSpec
from ..bots.house import BUILTIN_BOTS, builtin_spec, is_builtin
from ..bots.sandbox.container_limits import ContainerLimits, check_limits, parse_size
from ..config import MAX_NESTING, TOO_DEEP, find_unknown_key, nesting, too_deep
from ..record import FaultPolicy


class LeagueError(ValueError):
    """A league file that cannot be used; the message names file, line, key."""


class TournamentTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: Shown in the output and the service.
    name: str = "league"
    #: Every deal and the schedule derive from it: same seed, same games.
    seed: int = 1
    #: Players per game, 2 to 6.
    table_size: int = 2
    #: Which games: "round-robin" (every combination of `table_size` bots),
    #: "balanced" (rounds in which every bot sits at one table) or "adaptive"
    #: (balanced at first, then the tables that settle the order; see [stop]).
    schedule: str = "round-robin"
    #: round-robin: how many times every combination is played; balanced: the
    #: number of rounds; adaptive: the balanced rounds played before adapting
    #: (new deals each round).
    rounds: int = 1
    #: Play each deal once per seat rotation with the same cards, so every bot
    #: holds every seat's cards of the deal (duplicate deals).
    duplicate: bool = True
    #: Games played at once.
    concurrency: int = 4
    #: Output folder (relative to the league file): database, replays, logs,
    #: standings.
    output: str = "out/{name}"


class Ratings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """TrueSkill parameters (defaults: the TrueSkill paper's)."""

    mu: float = 25.0
    sigma: float = 25.0 / 3
    beta: float = 25.0 / 6
    tau: float = 25.0 / 300
    draw_probability: float = 0.10


#: The values of ``[tournament] schedule``.
SCHEDULES = ("round-robin", "balanced", "adaptive")


class Stop(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """When an adaptive league ends: every adjacent pair of the standings (or
    of the first `top` ranks) ordered at `confidence`, or `max_games` played."""

    #: The probability that each bot is truly above the next one, for the
    #: order to count as settled (also what the standings call separated).
    confidence: float = 0.95
    #: Settle the first `top` ranks only (each of them and the next bot).
    top: int | None = None
    #: The most games the league plays (adaptive, by default: 20 x bots x
    #: table_size; a round-robin or a balanced schedule: its first games only).
    max_games: int | None = None
    #: An adaptive league extended after it stopped at its budget: the
    #: budgets it stopped at, in order (each below the next and below
    #: `max_games`, the new one). The service's *extend the final* sets it.
    extended_from: list[int] = msgspec.field(default_factory=list)

    def game_limit(self, bots: int, table_size: int) -> int:
        """`max_games`, or its default for a league of `bots` bots."""
        return self.max_games if self.max_games is not None else 20 * bots * table_size


#: The values of ``[ladder] ratings``.
LADDER_RATINGS = ("fresh", "inherit")
#: Who fills a ladder's empty seats (``[ladder] fill``).
LADDER_FILLS = (*BUILTIN_BOTS, "none")


class LadderTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The classroom service's ladder: the games played all the time while a
    competition is open (``referee serve``; see referee/tournament/ladder.py)."""

    #: Games played at once while the competition is open (default: the
    #: tournament's concurrency); the admin may set another when opening.
    concurrency: int | None = None
    #: A team's new version starts "fresh" (the league's μ and σ) or
    #: "inherit"s its previous version's μ, with σ raised back to at least
    #: half the fresh σ so that a changed bot can still move.
    ratings: str = "fresh"
    #: A new entry is seated first until it has as many games as the
    #: least-played entry, but at most this many games ahead of the others.
    catch_up: int = 100
    #: Who fills the empty seats when fewer players (teams' versions in
    #: play and house bots) than a table's seats remain but at least two:
    #: a built-in house bot ("greedy", the default, "random", "tactician",
    #: "searcher": house bots named ``house-greedy-1``...), or "none" (the
    #: ladder waits for players). The final fills its seats the same way.
    fill: str = "greedy"
    #: A team's practice games (``referee serve``, issue 26) may seat the
    #: other teams' versions in play; false: house bots and its own versions only.
    practice_against_teams: bool = False


class CompetitionTimes(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The classroom service's deadlines (``[competition]``; ignored by
    ``referee tournament``): ISO 8601 times with a zone, as TOML times
    (``freeze_at = 2026-06-01T17:00:00+02:00``) or strings. At `freeze_at`
    an open competition freezes by itself; at `final_at` a frozen one (an
    open one freezes first) starts its final."""

    freeze_at: datetime.datetime | None = None
    final_at: datetime.datetime | None = None


class League(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tournament: TournamentTable = msgspec.field(default_factory=TournamentTable)
    #: The classroom service's deadlines (ignored by ``referee tournament``).
    competition: CompetitionTimes = msgspec.field(default_factory=CompetitionTimes)
    #: The classroom service's ladder (ignored by ``referee tournament``).
    ladder: LadderTable = msgspec.field(default_factory=LadderTable)
    #: When an adaptive league stops (the confidence is the standings', for
    #: every schedule).
    stop: Stop = msgspec.field(default_factory=Stop)
    rules: Rules = msgspec.field(default_factory=lambda: Rules(play_for_places=True))
    timeouts: Timeouts = msgspec.field(default_factory=Timeouts)
    faults: FaultPolicy = msgspec.field(default_factory=FaultPolicy)
    ratings: Ratings = msgspec.field(default_factory=Ratings)
    bots: list[BotSpec] = msgspec.field(default_factory=list)
    #: Limits of every image bot (each bot's ``limits`` override them).
    containers: ContainerLimits = msgspec.field(default_factory=ContainerLimits)
    #: Where the file was read from (set by the loader).
    path: str = ""

    def limits_for(self, entry: BotSpec) -> ContainerLimits:
        """The limits an image bot runs with: its own, else the league's."""
        return entry.limits if entry.limits is not None else self.containers

    def output_dir(self) -> Path:
        base = Path(self.path).parent if self.path else Path.cwd()
        return (base / self.tournament.output.format(name=_slug(self.tournament.name))).resolve()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "league"


# ------------------------------------------------------------------ bounds


class Bound(NamedTuple):
    """The numbers a key of the league file may hold: from `low` to `high`,
    both included (both excluded when `exclusive`)."""

    low: float
    high: float
    #: What the number counts, shown with the range ("games at once").
    what: str = ""
    #: A whole number (an int); else any number (an int or a float).
    whole: bool = True
    exclusive: bool = False

    def describe(self) -> str:
        """``a whole number from 1 to 256 (games at once)``."""
        kind = "a whole number" if self.whole else "a number"
        span = (
            f"between {_number(self.low)} and {_number(self.high)} (both excluded)"
            if self.exclusive
            else f"from {_number(self.low)} to {_number(self.high)}"
        )
        return f"{kind} {span}" + (f" ({self.what})" if self.what else "")

    def admits(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and (self.whole or not math.isfinite(value)):
            return False
        return self.low < value < self.high if self.exclusive else self.low <= value <= self.high

    def problem(self, value: object) -> str | None:
        """Why `value` may not be this key's (None: it may)."""
        return None if self.admits(value) else f"must be {self.describe()}, got {shown(value)}"


class SizeBound(NamedTuple):
    """A size in bytes written as Docker writes it (``"128m"``), from `low` to `high`."""

    low: int
    high: int
    what: str = ""

    def describe(self) -> str:
        return f'a size from {_size(self.low)} to {_size(self.high)} (like "128m"{", " + self.what if self.what else ""})'

    def problem(self, value: object) -> str | None:
        try:
            size = parse_size(value) if isinstance(value, str) else None
        except (ValueError, OverflowError):  # OverflowError: 400 nines are an infinite float
            size = None
        if size is not None and self.low <= size <= self.high:
            return None
        return f"must be {self.describe()}, got {shown(value)}"


class IdsBound(NamedTuple):
    """``uid`` or ``uid:gid``: each a Linux id (32 bits, the last one meaning "none")."""

    high: int = 2**32 - 2

    def describe(self) -> str:
        return f'a uid or "uid:gid" of ids from 1 to {self.high}'

    def problem(self, value: object) -> str | None:
        # the form and root are checked by check_limits; here only how big the ids are
        if isinstance(value, str) and re.fullmatch(r"[0-9]{1,40}(:[0-9]{1,40})?", value):
            if all(int(part) <= self.high for part in value.split(":")):
                return None
            return f"must be {self.describe()}, got {shown(value)}"
        return None


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**64 else repr(x)


def _size(n: int) -> str:
    for unit, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def shown(value: object) -> str:
    """A value of the file as an error message quotes it (a huge one shortened)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        text = str(value) if abs(value) < 10**30 else f"a number of {len(str(abs(value)))} digits"
        return text
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, float | datetime.datetime | datetime.date | datetime.time):
        return value.isoformat() if not isinstance(value, float) else repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


#: Games played at once: ``[tournament] concurrency`` and ``[ladder]
#: concurrency``, and what the service's admin may give when opening a
#: competition (its API and its form).
CONCURRENCY: Final = Bound(1, 256, "games at once")
#: A seed: what SQLite stores (a signed 64-bit integer); a league's, and a
#: final's in the service's API.
SEED: Final = Bound(0, 2**63 - 1, "a seed")
#: A round-robin of this many games or more is refused at load time.
ROUND_ROBIN_LIMIT: Final = 1_000_000
#: The most ``[stop] max_games`` may be (a practice league's "no stop": 10 million).
MAX_GAMES: Final = 10_000_000

#: How a container bot may be confined (``[containers]``, a bot's ``limits``);
#: the smallest values are :func:`~referee.bots.sandbox.container_limits.check_limits`'s.
CONTAINER_BOUNDS: Final[dict[str, Bound | SizeBound | IdsBound]] = {
    "memory": SizeBound(6 * 1024**2, 64 * 1024**3, "swap included"),
    "cpus": Bound(0.01, 64, "cores' worth of time", whole=False),
    "pids": Bound(4, 4096, "processes and threads"),
    "tmpfs": SizeBound(4096, 64 * 1024**3),
    "ready_timeout_s": Bound(0.1, 600, "seconds", whole=False),
    "user": IdsBound(),
    "log_limit": SizeBound(1024, 1024**3),
    "socket_folder": SizeBound(4096, 1024**3),
}

#: Every number a league file may hold, by table, with its range (the
#: ``[[bots]]`` tables' ``limits``: :data:`CONTAINER_BOUNDS`, as ``[containers]``).
#: docs/league-file.md lists them; a value outside is refused naming its line.
BOUNDS: Final[dict[str, dict[str, Bound | SizeBound | IdsBound]]] = {
    "tournament": {
        "seed": SEED,
        "table_size": Bound(MIN_PLAYERS, MAX_PLAYERS, "players at a table"),
        "rounds": Bound(1, 1000, "rounds"),
        "concurrency": CONCURRENCY,
    },
    "ladder": {"concurrency": CONCURRENCY, "catch_up": Bound(0, 10_000, "games")},
    "stop": {
        "confidence": Bound(0.5, 1, "a probability", whole=False, exclusive=True),
        "top": Bound(1, 1000, "ranks"),
        "max_games": Bound(MIN_PLAYERS, MAX_GAMES, "games"),
        "extended_from": Bound(MIN_PLAYERS, MAX_GAMES, "games"),
    },
    "rules": {"turn_limit": Bound(1, 100_000, "turns")},
    "rules.deck": {
        "copies": Bound(1, 10, "copies of each rank per colour"),
        "clear": Bound(0, 100, "cards"),
        "clear_plus1": Bound(0, 100, "cards"),
        "clear_plus2": Bound(0, 100, "cards"),
    },
    "timeouts": {
        "move_ms": Bound(1, 60_000, "milliseconds"),
        "bank_ms": Bound(0, 3_600_000, "milliseconds"),
        "start_ms": Bound(1, 300_000, "milliseconds"),
        "end_ms": Bound(1, 60_000, "milliseconds"),
    },
    "faults": {"strikes": Bound(1, 1000, "faults")},
    "ratings": {
        "mu": Bound(-10_000, 10_000, whole=False),
        "sigma": Bound(0.001, 10_000, whole=False),
        "beta": Bound(0.001, 10_000, whole=False),
        "tau": Bound(0, 10_000, whole=False),
        "draw_probability": Bound(0, 0.99, whole=False),
    },
    "containers": CONTAINER_BOUNDS,
}


def bounds_problems(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Every value of `data` (a league file as parsed TOML, or a League as
    builtins) outside its range: [(table, key, message)], in file order of
    the tables above."""
    found: list[tuple[tuple[str | int, ...], str, str]] = []

    def check(
        where: tuple[str | int, ...], table: object, bounds: dict[str, Bound | SizeBound | IdsBound]
    ) -> None:
        if not isinstance(table, dict):
            return
        for key, bound in bounds.items():
            value = table.get(key)
            for item in value if isinstance(value, list) else [value]:  # a list: each of its numbers
                if item is not None and (problem := bound.problem(item)):
                    found.append((where, key, problem))
                    break

    for path, bounds in BOUNDS.items():
        node: object = data
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        check(tuple(path.split(".")), node, bounds)
    bots = data.get("bots")
    for i, bot in enumerate(bots if isinstance(bots, list) else []):
        if isinstance(bot, dict):
            check(("bots", i, "limits"), bot.get("limits"), CONTAINER_BOUNDS)
    return found


#: The first time a deadline may be: times are kept as Unix times.
EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: The last time a page can show (year 9999 in UTC).
LAST_TIME: Final = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)
#: How far ahead of now a deadline may be, in years.
DEADLINE_YEARS: Final = 10


def deadline_problem(when: float, now: float | None) -> str | None:
    """Why a deadline at Unix time `when` may not be set at Unix time `now`:
    before 1970, or more than ten years ahead (None: it may). `now` None:
    only what a page can show (a league already stored, read again)."""
    high = LAST_TIME.timestamp() if now is None else _years_after(now, DEADLINE_YEARS)
    if EPOCH.timestamp() <= when <= high:
        return None
    last = _utc(high) if now is None else f"ten years from now ({_utc(high)})"
    return f"is out of range: a deadline is a time from {_utc(EPOCH.timestamp())} to {last}"


def _years_after(t: float, years: int) -> float:
    """The same day and time `years` later (28 February for a 29th), at most :data:`LAST_TIME`."""
    start = datetime.datetime.fromtimestamp(max(t, 0), datetime.UTC)
    if start.year + years > LAST_TIME.year:
        return LAST_TIME.timestamp()
    day = 28 if (start.month, start.day) == (2, 29) else start.day
    return start.replace(year=start.year + years, day=day).timestamp()


def _utc(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# ------------------------------------------------------------------ loading


#: The most dots on one line of a league file (a key ``a.b.c``, a URL, an
#: address: a few).
MAX_DOTS = 100


def load_league(path: str | Path, *, bots_to_come: bool = False) -> League:
    """Read and check a league file; raises :class:`LeagueError`. With
    `bots_to_come`, a competition's: the teams' bots join it later."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise LeagueError(f"{p}: cannot read the league file: {e.strerror or e}") from None
    return parse_league(text, str(p), bots_to_come=bots_to_come)


def parse_league(
    text: str,
    filename: str = "league.toml",
    *,
    bots_to_come: bool = False,
    clock: Callable[[], float] = time.time,
) -> League:
    """Parse and check a league file's text. `bots_to_come`: more bots join
    later (the classroom service's teams), so having none yet, or fewer than a
    table's seats, is not an error. `clock`: the time the ``[competition]``
    deadlines are checked against (at most ten years ahead)."""
    lines = TomlLines(text)
    for no, line in enumerate(text.splitlines(), 1):
        # tomllib's time grows with the square of a dotted key's parts (10,000: 1.2 s, 30,000: 20 s)
        if (dots := line.count(".")) > MAX_DOTS:
            raise LeagueError(
                f"{filename}:{no}: {dots} dots on one line, at most {MAX_DOTS}: keys dotted that "
                "deep are refused (a league file nests a few levels)"
            )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LeagueError(f"{filename}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses once per level of [ or {: 10,000 of them are a crash
        raise LeagueError(f"{filename}: {TOO_DEEP}") from None
    except ValueError:  # Python reads no integer of more than 4300 digits
        no = next((n for n, line in enumerate(text.splitlines(), 1) if re.search(r"[0-9_]{4300}", line)), 1)
        raise LeagueError(
            f"{filename}:{no}: a number of more than 4300 digits: every number of a league file has a "
            "range of a few digits (docs/league-file.md lists them)"
        ) from None
    depth = nesting(data)  # dotted keys nest without recursion: a.a.a...a = 1
    if depth > MAX_NESTING:
        raise LeagueError(f"{filename}: {too_deep(depth)}")
    unknown = find_unknown_key(data, League)
    if unknown is not None or "path" in data:  # `path` is set by the loader only
        parts, key, known = unknown if unknown is not None else ([], "path", [])
        where = tuple(int(p) if p.isdigit() else p for p in parts)
        allowed = sorted(k for k in known if k != "path") or sorted(
            f.encode_name for f in msgspec.structs.fields(League) if f.encode_name != "path"
        )
        raise LeagueError(
            f"{filename}:{lines.line_of(where, key)}: {_describe(where)}unknown key '{key}'"
            f" (expected one of: {', '.join(allowed)})"
        )
    for where, key, message in bounds_problems(data):  # before anything is sized by them
        raise LeagueError(f"{filename}:{lines.line_of(where, key)}: {_describe(where, key)}{message}")
    rules = data.get("rules")
    if isinstance(rules, dict) and "play_for_places" not in rules:
        rules["play_for_places"] = True  # [D11] tournaments play for places
    try:
        league = msgspec.convert(data, League)
    except msgspec.ValidationError as e:
        at, field, message = _split_validation(str(e))
        raise LeagueError(f"{filename}:{lines.line_of(at, field)}: {_describe(at, field)}{message}") from None
    league.path = str(Path(filename).resolve())
    _merge_limits(league, data, filename, lines)
    check_league(league, filename, lines, bots_to_come=bots_to_come, now=clock())
    league.bots = [
        msgspec.structs.replace(builtin_spec(b.builtin, b.name), fresh_process=b.fresh_process)
        if b.builtin is not None and not is_builtin(b)
        else b
        for b in league.bots
    ]
    return league


def _merge_limits(league: League, data: dict[str, Any], filename: str, lines: TomlLines) -> None:
    """A bot's ``limits`` table overrides only the keys it names: store the
    league's ``[containers]`` with those keys replaced."""
    base = msgspec.to_builtins(league.containers)
    for i, raw in enumerate(data.get("bots") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("limits"), dict):
            continue
        try:
            league.bots[i].limits = msgspec.convert({**base, **raw["limits"]}, ContainerLimits)
        except msgspec.ValidationError as e:  # pragma: no cover - caught by the convert above
            raise LeagueError(
                f"{filename}:{lines.line_of(('bots', i), 'limits')}: [[bots]] #{i + 1} 'limits': {e}"
            ) from None


def check_league(
    league: League,
    filename: str,
    lines: TomlLines,
    *,
    bots_to_come: bool = False,
    now: float | None = None,
) -> None:
    """The checks a type cannot express, each naming its key and line
    (`bots_to_come`: as in :func:`parse_league`; `now`: the time the
    deadlines may be at most ten years ahead of, None: not checked)."""

    def fail(where: tuple[str | int, ...], key: str | None, message: str) -> None:
        raise LeagueError(f"{filename}:{lines.line_of(where, key)}: {_describe(where, key)}{message}")

    for table, key, message in bounds_problems(msgspec.to_builtins(league)):
        fail(table, key, message)
    t = league.tournament
    if t.schedule not in SCHEDULES:
        fail(
            ("tournament",),
            "schedule",
            f"expected one of {', '.join(repr(s) for s in SCHEDULES)}, got {t.schedule!r}",
        )
    ladder = league.ladder
    if ladder.ratings not in LADDER_RATINGS:
        fail(
            ("ladder",),
            "ratings",
            f"expected one of {', '.join(repr(s) for s in LADDER_RATINGS)}, got {ladder.ratings!r}",
        )
    if ladder.fill not in LADDER_FILLS:
        fail(
            ("ladder",),
            "fill",
            f"expected one of {', '.join(repr(s) for s in LADDER_FILLS)}, got {ladder.fill!r}",
        )
    deadlines = league.competition
    for key in ("freeze_at", "final_at"):
        when = getattr(deadlines, key)
        if when is not None and when.tzinfo is None:
            fail(
                ("competition",),
                key,
                f"{when.isoformat()} has no time zone: write it with its offset or Z "
                f"(e.g. {when.isoformat()}+02:00, {when.isoformat()}Z for UTC)",
            )
        if when is not None and (problem := deadline_problem(when.timestamp(), now)):
            fail(("competition",), key, f"{when.isoformat()} {problem}")
    if (
        deadlines.freeze_at is not None
        and deadlines.final_at is not None
        and deadlines.final_at < deadlines.freeze_at
    ):
        fail(
            ("competition",),
            "final_at",
            f"{deadlines.final_at.isoformat()} is before freeze_at "
            f"({deadlines.freeze_at.isoformat()}): the final starts once frozen",
        )
    stop = league.stop
    if stop.max_games is not None and stop.max_games < t.table_size:
        fail(
            ("stop",),
            "max_games",
            f"must be at least table_size ({t.table_size}): one table's rotations, got {stop.max_games}",
        )
    budgets = [*stop.extended_from, stop.max_games or 0]
    if stop.extended_from and (
        stop.max_games is None
        or any(a >= b for a, b in zip(budgets, budgets[1:]))
        or budgets[0] < t.table_size
    ):
        fail(
            ("stop",),
            "extended_from",
            "the budgets a league stopped at, each at least table_size, rising, and below max_games "
            f"(the budget now), got {stop.extended_from} then max_games = {stop.max_games}",
        )
    if t.schedule != "adaptive" and stop.top is not None and not bots_to_come:
        # a competition's league (bots to come) keeps it for its final, always adaptive: see league_notes
        fail(
            ("stop",),
            "top",
            f'only an adaptive league settles its first ranks (schedule = "adaptive"); this one plays '
            f"its {t.schedule} schedule to the end (max_games may cap it)",
        )
    if t.schedule != "adaptive" and stop.extended_from:
        fail(("stop",), "extended_from", 'only an adaptive league is extended (schedule = "adaptive")')
    try:
        league.rules.validate(t.table_size)
    except ValueError as e:
        fail(("rules",), None, str(e))
    for key, message in check_limits(league.containers):
        fail(("containers",), key, message)
    if not league.bots and not bots_to_come:
        fail((), None, "no bots: add [[bots]] tables with a name and a url, command, image or builtin")
    seen: dict[str, int] = {}
    for i, b in enumerate(league.bots):
        where: tuple[str | int, ...] = ("bots", i)
        if not b.name.strip():
            fail(where, "name", "must not be empty")
        if b.name in seen:
            fail(where, "name", f"duplicate bot name {b.name!r} (also [[bots]] #{seen[b.name] + 1})")
        seen[b.name] = i
        if b.builtin is not None:
            if b.builtin not in BUILTIN_BOTS:
                fail(
                    where,
                    "builtin",
                    f"{b.builtin!r} is not a built-in house bot: expected one of "
                    f"{', '.join(repr(k) for k in BUILTIN_BOTS)}",
                )
            if not is_builtin(b):  # as written in a file: nothing but its name (and fresh_process)
                for key in ("url", "command", "image", "cwd", "secret", "limits", "address"):
                    if getattr(b, key) is not None:
                        fail(
                            where, key, f"a built-in house bot ({b.builtin!r}) is the referee's own: no {key}"
                        )
                if b.env:
                    fail(where, "env", f"a built-in house bot ({b.builtin!r}) is the referee's own: no env")
            continue
        given = [k for k in ("url", "command", "image") if getattr(b, k) is not None]
        if b.image is not None and given == ["command", "image"]:
            given = ["image"]  # the command run in the container
        if len(given) != 1:
            fail(
                where,
                None,
                f"bot {b.name!r} needs exactly one of url, command, image, builtin"
                + (f" (got {', '.join(given)})" if given else ""),
            )
        if b.url is not None and not re.match(r"^(https?://[^/\s]+|unix:/\S+)", b.url):
            fail(where, "url", f"expected http://host:port or unix:/path, got {b.url!r}")
        if b.image is not None:
            if not b.image.strip():
                fail(where, "image", "must not be empty")
            if b.command is not None and any("{port}" in part for part in b.command):
                fail(
                    where,
                    "command",
                    "a container bot has no port: it listens on the unix socket {unix} (also in $BOT_UNIX)",
                )
            if b.cwd is not None:
                fail(where, "cwd", "is for command bots (an image brings its own files)")
            for key, message in check_limits(league.limits_for(b)):
                fail((*where, "limits"), key, message)
        elif b.limits is not None:
            fail(where, "limits", "are for image bots (a command bot is not confined)")
        if b.command is not None and b.image is None:
            if not b.command:
                fail(where, "command", "must not be empty")
            if not any("{port}" in part for part in b.command):
                fail(where, "command", "must contain {port}: the referee picks the port")
    if len(league.bots) < t.table_size and not bots_to_come:
        fail(
            ("tournament",), "table_size", f"{t.table_size} seats per table but only {len(league.bots)} bots"
        )
    if t.schedule == "round-robin" and 2 <= t.table_size <= len(league.bots):
        games = math.comb(len(league.bots), t.table_size) * t.table_size * t.rounds
        if games >= ROUND_ROBIN_LIMIT:
            key = "schedule" if (("tournament",), "schedule") in lines.keys else "table_size"
            times = f" x {t.rounds} rounds" if t.rounds > 1 else ""
            fail(
                ("tournament",),
                key,
                f"round-robin of {len(league.bots)} bots at {t.table_size}-seat tables{times} is "
                f'{games:,} games; use schedule = "balanced" or "adaptive"',
            )


def league_notes(league: League) -> list[str]:
    """What a competition's league file holds that has no meaning somewhere
    the service plays it (accepted, and said on creation and on every edit)."""
    t, stop = league.tournament, league.stop
    notes = []
    if stop.max_games is not None:
        notes.append(
            f"[stop] max_games = {stop.max_games} is the game budget of the final and of a run started by "
            "hand; the ladder has none (it plays while the competition is open)"
        )
    if stop.top is not None and t.schedule != "adaptive":
        notes.append(
            f"[stop] top = {stop.top} counts in the final (always adaptive) only; a run started by hand "
            f'plays its {t.schedule} schedule (schedule = "adaptive" to settle the first ranks there too)'
        )
    return notes


# ------------------------------------------------- error positions in TOML


class TomlLines:
    """Where each table and key of a TOML text starts (1-based lines).

    tomllib keeps no positions, so this reads the text once more, line by
    line: table headers (``[a.b]``, ``[[bots]]``) and ``key = value`` lines.
    Good enough to point at the line of an error in a hand-written file.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'.]+)\s*=")

    def __init__(self, text: str) -> None:
        self.tables: dict[tuple[str | int, ...], int] = {(): 1}
        self.keys: dict[tuple[tuple[str | int, ...], str], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        current: tuple[str | int, ...] = ()
        for no, line in enumerate(text.splitlines(), 1):
            m = self._HEADER.match(line)
            if m:
                names = tuple(part.strip().strip("\"'") for part in m.group(2).split("."))
                if m.group(1) == "[[":
                    k = counts.get(names, 0)
                    counts[names] = k + 1
                    current = (*names, k)
                else:
                    # A sub-table of the last element of an array of tables.
                    parent = names[:-1]
                    if parent and parent in counts:
                        current = (*parent, counts[parent] - 1, names[-1])
                    else:
                        current = names
                self.tables.setdefault(current, no)
                continue
            m = self._KEY.match(line)
            if m:
                parts = [p.strip("\"'") for p in m.group(1).split(".")]
                where = current + tuple(parts[:-1])
                self.keys.setdefault((where, parts[-1]), no)

    def line_of(self, where: tuple[str | int, ...], key: str | None = None) -> int:
        if key is not None and (where, key) in self.keys:
            return self.keys[(where, key)]
        while where:
            if where in self.tables:
                return self.tables[where]
            if len(where) >= 1 and where[:-1] and (where[:-1], str(where[-1])) in self.keys:
                return self.keys[(where[:-1], str(where[-1]))]
            where = where[:-1]
        return 1


def _describe(where: tuple[str | int, ...], key: str | None = None) -> str:
    """The prefix of a message about ``key`` of table ``where``:
    ``[rules] 'turn_limit': `` or ``[[bots]] #2: ``."""
    if len(where) >= 2 and where[0] == "bots" and isinstance(where[1], int):
        rest = ".".join(str(w) for w in where[2:])
        table = f"[[bots]] #{where[1] + 1}" + (f" {rest}" if rest else "")
    elif where:
        table = f"[{'.'.join(str(w) for w in where)}]"
    else:
        table = ""
    if key is not None:
        return f"{table} '{key}': " if table else f"'{key}': "
    return f"{table}: " if table.startswith("[[") else (f"{table} " if table else "")


_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def _split_validation(message: str) -> tuple[tuple[str | int, ...], str | None, str]:
    """msgspec's ``Expected `int`, got `str` - at `$.bots[1].url``` -> path parts."""
    m = _PATH_RE.search(message)
    if not m:
        return (), None, message
    text = message[: m.start()]
    parts: list[str | int] = []
    for name, index in re.findall(r"\.([A-Za-z0-9_]+)|\[(\d+)\]", m.group("path")):
        parts.append(name if name else int(index))
    missing = re.match(r"Object missing required field `(\w+)`", text)
    if missing:
        return tuple(parts), missing.group(1), "is required"
    text = re.sub(r"Expected `([^`]+)`", lambda g: f"expected {_words(g.group(1))}", text)
    text = re.sub(r", got `([^`]+)`", lambda g: f", got {_words(g.group(1))}", text)
    key = parts[-1] if parts and isinstance(parts[-1], str) else None
    where = tuple(parts[:-1]) if key is not None else tuple(parts)
    return where, key, text


def _words(types: str) -> str:
    """msgspec's ``str | null`` -> ``a string``."""
    parts = [t.strip() for t in types.split("|") if t.strip() != "null"]
    return " or ".join(_TYPE_WORDS.get(p, p) for p in parts) or "nothing"


_TYPE_WORDS = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "array": "a list",
    "object": "a table",
    "null": "nothing",
}
