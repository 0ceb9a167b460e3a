"""Helpers of the match runner's tests: run a game against apps, check what bots saw."""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections.abc import Sequence

import aiohttp
from aiohttp import web

from protocol import (
    APIVERSION,
    ActReply,
    BotInfo,
    Fault,
    GameEnd,
    GameStart,
    Rules,
    Timeouts,
    decode_act_request,
    encode,
)
from referee.bots import ActOutcome, BotError, Endpoint, HttpBot
from referee.bots.base import ActsOnBytes
from referee.game import GameState
from referee.game import cards as C
from referee.game.state import GONE
from referee.match import Match
from referee.record import FaultPolicy, MatchResult, RequestLine
from referee.replay import rerun
from tests.support.programs.zoo import BODIES, PROBLEMS, serve

#: Small limits keep the suite fast; 400 ms leaves good bots room for the
#: odd stall of a shared machine (~300 ms seen), so they never fault.
FAST = Timeouts(move_ms=400, start_ms=1000, end_ms=1000)


class Recorder(ActsOnBytes):
    """A bot in process that keeps every ``/act`` the match runner hands it,
    as a transport gets it: ``sent`` holds (body, request id, turn, limit in
    seconds). It answers a legal index at random (from `seed`), at once."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.sent: list[tuple[bytes, str, int, float]] = []
        self.rng = random.Random(seed)

    async def handshake(self, timeout_s: float = 1.0) -> BotInfo:
        return BotInfo(apiversion=APIVERSION, name=self.name)

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        return None

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        self.sent.append((body, request_id, turn, deadline_s))
        index = self.rng.randrange(len(decode_act_request(body).legal))
        return ActOutcome(reply=ActReply(request_id=request_id, index=index), latency_ms=0.0)

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        return None

    async def endpoint(self) -> Endpoint:
        raise BotError("a bot in process has no address")

    async def close(self) -> None:
        pass


async def run_game(
    apps: Sequence[web.Application],
    session: aiohttp.ClientSession,
    *,
    seed: int = 5,
    policy: FaultPolicy | None = None,
    timeouts: Timeouts = FAST,
    rules: Rules | None = None,
) -> tuple[MatchResult, Match]:
    """Serve `apps` on loopback and play one game between them, seat by app."""
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(app)) for app in apps]
        bots = [HttpBot(url, session=session) for url in urls]
        for bot in bots:
            await bot.handshake()
        match = Match(bots, seed, rules=rules, timeouts=timeouts, policy=policy)
        result = await match.play()
    return result, match


def hidden_cards(state: GameState, seat: int) -> set[str]:
    """Number cards `seat` must not see: others' hands (beyond what is publicly
    known), every 3DOWN card, the draw pile. Clears are left out: the deck
    holds several of each."""
    hidden: list[int] = list(state.draw)
    for i in range(state.n):
        hidden += [c for c in state.down[i] if c != GONE]
        if i != seat:
            known = list(state.known[i])
            for c in state.hands[i]:
                if c in known:
                    known.remove(c)
                else:
                    hidden.append(c)
    return {C.STR[c] for c in hidden if C.rank(c) <= 10}


def check_views(match: Match, apps: Sequence[web.Application]) -> int:
    """Every body each bot got decodes with protocol/, and each /act request
    carries exactly that seat's view: its state hashes to the recorded hash,
    which the re-run rebuilds with view(); no hidden card appears in it.
    Returns the number of /act requests checked."""
    hidden: dict[str, set[str]] = {}

    def observe(state: GameState, line: RequestLine) -> None:
        hidden[line.request_id] = hidden_cards(state, line.seat)

    rerun(match.record, observe)
    lines = {line.request_id: line for line in match.record.lines if isinstance(line, RequestLine)}
    checked = 0
    for seat, app in enumerate(apps):
        assert app[PROBLEMS] == [], app[PROBLEMS]
        seqs: list[int] = []
        seen: set[str] = set()
        for path, body in app[BODIES]:
            if path != "/act":
                continue
            request = decode_act_request(body)
            if request.request_id in seen:  # sent again after a stale connection
                continue
            seen.add(request.request_id)
            seqs += [event.seq for event in request.state.events]
            assert request.seat == seat
            assert request.game_id == match.game_id
            line = lines[request.request_id]
            assert line.seat == seat
            assert hashlib.sha256(encode(request.state)).hexdigest() == line.state_sha256
            for card in hidden[request.request_id]:
                assert f'"{card}"'.encode() not in body, (request.request_id, card)
            checked += 1
        # "events since this seat's previous request": no gap, no repeat.
        assert seqs == list(range(len(seqs)))
    return checked
