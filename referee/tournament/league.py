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
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from protocol.messages import Rules, Timeouts

from ..bots.container_limits import ContainerLimits, check_limits
from ..bots.factory import BotSpec
from ..config import MAX_NESTING, TOO_DEEP, find_unknown_key, nesting, too_deep
from ..record import FaultPolicy


class LeagueError(ValueError):
    """A league file that cannot be used; the message names file, line, key."""


class Tournament(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
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

#: A round-robin of this many games or more is refused at load time.
ROUND_ROBIN_LIMIT = 1_000_000


class Stop(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """When an adaptive league ends: every adjacent pair of the standings (or
    of the first `top` ranks) ordered at `confidence`, or `max_games` played."""

    #: The probability that each bot is truly above the next one, for the
    #: order to count as settled (also what the standings call separated).
    confidence: float = 0.95
    #: Settle the first `top` ranks only (each of them and the next bot).
    top: int | None = None
    #: The most games the league plays (default: 20 x bots x table_size).
    max_games: int | None = None

    def game_limit(self, bots: int, table_size: int) -> int:
        """`max_games`, or its default for a league of `bots` bots."""
        return self.max_games if self.max_games is not None else 20 * bots * table_size


#: The values of ``[ladder] ratings``.
LADDER_RATINGS = ("fresh", "inherit")
#: Who fills a ladder's empty seats (``[ladder] fill``).
LADDER_FILLS = ("greedy", "none")


class Ladder(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
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
    #: "greedy", the built-in greedy sample bot (house bots named
    #: ``house-greedy-1``...), or "none" (the ladder waits for players).
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
    tournament: Tournament = msgspec.field(default_factory=Tournament)
    #: The classroom service's deadlines (ignored by ``referee tournament``).
    competition: CompetitionTimes = msgspec.field(default_factory=CompetitionTimes)
    #: The classroom service's ladder (ignored by ``referee tournament``).
    ladder: Ladder = msgspec.field(default_factory=Ladder)
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


# ------------------------------------------------------------------ loading


#: The most dots on one line of a league file (a key ``a.b.c``, a URL, an
#: address: a few).
MAX_DOTS = 100


def load_league(path: str | Path) -> League:
    """Read and check a league file; raises :class:`LeagueError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise LeagueError(f"{p}: cannot read the league file: {e.strerror or e}") from None
    return parse_league(text, str(p))


def parse_league(text: str, filename: str = "league.toml", *, bots_to_come: bool = False) -> League:
    """Parse and check a league file's text. `bots_to_come`: more bots join
    later (the classroom service's teams), so having none yet, or fewer than a
    table's seats, is not an error."""
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
    check_league(league, filename, lines, bots_to_come=bots_to_come)
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


def check_league(league: League, filename: str, lines: TomlLines, *, bots_to_come: bool = False) -> None:
    """The checks a type cannot express, each naming its key and line
    (`bots_to_come`: as in :func:`parse_league`)."""

    def fail(where: tuple[str | int, ...], key: str | None, message: str) -> None:
        raise LeagueError(f"{filename}:{lines.line_of(where, key)}: {_describe(where, key)}{message}")

    t = league.tournament
    if not 2 <= t.table_size <= 6:
        fail(("tournament",), "table_size", f"a table seats 2 to 6 players, got {t.table_size}")
    if t.rounds < 1:
        fail(("tournament",), "rounds", f"must be at least 1, got {t.rounds}")
    if t.concurrency < 1:
        fail(("tournament",), "concurrency", f"must be at least 1, got {t.concurrency}")
    if t.schedule not in SCHEDULES:
        fail(
            ("tournament",),
            "schedule",
            f"expected one of {', '.join(repr(s) for s in SCHEDULES)}, got {t.schedule!r}",
        )
    ladder = league.ladder
    if ladder.concurrency is not None and ladder.concurrency < 1:
        fail(("ladder",), "concurrency", f"must be at least 1, got {ladder.concurrency}")
    if ladder.ratings not in LADDER_RATINGS:
        fail(
            ("ladder",),
            "ratings",
            f"expected one of {', '.join(repr(s) for s in LADDER_RATINGS)}, got {ladder.ratings!r}",
        )
    if ladder.catch_up < 0:
        fail(("ladder",), "catch_up", f"must be 0 or more, got {ladder.catch_up}")
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
    if not 0.5 < stop.confidence < 1:
        fail(("stop",), "confidence", f"must be between 0.5 and 1 (both excluded), got {stop.confidence}")
    if stop.top is not None and stop.top < 1:
        fail(("stop",), "top", f"must be at least 1, got {stop.top}")
    if stop.max_games is not None and stop.max_games < t.table_size:
        fail(
            ("stop",),
            "max_games",
            f"must be at least table_size ({t.table_size}): one table's rotations, got {stop.max_games}",
        )
    if t.schedule != "adaptive":
        for key in ("top", "max_games"):
            if getattr(stop, key) is not None:
                fail(
                    ("stop",),
                    key,
                    f'only an adaptive league stops early (schedule = "adaptive"); '
                    f"this one plays its {t.schedule} schedule to the end",
                )
    try:
        league.rules.validate(t.table_size)
    except ValueError as e:
        fail(("rules",), None, str(e))
    for key in ("move_ms", "start_ms", "end_ms"):
        if getattr(league.timeouts, key) <= 0:
            fail(
                ("timeouts",),
                key,
                f"must be a positive number of milliseconds, got {getattr(league.timeouts, key)}",
            )
    if league.timeouts.bank_ms < 0:
        fail(("timeouts",), "bank_ms", f"must be 0 or more, got {league.timeouts.bank_ms}")
    if league.faults.strikes < 1:
        fail(("faults",), "strikes", f"must be at least 1, got {league.faults.strikes}")
    for key, message in check_limits(league.containers):
        fail(("containers",), key, message)
    if not league.bots and not bots_to_come:
        fail((), None, "no bots: add [[bots]] tables with a name and a url, command or image")
    seen: dict[str, int] = {}
    for i, b in enumerate(league.bots):
        where: tuple[str | int, ...] = ("bots", i)
        if not b.name.strip():
            fail(where, "name", "must not be empty")
        if b.name in seen:
            fail(where, "name", f"duplicate bot name {b.name!r} (also [[bots]] #{seen[b.name] + 1})")
        seen[b.name] = i
        given = [k for k in ("url", "command", "image") if getattr(b, k) is not None]
        if b.image is not None and given == ["command", "image"]:
            given = ["image"]  # the command run in the container
        if len(given) != 1:
            fail(
                where,
                None,
                f"bot {b.name!r} needs exactly one of url, command, image"
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
