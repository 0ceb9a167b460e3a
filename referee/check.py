"""``referee check``: a compliance check for bot authors.

Like fastchess's ``--compliance``: the handshake, ``/start``, ``/act`` on
scripted positions (set-up choice, a plain play, a forced pick-up, a 3DOWN
flip, an extra action with a draw, the V6 swap decision), unknown fields,
timing, the signature, ``/end``; one :class:`CheckLine` each, PASS or FAIL with
what to fix.

Its game id and request ids are made as a real game's are (an opaque
``secrets.token_hex(12)``, then ``<game id>.<n>``), and the admission check
gives it the seat names and rules of the competition's games (issue 24): a
bot cannot tell it from a game by those.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from protocol.codec import ENCODER
from protocol.messages import (
    APIVERSION,
    Action,
    ActRequest,
    Fault,
    GameEnd,
    GameStart,
    Play,
    Rules,
    Timeouts,
)
from referee.bots import (
    DEFAULT_MAX_BODY,
    HANDSHAKE_S,
    ActOutcome,
    BotError,
    BotUnreachable,
    Clock,
    HttpBot,
)
from referee.bots.http import INFO_SHAPE
from referee.bots.sandbox.marks import without_marks
from referee.game import ActionError, GameState, layout, new_game, view
from referee.record import latency_stats
from referee.report import describe
from referee.textsafe import for_terminal


class CheckLine(msgspec.Struct):
    """One line of a check's report: PASS or FAIL, what was checked, what
    happened, and the fix for a FAIL. ``referee check`` prints them; the
    admission check (:mod:`referee.admission`) keeps them in its report, as
    its ``AdmissionLine``, in the service's database as JSON."""

    ok: bool
    what: str
    detail: str
    fix: str = ""

    def render(self) -> str:
        """The line as printed; the detail quotes the bot (its name, its
        output), so its control characters are escaped (:func:`for_terminal`)."""
        text = f"{'PASS' if self.ok else 'FAIL'}  {self.what}: {self.detail}"
        if not self.ok and self.fix:
            text += f"\n      fix: {self.fix}"
        return for_terminal(text)


_FIXES = {
    "timeout": "answer within deadline_ms ({ms} ms), round trip included",
    "http_status": "answer POST /act with HTTP 200 and the JSON reply",
    "bad_json": 'reply with JSON {{"request_id": <the request\'s>, "index": <int into legal>}} '
    'or {{"request_id": ..., "action": {{"type": ...}}}}',
    "too_large": f"keep the reply under {DEFAULT_MAX_BODY} bytes",
    "wrong_request_id": "echo the request's request_id in the reply",
    "illegal": "answer with an index into legal, or an action that legal lists "
    "(RULES.md; any colours of the same rank and count are fine)",
    "connection": "keep the server up and answer every request; look at the bot's log",
}


#: The most of the bot's own output quoted in one FAIL line (its end is kept).
OUTPUT_AROUND = 2000


class OutputProbe:
    """The bot's own output files (a container's log, a command's stdout and
    stderr), read around each request: what it printed between the request
    that failed and a moment after its reply is quoted in the FAIL line (its
    traceback, where a bare "answered HTTP 500" says nothing)."""

    def __init__(self, paths: Sequence[Path], settle_s: float = 0.3) -> None:
        self.paths = list(paths)
        #: The wait after a failing reply for the last lines to reach the file
        #: (a container's log is copied by a pump thread).
        self.settle_s = settle_s

    def mark(self) -> list[int]:
        """Where each file ends now."""
        out = []
        for p in self.paths:
            try:
                out.append(os.stat(p).st_size)
            except OSError:
                out.append(0)
        return out

    def since(self, mark: Sequence[int], cap: int = OUTPUT_AROUND) -> str:
        """What was written after `mark`, the files one after the other, the end of it if over `cap`."""
        parts: list[str] = []
        for p, start in zip(self.paths, mark):
            try:
                with p.open("rb") as f:
                    f.seek(start)
                    data = f.read(1 << 20)
            except OSError:
                continue
            text = without_marks(data.decode("utf-8", "replace")).strip("\n")
            if text:
                parts.append(text)
        text = "\n".join(parts)
        return text if len(text) <= cap else "… " + text[-cap:]

    async def around(self, mark: Sequence[int]) -> str:
        await asyncio.sleep(self.settle_s)
        return self.since(mark)


def with_output(detail: str, output: str) -> str:
    """A FAIL line's detail with the bot's own output around the failure."""
    if not output:
        return detail
    return f"{detail}\n--- your bot's output around it ---\n{output}"


class Scenario(NamedTuple):
    name: str
    state: GameState
    seat: int
    note: str


