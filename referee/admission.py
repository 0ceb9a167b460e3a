"""The admission check: what a submitted bot must pass before it may play (issue 14).

Kaggle plays a validation episode on every submission; ours runs, in the
bot's own sandbox (its container, or its pinned URL), everything
``referee check`` does (handshake, ``/start``, the scripted positions,
unknown fields, timing, the signature, ``/end``) and then a few validation
games against a house bot, with the league's rules and timeouts. The report
is one PASS/FAIL line per check with the fix, for the team's own page: it
may quote what the bot answered, so it is never shown on a public page.

A bot passes when every line passes: in the validation games, no fault of
any kind (an illegal move, a timeout, a bad reply, a crash). The house bot
is the ``greedy`` sample bot, run by this interpreter.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from protocol.messages import Rules, Timeouts

from .bots.base import Bot, BotError
from .bots.container import ContainerLimits
from .bots.factory import BotFactory, BotSpec
from .bots.process import tail_of
from .check import CheckLine, run_checks
from .match import play_match
from .record import FaultPolicy

__all__ = ["AdmissionLine", "AdmissionReport", "HOUSE_BOT", "admit"]

#: The validation games' opponent (its name in the report).
HOUSE_BOT = BotSpec(name="house-greedy",
                    command=[sys.executable, "-m", "sample_bots.greedy", "--port", "{port}"])

#: Validation games: two deals, both seatings.
VALIDATION_GAMES = 4

#: Longest quote of a bot's own log in a FAIL line.
LOG_TAIL = 2000


class AdmissionLine(msgspec.Struct, kw_only=True):
    """One line of the report: PASS or FAIL, what was checked, what happened, the fix."""

    ok: bool
    what: str
    detail: str
    fix: str = ""

    def render(self) -> str:
        return CheckLine(self.ok, self.what, self.detail, self.fix).render()


class AdmissionReport(msgspec.Struct, kw_only=True):
    ok: bool
    lines: list[AdmissionLine]
    #: Validation games played (0 when the checks failed first).
    games: int = 0
    seconds: float = 0.0

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


def _line(c: CheckLine) -> AdmissionLine:
    return AdmissionLine(ok=c.ok, what=c.what, detail=c.detail, fix=c.fix)


def _log_of(bot: Bot) -> Path | None:
    path = getattr(bot, "log_path", None)
    return path if isinstance(path, Path) else None


async def admit(
    spec: BotSpec,
    *,
    out_dir: Path,
    rules: Rules | None = None,
    timeouts: Timeouts | None = None,
    limits: ContainerLimits | None = None,
    games: int = VALIDATION_GAMES,
    house: BotSpec = HOUSE_BOT,
    seed: int = 1,
) -> AdmissionReport:
    """Check the bot `spec` (a URL bot, pinned to its address, or an image
    bot, run in its sandbox) and play `games` validation games against
    `house`. Never raises for what the bot does: every failure is a line."""
    began = time.perf_counter()
    timeouts = timeouts or Timeouts()
    out_dir.mkdir(parents=True, exist_ok=True)
    factory = BotFactory(log_dir=out_dir / "logs", out_dir=out_dir, limits=limits,
                         labels={"referee.purpose": "admission"})
    lines: list[AdmissionLine] = []
    bot = factory.make(spec)
    played = 0
    try:
        url = spec.url
        if spec.started_here:
            try:
                for name in await factory.prepare(spec):
                    lines.append(AdmissionLine(ok=True, what="clean-up", detail=f"removed old container {name}"))
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
                lines.append(AdmissionLine(ok=False, what="start", detail=detail,
                                           fix="run the bot on your machine and read its errors: it must "
                                               "serve HTTP on $BOT_UNIX (the SDK's run_bot does)"))
                return _report(lines, played, began)
            lines.append(AdmissionLine(ok=True, what="start", detail=f"answered GET / {took:.0f} ms after starting"))
            url = endpoint.url
        assert url is not None
        address = spec.address if not spec.started_here else None
        checks = await run_checks(url, secret=spec.secret, timeouts=timeouts, address=address)
        lines += [_line(c) for c in checks]
        if not all(line.ok for line in lines):
            return _report(lines, played, began)
        played = await _validation_games(bot, spec, factory, house, rules or Rules(), timeouts, games, seed,
                                         lines)
    except Exception as e:  # noqa: BLE001 - a hostile bot must never break the service's check
        lines.append(AdmissionLine(ok=False, what="check", detail=f"the check could not finish: {e!r}",
                                   fix="look at your bot's log; if it seems right, tell the organiser"))
    finally:
        await bot.close()
    return _report(lines, played, began)


def _report(lines: list[AdmissionLine], games: int, began: float) -> AdmissionReport:
    return AdmissionReport(ok=bool(lines) and all(x.ok for x in lines), lines=lines, games=games,
                           seconds=round(time.perf_counter() - began, 2))


async def _validation_games(bot: Bot, spec: BotSpec, factory: BotFactory, house_spec: BotSpec, rules: Rules,
                            timeouts: Timeouts, games: int, seed: int, lines: list[AdmissionLine]) -> int:
    house = factory.make(house_spec)
    played = 0
    faults: list[str] = []
    try:
        await house.handshake()
        for g in range(games):
            team_seat = g % 2
            seats: Sequence[Bot] = [bot, house] if team_seat == 0 else [house, bot]
            names = [spec.name, house_spec.name] if team_seat == 0 else [house_spec.name, spec.name]
            result = await asyncio.wait_for(
                play_match(seats, seed + g // 2, rules=rules, timeouts=timeouts, policy=FaultPolicy(),
                           names=names, game_id=f"admission-{g + 1}"),
                timeout=max(120.0, 400 * (timeouts.move_ms / 1000 + 0.05)))
            played += 1
            for f in result.faults[team_seat]:
                faults.append(f"game {g + 1}, turn {f.turn}: {f.kind}: {f.detail}")
    finally:
        await house.close()
    if faults:
        shown = "; ".join(faults[:3]) + (f"; and {len(faults) - 3} more" if len(faults) > 3 else "")
        lines.append(AdmissionLine(
            ok=False, what=f"validation games against {house_spec.name}",
            detail=f"{len(faults)} fault(s) in {played} games: {shown}",
            fix="every reply must be legal and in time in real games too: replay the game "
                "(referee replay) and look at the turn named"))
    else:
        lines.append(AdmissionLine(ok=True, what=f"validation games against {house_spec.name}",
                                   detail=f"{played} games, no fault"))
    return played
