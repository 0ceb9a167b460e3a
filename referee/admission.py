"""The admission check: what a submitted bot must pass before it may play (issue 14).

Kaggle plays a validation episode on every submission; ours runs, in the
bot's own sandbox (its container, or its pinned URL), everything
``referee check`` does (handshake, ``/start``, the scripted positions,
unknown fields, timing, the signature, ``/end``) and then a few validation
games against a house bot, with the league's rules and timeouts. The report
is one PASS/FAIL line per check with the fix, for the team's own page: it
may quote what the bot answered, so it is never shown on a public page.

A bot passes when every line passes: in the validation games, no fault of
any kind (an illegal move, a timeout, a bad reply, a crash), and the whole
check within its time budget (issue 24: a legal bot slow in every move would
hold the service's admission worker for minutes). The house bot is the
``greedy`` sample bot, run by this interpreter.

Admission games cannot be told from the competition's games (issue 24: a bot
slow or careful only in games whose id said ``admission-`` passed its check
and played otherwise): the same opaque game ids (:class:`referee.match.Match`
makes them), the bot's seat name as the competition's games name it, the
opponents' names drawn from the names its real tables could seat (the house
bot plays them all), secret random deals rotated through the seats like the
league's duplicate deals, the league's table size, rules, timeouts and fault
policy. The compliance check's ``/start`` and request ids follow the same
scheme; only its scripted positions (and its one request with unknown
fields) are, by their nature, recognisable.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from protocol.messages import Rules, Timeouts

from .bots.base import Bot, BotError
from .bots.factory import BotFactory, BotSpec
from .bots.house import builtin_spec
from .bots.images.first_error import first_error, missing_module_fix
from .bots.process import tail_of
from .bots.sandbox.container import ContainerLimits
from .bots.sandbox.instance import Instance
from .check import CheckLine, OutputProbe, run_checks
from .match import Match
from .record import FaultPolicy
from .replay import write as write_replay

if TYPE_CHECKING:
    from .tournament.league import League

__all__ = [
    "CHECK_BUDGET_S",
    "AdmissionLine",
    "AdmissionReport",
    "AdmissionSettings",
    "GAMES_DIR",
    "HOUSE_BOT",
    "ValidationGame",
    "admit",
]

#: The check folder's sub-folder of the validation games' replays.
GAMES_DIR = "games"

#: The validation games' opponent (its name in the report): the built-in greedy house bot.
HOUSE_BOT = builtin_spec("greedy")

#: Validation games: two deals, both seatings.
VALIDATION_GAMES = 4

#: The longest check, in all, by default (``referee serve --check-budget``).
CHECK_BUDGET_S = 120.0

#: The time budget's line in the report (its reason starts with it).
BUDGET_WHAT = "time budget"

#: Longest quote of a bot's own log in a FAIL line.
LOG_TAIL = 2000


#: One line of the report: the compliance check's own line type
#: (:class:`referee.check.CheckLine`), for the check's lines and its own.
AdmissionLine = CheckLine


class AdmissionSettings(msgspec.Struct, kw_only=True, frozen=True):
    """What a check plays with: a competition's league (its rules, timeouts,
    fault policy, table size and duplicate deals) and the service's number of
    validation games and time budget. The service's admission check and
    ``referee check`` both take it (:meth:`of_league`); the service serves a
    competition's to its teams (``GET /api/competitions/{cid}/admission``), so a
    local check plays the games the service would."""

    rules: Rules = msgspec.field(default_factory=Rules)
    timeouts: Timeouts = msgspec.field(default_factory=Timeouts)
    faults: FaultPolicy = msgspec.field(default_factory=FaultPolicy)
    table_size: int = 2
    duplicate: bool = True
    games: int = VALIDATION_GAMES
    #: The longest check, in seconds, in all (None: no limit).
    budget_s: float | None = None

    @classmethod
    def of_league(
        cls, league: League, *, games: int = VALIDATION_GAMES, budget_s: float | None = CHECK_BUDGET_S
    ) -> AdmissionSettings:
        """The check a competition with `league` plays (the service's `games` and `budget_s`)."""
        return cls(
            rules=league.rules,
            timeouts=league.timeouts,
            faults=league.faults,
            table_size=league.tournament.table_size,
            duplicate=league.tournament.duplicate,
            games=games,
            budget_s=budget_s,
        )


class ValidationGame(msgspec.Struct, kw_only=True):
    """A validation game of the check, kept (issue 26): its replay under the
    check's folder, the team's seat, its place and faults there."""

    #: 1, 2, ... in the order played.
    number: int
    game_id: str
    seat: int
    names: list[str]
    place: int
    faults: int
    #: The replay file, relative to the check's folder.
    replay: str
    #: The bot that really played every other seat (under the names in
    #: `names`: the bots the team's could meet); "" in reports from before.
    house: str = ""


class AdmissionReport(msgspec.Struct, kw_only=True):
    ok: bool
    lines: list[AdmissionLine]
    #: Validation games played (0 when the checks failed first).
    games: int = 0
    seconds: float = 0.0
    #: The validation games played, with their replays (issue 26).
    validation: list[ValidationGame] = msgspec.field(default_factory=list)
    #: The bot's own output files, relative to the check's folder (a
    #: container's log, a command's stdout and stderr; none for a URL bot).
    output: list[str] = msgspec.field(default_factory=list)

    def render(self) -> str:
        return "\n".join(line.render() for line in self.lines)

    @property
    def reason(self) -> str | None:
        """The first failing line, one line: why the bot was refused."""
        for line in self.lines:
            if not line.ok:
                first = line.detail.splitlines()[0] if line.detail else ""
                return f"{line.what}: {first}"
        return None


def _log_of(bot: Bot) -> Path | None:
    path = getattr(bot, "log_path", None)
    return path if isinstance(path, Path) else None


def output_files(bot: Bot) -> list[Path]:
    """The bot's own output files: a container's log, or a command's stdout
    and stderr (a URL bot's output is on its own machine: none)."""
    log = _log_of(bot)
    if log is not None:
        return [log]
    paths = [getattr(bot, "stdout_path", None), getattr(bot, "stderr_path", None)]
    return [p for p in paths if isinstance(p, Path)]


class _Pace:
    """The bot's own reply times so far (ms), for the time budget's reason:
    the compliance check's and each validation game's lists, read live."""

    def __init__(self) -> None:
        self.lists: list[list[float]] = []

    def track(self, values: list[float]) -> list[float]:
        self.lists.append(values)
        return values

    def figures(self) -> tuple[int, float, float]:
        """(replies, total ms, slowest ms)."""
        values = [v for vs in self.lists for v in vs]
        return len(values), sum(values), max(values, default=0.0)


async def admit(
    spec: BotSpec,
    *,
    out_dir: Path,
    settings: AdmissionSettings | None = None,
    limits: ContainerLimits | None = None,
    house: BotSpec = HOUSE_BOT,
    seed: int | None = None,
    seat_name: str | None = None,
    opponents: Sequence[str] = (),
    instance: Instance | None = None,
) -> AdmissionReport:
    """Check the bot `spec` (a URL bot, pinned to its address, an image bot,
    run in its sandbox, or a command bot, started here by ``referee check``)
    and play ``settings.games`` validation games against `house`, with the
    league's rules, timeouts, fault policy and table of `settings`. Never
    raises for what the bot does: every failure is a line.

    `seat_name`: the bot's name at its tables (default ``spec.name``);
    `opponents`: the names its real tables could seat beside it, drawn for
    the house bot's seats (default: the house bot's name). Deals are secret
    and random unless a `seed` is given. Over ``settings.budget_s`` seconds in
    all the check stops and the bot is refused, with its own figures
    (replies, time a move). `instance`: the install whose names and labels
    the check's containers carry (default: the process's)."""
    began = time.perf_counter()
    settings = settings or AdmissionSettings()
    timeouts = settings.timeouts
    games, budget_s = settings.games, settings.budget_s
    out_dir.mkdir(parents=True, exist_ok=True)
    factory = BotFactory(
        log_dir=out_dir / "logs",
        out_dir=out_dir,
        limits=limits,
        labels={"referee.purpose": "admission"},
        instance=instance,
    )
    lines: list[AdmissionLine] = []
    bot = factory.make(spec)
    own = seat_name or spec.name
    table = _Table(
        own,
        list(opponents) or [house.name],
        max(2, settings.table_size),
        settings.duplicate,
        random.SystemRandom() if seed is None else random.Random(seed),
        spare=house.name,
    )
    pace = _Pace()
    played = [0]
    kept: list[ValidationGame] = []
    try:
        async with asyncio.timeout(budget_s):
            await _check(
                bot,
                spec,
                factory,
                house,
                settings.rules,
                timeouts,
                settings.faults,
                games,
                table,
                pace,
                played,
                lines,
                kept,
            )
    except TimeoutError:
        assert budget_s is not None
        lines.append(_over_budget(budget_s, pace, played[0], games, timeouts))
    finally:
        await bot.close()
    report = _report(lines, played[0], began)
    report.validation = kept
    root = out_dir.resolve()
    for path in output_files(bot) if spec.started_here else []:
        with contextlib.suppress(ValueError):
            report.output.append(str(path.resolve().relative_to(root)))
    return report


async def _check(
    bot: Bot,
    spec: BotSpec,
    factory: BotFactory,
    house: BotSpec,
    rules: Rules,
    timeouts: Timeouts,
    policy: FaultPolicy,
    games: int,
    table: _Table,
    pace: _Pace,
    played: list[int],
    lines: list[AdmissionLine],
    kept: list[ValidationGame],
) -> None:
    """The check's steps, appending their lines (cut by the time budget)."""
    try:
        url = spec.url
        if spec.started_here:
            try:
                for name in await factory.prepare(spec):
                    lines.append(
                        AdmissionLine(ok=True, what="clean-up", detail=f"removed old container {name}")
                    )
                t0 = time.perf_counter()
                endpoint = await bot.endpoint()
                took = (time.perf_counter() - t0) * 1000
            except BotError as e:
                path = _log_of(bot)
                log = tail_of(path, LOG_TAIL) if path is not None else ""
                detail = str(e)
                if log and log not in detail:
                    detail += f"\n--- the bot's output ---\n{log}"
                if path is not None:  # the team need not see the server's folders
                    detail = detail.replace(str(path), path.name)
                fix = (
                    "run the command by hand and read its errors"
                    if spec.image is None  # a command bot, started by referee check on its author's machine
                    else "run the bot on your machine and read its errors: it must "
                    "serve HTTP on $BOT_UNIX (the SDK's run_bot does)"
                )
                found = first_error(detail)  # issue 35: the first line points at the line
                if found is not None:
                    detail = f"{found}\n{detail}"
                    if found.module is not None:
                        fix = missing_module_fix(found)
                lines.append(AdmissionLine(ok=False, what="start", detail=detail, fix=fix))
                return
            # where a command bot answers is on its author's machine; a container's socket is the server's
            at = f" at {endpoint.url}" if spec.image is None else ""
            lines.append(
                AdmissionLine(
                    ok=True, what="start", detail=f"answered GET /{at} {took:.0f} ms after starting"
                )
            )
            url = endpoint.url
        assert url is not None
        address = spec.address if not spec.started_here else None
        checks = await run_checks(
            url,
            secret=spec.secret,
            timeouts=timeouts,
            address=address,
            rules=rules,
            players=table.pair(),
            latencies=pace.track([]),
            output=OutputProbe(output_files(bot)) if spec.started_here else None,
        )
        lines += checks
        if not all(line.ok for line in lines):
            return
        await _validation_games(
            bot, factory, house, rules, timeouts, policy, games, table, pace, played, lines, kept
        )
    except Exception as e:  # noqa: BLE001 - a hostile bot must never break the service's check
        lines.append(
            AdmissionLine(
                ok=False,
                what="check",
                detail=f"the check could not finish: {e!r}",
                fix="look at your bot's log; if it seems right, tell the organiser",
            )
        )


def _over_budget(budget_s: float, pace: _Pace, played: int, games: int, timeouts: Timeouts) -> AdmissionLine:
    """The line of a check stopped by its time budget, with the bot's own figures."""
    replies, total_ms, slowest_ms = pace.figures()
    mean_ms = total_ms / replies if replies else 0.0
    detail = (
        f"too slow in total: the check was stopped at its budget of {budget_s:g} s, after {replies} "
        f"moves of your bot taking {total_ms / 1000:.1f} s, {mean_ms:.0f} ms a move on average "
        f"(slowest {slowest_ms:.0f} ms); {played} of {games} validation games finished"
    )
    if total_ms < 500 * budget_s:
        # Most of the time went elsewhere (starting the bot, the house bot, a busy server).
        fix = (
            "most of the time was not spent waiting for your bot's moves: if its start-up is slow, make it "
            "faster; else submit again, and if it happens again tell the organiser"
        )
    else:
        fix = (
            f"answer faster: the league's {timeouts.move_ms} ms is the limit of one move, but the whole check "
            f"(the scripted positions and {games} games) must finish within {budget_s:g} s"
        )
    return AdmissionLine(ok=False, what=BUDGET_WHAT, detail=detail, fix=fix)


def _report(lines: list[AdmissionLine], games: int, began: float) -> AdmissionReport:
    return AdmissionReport(
        ok=bool(lines) and all(x.ok for x in lines),
        lines=lines,
        games=games,
        seconds=round(time.perf_counter() - began, 2),
    )


class _Table:
    """The validation games' tables, seated as the league's are: `size`
    seats, the bot's name and opponents' names drawn from `opponents` for
    each deal, a secret deal seed, and with `duplicate` each deal played once
    per seat rotation (like the ladder's ``table[(seat + rotation) % size]``)."""

    def __init__(
        self, own: str, opponents: list[str], size: int, duplicate: bool, rng: random.Random, spare: str
    ) -> None:
        self.own = own
        self.opponents = [n for n in dict.fromkeys(opponents) if n != own]
        self.spare = spare
        self.size = size
        self.rotations = size if duplicate else 1
        self.rng = rng
        self._deal: tuple[int, list[str]] | None = None

    def _draw(self) -> list[str]:
        need = self.size - 1
        names = self.rng.sample(self.opponents, min(need, len(self.opponents)))
        # Fewer names than seats: no real table can be played yet, any names do.
        spare = (f"{self.spare} {i}" for i in range(2, 2 + need))
        names += [n for n in spare if n not in names and n != self.own][: need - len(names)]
        seated = [self.own, *names]
        self.rng.shuffle(seated)
        return seated

    def pair(self) -> list[str]:
        """The compliance check's two names (its positions have two seats), the bot's first."""
        return [self.own, self.rng.choice(self.opponents) if self.opponents else self.spare]

    def names(self, game: int) -> tuple[list[str], int]:
        """Game `game`'s names by seat and its deal seed."""
        if self._deal is None or game % self.rotations == 0:
            self._deal = (self.rng.randrange(1, 1 << 62), self._draw())
        seed, seated = self._deal
        rotation = game % self.rotations
        return [seated[(s + rotation) % self.size] for s in range(self.size)], seed


async def _validation_games(
    bot: Bot,
    factory: BotFactory,
    house_spec: BotSpec,
    rules: Rules,
    timeouts: Timeouts,
    policy: FaultPolicy,
    games: int,
    table: _Table,
    pace: _Pace,
    played: list[int],
    lines: list[AdmissionLine],
    kept: list[ValidationGame],
) -> None:
    house = factory.make(house_spec)
    folder = factory.out_dir / GAMES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    faults: list[str] = []
    try:
        await house.handshake()
        for g in range(games):
            names, deal_seed = table.names(g)
            team_seat = names.index(table.own)
            seats: Sequence[Bot] = [bot if n == table.own else house for n in names]
            match = Match(seats, deal_seed, rules=rules, timeouts=timeouts, policy=policy, names=names)
            pace.track(match.latencies[team_seat])
            result = await asyncio.wait_for(
                match.play(), timeout=max(120.0, 400 * (timeouts.move_ms / 1000 + 0.05))
            )
            played[0] += 1
            name = f"{GAMES_DIR}/{g + 1}.jsonl.gz"
            await asyncio.to_thread(write_replay, match.record, factory.out_dir / name)
            kept.append(
                ValidationGame(
                    number=g + 1,
                    game_id=match.game_id,
                    seat=team_seat,
                    names=names,
                    place=result.places[team_seat],
                    faults=len(result.faults[team_seat]),
                    replay=name,
                    house=house_spec.name,
                )
            )
            for f in result.faults[team_seat]:
                faults.append(f"game {g + 1}, turn {f.turn}: {f.kind}: {f.detail}")
    finally:
        await house.close()
    what = f"validation games against {house_spec.name}"
    others = sorted({n for n in table.opponents if n != house_spec.name})
    # the truth of the players column: its other names are seats, played by the house bot
    seated = (
        f"; {house_spec.name} played every other seat, under the names {', '.join(others)}" if others else ""
    )
    if faults:
        shown = "; ".join(faults[:3]) + (f"; and {len(faults) - 3} more" if len(faults) > 3 else "")
        lines.append(
            AdmissionLine(
                ok=False,
                what=what,
                detail=f"{len(faults)} fault(s) in {played[0]} games{seated}: {shown}",
                fix="every reply must be legal and in time in real games too: replay the game "
                "(referee replay) and look at the turn named",
            )
        )
    else:
        lines.append(AdmissionLine(ok=True, what=what, detail=f"{played[0]} games, no fault{seated}"))