def scenarios(names: Sequence[str] = ("you", "other")) -> list[Scenario]:
    """The scripted positions ``referee check`` asks about, seat 0 (``names[0]``) to move."""
    names = list(names)
    out: list[Scenario] = []
    setup = new_game(Rules(), names, random.Random(1))
    out.append(Scenario("set-up choose_up", setup, 0, "choose 3 of your 6 cards as 3UP"))
    play = layout(
        hands=[["3R", "5G", "9B"], ["2Y", "4O", "6I"]],
        up=[["7G", "8Y", "10V"], ["7R", "8R", "10R"]],
        pile=["4Y"],
        draw=["1R", "2G", "3V", "6B", "9I"],
        names=names,
    )
    out.append(Scenario("plain play", play, 0, "play 5G or 9B on a 4"))
    pickup = layout(
        hands=[["2R", "4G", "4B"], ["2Y", "3O", "6I"]],
        up=[["7G", "8Y", "10V"], ["7R", "8R", "10R"]],
        pile=["5R", "7B"],
        draw=["1R", "2G", "3V"],
        names=names,
    )
    out.append(Scenario("forced pick-up", pickup, 0, "nothing beats a 7: pick up"))
    flip = layout(
        hands=[[], ["2Y", "3O", "6I"]],
        up=[[], ["7R", "8R", "10R"]],
        down=[["5R", None, "C"], ["1B", "1G", "1Y"]],
        pile=["6B"],
        names=names,
        turn=40,
    )
    out.append(Scenario("3DOWN flip", flip, 0, "hand and 3UP are empty: flip slot 0 or 2"))
    extra = layout(
        hands=[["C+1", "4R", "9G"], ["2Y", "3O", "6I"]],
        up=[["7G", "8Y", "10V"], ["7R", "8R", "10R"]],
        pile=["3B"],
        draw=["1R", "2G", "3V", "6B"],
        names=names,
    )
    extra.apply(Play(cards=["C+1"]), 0)
    out.append(Scenario("extra action with a draw option", extra, 0, "after a Clear+1: draw or play"))
    run = layout(
        hands=[["5R", "9G", "3B"], ["2Y", "3O", "6I"]],
        up=[["7Y", "8Y", "10Y"], ["7B", "8B", "10B"]],
        pile=["2R", "3R", "4R"],
        draw=["1V", "2G", "3V", "6B"],
        rules=Rules(colour_run=True),
        names=names,
    )
    run.apply(Play(cards=["5R"]), 0)
    out.append(
        Scenario(
            "V6 colour-run swap",
            run,
            0,
            "4 reds on the pile: swap a hand card with a 3UP card, or pass",
        )
    )
    return out


def _verdict(
    outcome: ActOutcome, legal: Sequence[Action], state: GameState, seat: int, move_ms: int
) -> tuple[bool, str, str]:
    """(ok, what happened, fix) for one /act outcome on a scripted position."""
    fault = outcome.fault
    if fault is not None:
        fix = _FIXES.get(fault.kind, "").format(ms=move_ms)
        if fault.kind == "http_status" and any(f" {code} " in fault.detail for code in (401, 403)):
            fix = "the bot refused the request: if it checks signatures, check with --secret"
        return False, f"{fault.kind}: {fault.detail}", fix
    reply = outcome.reply
    assert reply is not None
    try:
        action = reply.chosen(legal)
    except ValueError as e:
        return False, f"illegal: {e}", _FIXES["illegal"]
    try:
        state.copy().apply(action, seat)
    except ActionError as e:
        return False, f"illegal: {describe(action)}: {e}", _FIXES["illegal"]
    return True, f"{describe(action)} ({_ms(outcome.latency_ms)} ms)", ""


def _act_request(
    state: GameState, seat: int, game_id: str, request_id: str, timeouts: Timeouts
) -> ActRequest:
    return ActRequest(
        apiversion=APIVERSION,
        game_id=game_id,
        request_id=request_id,
        seat=seat,
        turn=state.turn,
        deadline_ms=timeouts.move_ms,
        bank_ms=Clock(timeouts).move().bank_ms,  # a whole bank, as in a game's first move
        state=view(state, seat, 0),
        legal=state.legal_actions(seat),
    )


