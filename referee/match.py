"""One game between bots: deal, ask, validate, apply, record (issue 4).

:func:`play_match` deals from the seed, sends ``/start`` to every bot, then
loops: each seat to move gets its view (:meth:`referee.game.ViewCache.view_bytes`, the
only state a bot ever sees, encoded) and its legal actions; the reply is decoded by the
transport, checked against the engine, and applied. During set-up every seat
chooses at once, so those requests go out together and are applied in seat
order. Finally ``/end`` goes to every bot, and a :class:`MatchResult` comes
back.

Whatever a bot does costs that bot only. A late, broken or illegal reply is a
:class:`~protocol.Fault`: it is recorded with its kind, shown to the table as a
``fault`` event (with a fixed wording: no text of the bot's goes to the other
bots), and answered by the :class:`FaultPolicy`: a strike and the safe default
action, or disqualification after too many strikes (RULES §7). Nothing a bot
does makes :func:`play_match` raise.

Every game also yields a replay record (:class:`~referee.record.ReplayRecord`;
written and re-run by :mod:`referee.replay`): the header with the seed, one line per
request with the hash of the state sent, the action applied and the fault, the
disqualifications and the result.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
from collections.abc import Awaitable, Sequence

import msgspec

from protocol.codec import ENCODER
from protocol.messages import (
    APIVERSION,
    Action,
    Fault,
    GameEnd,
    GameStart,
    Pass,
    Pickup,
    Play,
    Rules,
    Timeouts,
)
from referee import version
from referee.bots.base import ActOutcome, Bot
from referee.bots.clock import Clock
from referee.game import ActionError, GameState, ViewCache, new_game
from referee.game.cards import INT as _CARD_INT
from referee.record import (
    By,
    DisqualifiedLine,
    FaultPolicy,
    MatchResult,
    NoticeLine,
    ReplayHeader,
    ReplayRecord,
    RequestLine,
    apply_step,
    latency_stats,
    state_hash,
)
from referee.replay import write as write_replay

__all__ = ["Match", "default_action", "play_match"]

log = logging.getLogger(__name__)

# ------------------------------------------------------------------ policy


def default_action(legal: Sequence[Action]) -> Action:
    """The safe action played for a bot that faulted.

    Pick up if legal; else the lowest legal play (lowest rank, fewest cards);
    else ``pass`` if legal (declining a colour-run or sabotage swap changes
    nothing); else the first action listed (a 3DOWN flip, a set-up choice).
    """
    lowest: Play | None = None
    lowest_key = (99, 99)
    has_pass = False
    for action in legal:
        if type(action) is Pickup:
            return action
        if type(action) is Play:
            key = (_rank(action.cards[0]), len(action.cards))
            if key < lowest_key:
                lowest, lowest_key = action, key
        elif type(action) is Pass:
            has_pass = True
    if lowest is not None:
        return lowest
    if has_pass:
        return Pass()
    return legal[0]


def _rank(card: str) -> int:
    code = _CARD_INT.get(card)
    return code >> 3 if code is not None else 99


# ------------------------------------------------------------------- match


class _ActRequestWire(msgspec.Struct, kw_only=True):
    """ActRequest with the state already encoded (the same fields, in the same order)."""

    apiversion: str
    game_id: str
    request_id: str
    seat: int
    turn: int
    deadline_ms: int
    bank_ms: int | None
    state: msgspec.Raw
    legal: list[Action]


class _Pending:
    """A request ready to go: its id and turn, the legal actions sent, the
    encoded body, the encoded state (hashed for the record) and the hard limit.
    (A plain class: compiled, it is built without a Python-level call, which a
    NamedTuple's ``__new__`` is.)"""

    __slots__ = ("request_id", "turn", "legal", "body", "state", "limit_s")

    def __init__(
        self, request_id: str, turn: int, legal: list[Action], body: bytes, state: bytes, limit_s: float
    ) -> None:
        self.request_id = request_id
        self.turn = turn
        self.legal = legal
        self.body = body
        self.state = state
        self.limit_s = limit_s


class _Settled:
    """What became of one request, kept until :meth:`Match._flush` writes it
    into the record (off the path between a reply and the next request)."""

    __slots__ = ("batch", "seat", "pending", "action", "by", "fault", "latency_ms", "dq_reason")

    def __init__(
        self,
        batch: int,
        seat: int,
        pending: _Pending,
        action: Action | None,
        by: By,
        fault: Fault | None,
        latency_ms: float,
        dq_reason: str | None,
    ) -> None:
        self.batch = batch
        self.seat = seat
        self.pending = pending
        self.action = action
        self.by = by
        self.fault = fault
        self.latency_ms = latency_ms
        self.dq_reason = dq_reason


class Match:
    """One game between `bots` (by seat), dealt from `seed`.

    ``await match.play()`` returns the :class:`MatchResult`; afterwards
    ``match.record`` holds the :class:`ReplayRecord`. `names` default to the
    bots' names. `rules`, `timeouts`, `policy` default to the protocol's and
    :class:`FaultPolicy`'s defaults.
    """

    def __init__(
        self,
        bots: Sequence[Bot],
        seed: int,
        *,
        rules: Rules | None = None,
        timeouts: Timeouts | None = None,
        policy: FaultPolicy | None = None,
        names: Sequence[str] | None = None,
        game_id: str | None = None,
    ) -> None:
        self.bots = list(bots)
        self.seed = seed
        self.rules = rules if rules is not None else Rules()
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.policy = policy if policy is not None else FaultPolicy()
        self.names = list(names) if names is not None else [b.name for b in self.bots]
        if len(self.names) != len(self.bots):
            raise ValueError(f"{len(self.bots)} bots but {len(self.names)} names")
        #: Opaque: random, unrelated to the seed and the deal.
        self.game_id = game_id if game_id is not None else secrets.token_hex(12)
        n = len(self.bots)
        self.clocks = [Clock(self.timeouts) for _ in range(n)]
        self.faults: list[list[Fault]] = [[] for _ in range(n)]
        self.strikes = [0] * n
        self.latencies: list[list[float]] = [[] for _ in range(n)]
        self.record = ReplayRecord(
            header=ReplayHeader(
                referee=version(),
                game_id=self.game_id,
                seed=seed,
                names=self.names,
                rules=self.rules,
                timeouts=self.timeouts,
                policy=self.policy,
            )
        )
        self._requests = 0
        self._since = [0] * n
        self._batch = 0
        self._played = False
        self._unrecorded: list[_Settled] = []
        #: The wire forms of this game's views, kept from request to request.
        self._views = ViewCache()

    # ------------------------------------------------------------ the game

    async def play(self) -> MatchResult:
        """Play the game to its end. Raises ``ValueError`` only for bad rules or seats."""
        if self._played:
            raise RuntimeError("a Match is played once; make a new one")
        self._played = True
        state = new_game(self.rules, self.names, random.Random(self.seed))
        n = len(self.bots)
        starts = await asyncio.gather(*(self._start(seat) for seat in range(n)))
        for seat, fault in enumerate(starts):
            if fault is not None:
                self._notice(seat, "start", fault)

        loop = asyncio.get_running_loop()
        try:
            while not state.over:
                seats = state.to_move()
                if not seats:  # pragma: no cover - an engine bug, never a bot's doing
                    raise RuntimeError(f"the engine has no seat to move at turn {state.turn}")
                self._batch += 1
                if len(seats) == 1:
                    seat = seats[0]
                    pending = self._request(state, seat)
                    if self._unrecorded:
                        loop.call_soon(self._flush_soon)
                    outcome = await self._ask(seat, pending)
                    self._settle(state, seat, pending, outcome)
                    continue
                batch = [self._request(state, seat) for seat in seats]
                outcomes = await asyncio.gather(*(self._ask(seat, p) for seat, p in zip(seats, batch)))
                for seat, pending, outcome in zip(seats, batch, outcomes):
                    self._settle(state, seat, pending, outcome)
        finally:
            self._flush()  # whatever is settled is in the record, even if play stops early

        final = state.result()
        result = MatchResult(
            game_id=self.game_id,
            seed=self.seed,
            names=self.names,
            places=final.places,
            adjudicated=final.adjudicated,
            disqualified=final.disqualified,
            points=final.points,
            turns=final.turns,
            faults=self.faults,
            strikes=self.strikes,
            latency=[latency_stats(v) for v in self.latencies],
            latencies_ms=[[round(x, 3) for x in v] for v in self.latencies],
        )
        ends = await asyncio.gather(*(self._end(seat, result) for seat in range(n)))
        for seat, fault in enumerate(ends):
            if fault is not None:
                self._notice(seat, "end", fault)  # result.faults shares these lists
        self.record.result = result
        return result

    # -------------------------------------------------------------- steps

    def _request(self, state: GameState, seat: int) -> _Pending:
        # The state is encoded once (view_bytes gives the bytes
        # ENCODER.encode(view(...)) would): spliced into the body here, hashed
        # for the record later.
        encoded = self._views.view_bytes(state, seat, self._since[seat])
        self._since[seat] = len(state.events)
        self._requests += 1
        budget = self.clocks[seat].move()
        legal = state.legal_actions(seat)
        request_id = f"{self.game_id}.{self._requests}"
        turn = state.turn
        body = ENCODER.encode(
            _ActRequestWire(
                apiversion=APIVERSION,
                game_id=self.game_id,
                request_id=request_id,
                seat=seat,
                turn=turn,
                deadline_ms=budget.deadline_ms,
                bank_ms=budget.bank_ms,
                state=msgspec.Raw(encoded),
                legal=legal,
            )
        )
        return _Pending(request_id, turn, legal, body, encoded, budget.limit_s)

    async def _ask(self, seat: int, pending: _Pending) -> ActOutcome:
        try:
            outcome = await self.bots[seat].act_bytes(
                pending.body, pending.request_id, pending.turn, pending.limit_s
            )
        except Exception as e:  # a transport's bug must not end the game either
            log.exception("transport of seat %d raised", seat)
            outcome = ActOutcome(
                fault=Fault(
                    kind="connection",
                    turn=pending.turn,
                    detail=f"transport error: {type(e).__name__}: {e}",
                ),
                latency_ms=0.0,
            )
        self.clocks[seat].charge(outcome.latency_ms)
        self.latencies[seat].append(outcome.latency_ms)
        return outcome

    def _settle(
        self,
        state: GameState,
        seat: int,
        pending: _Pending,
        outcome: ActOutcome,
    ) -> None:
        legal = pending.legal
        fault = outcome.fault
        action: Action | None = None
        by: By = "bot"
        dq_reason: str | None = None
        if state.over:
            # The game ended while this seat's set-up reply was on its way.
            by = "skipped"
        else:
            if fault is None:
                reply = outcome.reply
                assert reply is not None
                try:
                    chosen = reply.chosen(legal)
                except ValueError as e:  # an index outside legal
                    fault = Fault(kind="illegal", turn=pending.turn, detail=str(e))
                else:
                    try:
                        state.apply(chosen, seat)
                        action = chosen
                    except ActionError as e:
                        fault = Fault(kind="illegal", turn=pending.turn, detail=str(e))
            if fault is not None:
                self.faults[seat].append(fault)
                self.strikes[seat] += 1
                if self.policy.disqualifies(self.strikes[seat]):
                    dq_reason = self.policy.reason(self.strikes[seat], fault)
                    by = "none"
                else:
                    action = default_action(legal)
                    by = "default"
                apply_step(state, seat, action, fault, dq_reason)
        self._unrecorded.append(
            _Settled(self._batch, seat, pending, action, by, fault, outcome.latency_ms, dq_reason)
        )

    def _flush_soon(self) -> None:
        """Write the settled requests into the record once the next request is on its way.

        Called just before a request is sent: this callback runs on the
        loop's next pass, and schedules the flush for the pass after, by when
        the request has gone out (aiohttp sends a body from a task it starts
        in the same pass). So the hashing and record keeping happen while the
        bot thinks instead of between its reply and the next request. Only
        the timing rests on that: :meth:`play` flushes again at the end.
        """
        asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        lines = self.record.lines
        for done in self._unrecorded:
            pending = done.pending
            lines.append(
                RequestLine(
                    batch=done.batch,
                    seat=done.seat,
                    turn=pending.turn,
                    request_id=pending.request_id,
                    state_sha256=state_hash(pending.state),
                    action=done.action,
                    by=done.by,
                    fault=done.fault,
                    latency_ms=round(done.latency_ms, 3),
                )
            )
            if done.dq_reason is not None:
                lines.append(
                    DisqualifiedLine(
                        seat=done.seat,
                        turn=pending.turn,
                        request_id=pending.request_id,
                        reason=done.dq_reason,
                    )
                )
        self._unrecorded.clear()

    async def _start(self, seat: int) -> Fault | None:
        message = GameStart(
            apiversion=APIVERSION,
            game_id=self.game_id,
            seat=seat,
            players=self.names,
            rules=self.rules,
            timeouts=self.timeouts,
        )
        sent = self.bots[seat].start(message, self.clocks[seat].start_s)
        return await self._notify(seat, "start", sent)

    async def _end(self, seat: int, result: MatchResult) -> Fault | None:
        message = GameEnd(
            apiversion=APIVERSION,
            game_id=self.game_id,
            seat=seat,
            places=result.places,
            adjudicated=result.adjudicated,
            disqualified=result.disqualified,
            faults=list(self.faults[seat]),
            points=result.points,
        )
        sent = self.bots[seat].end(message, self.clocks[seat].end_s, result.turns)
        return await self._notify(seat, "end", sent, result.turns)

    async def _notify(
        self, seat: int, call: str, sent: Awaitable[Fault | None], turn: int = 0
    ) -> Fault | None:
        """The fault of a /start or /end call (the transport dates it); a
        transport's bug is a connection fault dated `turn`."""
        try:
            return await sent
        except Exception as e:
            log.exception("transport of seat %d raised", seat)
            return Fault(kind="connection", turn=turn, detail=f"POST /{call}: transport error: {e}")

    def _notice(self, seat: int, call: str, fault: Fault) -> None:
        self.faults[seat].append(fault)
        self.record.lines.append(NoticeLine(seat=seat, call=call, fault=fault))


async def play_match(
    bots: Sequence[Bot],
    seed: int,
    *,
    rules: Rules | None = None,
    timeouts: Timeouts | None = None,
    policy: FaultPolicy | None = None,
    names: Sequence[str] | None = None,
    game_id: str | None = None,
    replay: str | os.PathLike[str] | None = None,
) -> MatchResult:
    """Play one game between `bots` (by seat) dealt from `seed`.

    See :class:`Match`; `replay` is a path to write the replay record to
    (gzip-compressed JSON lines, :mod:`referee.replay`).
    """
    match = Match(
        bots,
        seed,
        rules=rules,
        timeouts=timeouts,
        policy=policy,
        names=names,
        game_id=game_id,
    )
    result = await match.play()
    if replay is not None:
        write_replay(match.record, replay)
    return result