async def run_checks(
    url: str,
    *,
    secret: str | None = None,
    timeouts: Timeouts | None = None,
    address: str | None = None,
    rules: Rules | None = None,
    players: Sequence[str] = ("you", "other"),
    latencies: list[float] | None = None,
    output: OutputProbe | None = None,
) -> list[CheckLine]:
    """Run the compliance checks against the bot at `url` (connecting to
    `address` when it is pinned: see :mod:`referee.bots.netpolicy`); one line per check.

    `rules` are announced in ``/start`` (the scripted positions are what they
    are); `players`: the two seats' names, the bot's first; `latencies`
    collects the bot's /act times as they come (ms); `output`: the bot's own
    output files, quoted around each failing ``/start``, ``/act`` or ``/end``."""
    timeouts = timeouts if timeouts is not None else Timeouts()
    clock = Clock(timeouts)  # no bank here: every reply gets the move time
    move_s = clock.move().limit_s
    lines: list[CheckLine] = []
    game_id = secrets.token_hex(12)  # as referee.match.Match makes them
    latencies = latencies if latencies is not None else []
    numbers = itertools.count(1)
    async with HttpBot(url, secret=secret, address=address) as bot:
        # GET /
        try:
            info = await bot.handshake(HANDSHAKE_S)
        except BotUnreachable as e:
            lines.append(CheckLine(False, "GET /", str(e), "start the bot, and check the URL"))
            return lines
        except BotError as e:
            fix = f"serve GET / with 200 and {INFO_SHAPE}"
            lines.append(CheckLine(False, "GET /", str(e), fix))
            return lines
        who = f"{info.name!r} {info.version} by {info.author or '?'}, protocol {info.apiversion}"
        lines.append(CheckLine(True, "GET /", who))

        # POST /start
        start = GameStart(
            apiversion=APIVERSION,
            game_id=game_id,
            seat=0,
            players=list(players),
            rules=rules if rules is not None else Rules(),
            timeouts=timeouts,
        )
        mark = output.mark() if output is not None else []
        lines.append(
            await _quoted(
                _notified("/start", await bot.start(start, clock.start_s), timeouts.start_ms), output, mark
            )
        )

        # POST /act on scripted positions
        positions = scenarios(players)
        for scenario in positions:
            state, seat = scenario.state, scenario.seat
            request = _act_request(state, seat, game_id, f"{game_id}.{next(numbers)}", timeouts)
            mark = output.mark() if output is not None else []
            outcome = await bot.act(request, move_s)
            latencies.append(outcome.latency_ms)
            ok, what, fix = _verdict(outcome, request.legal, state, seat, timeouts.move_ms)
            if not ok:
                what = f"{what} [{scenario.note}]"
            lines.append(await _quoted(CheckLine(ok, f"/act {scenario.name}", what, fix), output, mark))

        # Forward compatibility: fields and event types the project may add.
        plain = positions[1]
        request = _act_request(plain.state, 0, game_id, f"{game_id}.{next(numbers)}", timeouts)
        raw: dict[str, Any] = msgspec.to_builtins(request)
        raw["future_field"] = {"added": "later"}
        raw["state"]["future_field"] = [1, 2, 3]
        raw["state"]["events"].append({"seq": 999, "seat": 1, "type": "future", "extra": True})
        mark = output.mark() if output is not None else []
        outcome = await bot.act_bytes(ENCODER.encode(raw), request.request_id, request.turn, move_s)
        latencies.append(outcome.latency_ms)
        ok, what, fix = _verdict(outcome, request.legal, plain.state, 0, timeouts.move_ms)
        plain_ok = any(line.ok for line in lines if line.what == "/act plain play")
        if plain_ok:
            fix = "ignore fields and event types you do not know: the protocol may add them (PROTOCOL.md)"
        lines.append(
            await _quoted(
                CheckLine(
                    ok,
                    "/act with unknown fields and event types",
                    f"ignored them ({_ms(outcome.latency_ms)} ms)" if ok else what,
                    fix,
                ),
                output,
                mark,
            )
        )

        # Timing
        stats = latency_stats(latencies)
        lines.append(
            CheckLine(
                stats.max_ms <= timeouts.move_ms,
                "latency",
                f"{stats.count} /act replies: p50 {_ms(stats.p50_ms)} ms, "
                f"p95 {_ms(stats.p95_ms)} ms, max {_ms(stats.max_ms)} ms "
                f"(deadline {timeouts.move_ms} ms)",
                f"answer within deadline_ms ({timeouts.move_ms} ms), round trip included",
            )
        )

        # A forged signature must be refused.
        if secret is not None:
            async with HttpBot(url, secret="not-" + secret, address=address) as impostor:
                forged = _act_request(plain.state, 0, game_id, f"{game_id}.{next(numbers)}", timeouts)
                outcome = await impostor.act(forged, move_s)
            refused = outcome.fault is not None and outcome.fault.kind == "http_status"
            if refused:
                what = "a request signed with another secret was refused"
            elif outcome.fault is None:
                what = "a request signed with another secret was answered"
            else:
                what = f"a forged request was not refused cleanly ({outcome.fault.kind})"
            lines.append(
                CheckLine(
                    refused,
                    "signature",
                    what,
                    "check X-Referee-Signature (HMAC-SHA256 of the raw body) and answer 401 when it is wrong",
                )
            )

        # POST /end
        end = GameEnd(
            apiversion=APIVERSION,
            game_id=game_id,
            seat=0,
            places=[1, 2],
            adjudicated=False,
            disqualified=[],
            faults=[],
            points=[0, 12],
        )
        mark = output.mark() if output is not None else []
        lines.append(
            await _quoted(
                _notified("/end", await bot.end(end, clock.end_s, 0), timeouts.end_ms), output, mark
            )
        )
    return lines


async def _quoted(line: CheckLine, output: OutputProbe | None, mark: Sequence[int]) -> CheckLine:
    """A FAIL line with the bot's output since `mark` (a PASS line as it is)."""
    if line.ok or output is None:
        return line
    return msgspec.structs.replace(line, detail=with_output(line.detail, await output.around(mark)))


def _notified(call: str, fault: Fault | None, limit_ms: int) -> CheckLine:
    """The line for a /start or /end call."""
    if fault is None:
        return CheckLine(True, f"POST {call}", "answered 2xx in time")
    return CheckLine(
        False,
        f"POST {call}",
        f"{fault.kind}: {fault.detail}",
        f"answer POST {call} with any 2xx within {limit_ms} ms",
    )


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"
