"""What one game leaves behind: its result, its replay record, and what a record means.

The match runner (:mod:`referee.match`) writes these; the replay files
(:mod:`referee.replay`), the tournaments, the CLI and the service read them.
This module depends on the engine and the protocol only.

A replay record is the header (everything needed to deal the game again),
one :class:`RequestLine` per ``/act`` request (the hash of the state sent,
the action applied and whether it was the bot's or the fault policy's, the
fault), a :class:`DisqualifiedLine` right after the request that caused it,
a :class:`NoticeLine` per ``/start`` or ``/end`` fault, and the result.

:func:`steps` is the one reading of a record: it deals the game again from
the seed and applies every request's recorded outcome through the same
:func:`apply_step` the match used, checking the hash of every state a bot was
sent. The re-run check and the replay viewer are both built on it.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator, Sequence
from typing import Final, Literal, NamedTuple

import msgspec

from protocol.codec import ENCODER
from protocol.messages import Action, Fault, Rules, Timeouts
from referee.game import GameState, ViewCache, new_game, public_view, view

__all__ = [
    "FORMAT_VERSION",
    "By",
    "DisqualifiedLine",
    "FaultPolicy",
    "LatencyStats",
    "Line",
    "MatchResult",
    "NoticeLine",
    "ReplayError",
    "ReplayHeader",
    "ReplayMismatch",
    "ReplayRecord",
    "RequestLine",
    "ResultLine",
    "Follower",
    "Step",
    "apply_step",
    "latency_stats",
    "public_detail",
    "state_hash",
    "steps",
]

#: Version of the replay record format (:class:`ReplayHeader`.format).
FORMAT_VERSION: Final = 1


class FaultPolicy(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a fault costs a bot (RULES §7; the ``[faults]`` table of a league file).

    Every fault is a strike and the seat plays the safe default action
    (:func:`referee.match.default_action`) instead. `strikes`: a bot is
    disqualified at its N-th strike in one game (0 or less: never).
    `forfeit_on_first`: disqualified at its first fault.
    """

    strikes: int = 3
    forfeit_on_first: bool = False

    def disqualifies(self, strikes: int) -> bool:
        """Whether a bot with `strikes` strikes in this game is out."""
        if self.forfeit_on_first:
            return strikes >= 1
        return self.strikes > 0 and strikes >= self.strikes

    def reason(self, strikes: int, fault: Fault) -> str:
        """The disqualification reason shown to the table."""
        if self.forfeit_on_first:
            return f"forfeit on the first fault ({fault.kind})"
        return f"{strikes} faults (last: {fault.kind})"


#: The text of a ``fault`` event, by kind. Other bots see it; the bot's own
#: text (a reason phrase, an engine message about its cards) never leaves the
#: referee's records and the bot's own GameEnd.
_PUBLIC: Final = {
    "timeout": "no reply in time",
    "http_status": "not an HTTP 200 reply",
    "bad_json": "not a valid reply",
    "too_large": "reply over the size cap",
    "wrong_request_id": "reply for another request",
    "illegal": "illegal action",
    "connection": "connection failed",
}


def public_detail(fault: Fault) -> str:
    """The detail shown to every seat in the ``fault`` event of `fault`."""
    return _PUBLIC.get(fault.kind, "fault")


# ------------------------------------------------------------------ result


class LatencyStats(msgspec.Struct, kw_only=True):
    """Round-trip times of one bot's ``/act`` requests in a game, in ms (faults included)."""

    count: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    max_ms: float = 0.0


def latency_stats(values: Sequence[float]) -> LatencyStats:
    """Nearest-rank p50 and p95, and the maximum, of `values` (ms)."""
    if not values:
        return LatencyStats()
    ordered = sorted(values)
    n = len(ordered)

    def pick(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * n) - 1)], 3)

    return LatencyStats(count=n, p50_ms=pick(0.50), p95_ms=pick(0.95), max_ms=round(ordered[-1], 3))


class MatchResult(msgspec.Struct, kw_only=True):
    """The outcome of one game, by seat.

    `places` (1 = winner, shared places possible), `adjudicated`,
    `disqualified` (in order), `points` and `turns` are the engine's
    :class:`~referee.game.GameResult`. `faults`: every fault of each seat,
    ``/start`` and ``/end`` included (their detail starts with the call);
    `strikes`: the faults that counted under the policy (``/act`` only).
    `latency`: each seat's ``/act`` round trips; `latencies_ms` the raw
    values (for percentiles over many games).
    """

    game_id: str
    seed: int
    names: list[str]
    places: list[int]
    adjudicated: bool
    disqualified: list[int]
    points: list[int]
    turns: int
    faults: list[list[Fault]]
    strikes: list[int]
    latency: list[LatencyStats]
    latencies_ms: list[list[float]] = msgspec.field(default_factory=list)


# ------------------------------------------------------------- the record

By = Literal["bot", "default", "none", "skipped"]


class ReplayHeader(msgspec.Struct, kw_only=True, tag_field="type", tag="header"):
    """First line of a replay: everything needed to deal the game again."""

    format: int = FORMAT_VERSION
    referee: str
    game_id: str
    seed: int
    names: list[str]
    rules: Rules
    timeouts: Timeouts
    policy: FaultPolicy


class RequestLine(msgspec.Struct, kw_only=True, tag_field="type", tag="request"):
    """One ``/act`` request and what came of it.

    `batch` numbers the rounds of requests (the set-up requests of all seats
    share one). `state_sha256`: SHA-256 of the JSON of the ``state`` sent.
    `action`: the action applied for the seat; `by`: "bot" (its own),
    "default" (the fault policy's), "none" (disqualified instead) or
    "skipped" (the game ended before this reply was used). `fault`: the
    fault, if any.
    """

    batch: int
    seat: int
    turn: int
    request_id: str
    state_sha256: str
    action: Action | None
    by: By
    fault: Fault | None = None
    latency_ms: float = 0.0


class DisqualifiedLine(msgspec.Struct, kw_only=True, tag_field="type", tag="disqualified"):
    """A seat disqualified after the request `request_id`; `reason` as shown to the table."""

    seat: int
    turn: int
    request_id: str
    reason: str


class NoticeLine(msgspec.Struct, kw_only=True, tag_field="type", tag="notice"):
    """A ``/start`` or ``/end`` fault: recorded, costs no strike, does not touch the game."""

    seat: int
    call: str
    fault: Fault


class ResultLine(msgspec.Struct, kw_only=True, tag_field="type", tag="result"):
    """Last line of a replay."""

    result: MatchResult


Line = ReplayHeader | RequestLine | DisqualifiedLine | NoticeLine | ResultLine


class ReplayRecord(msgspec.Struct, kw_only=True):
    """A game's replay record in memory: header, body lines in order, result."""

    header: ReplayHeader
    lines: list[RequestLine | DisqualifiedLine | NoticeLine] = msgspec.field(default_factory=list)
    result: MatchResult | None = None


def state_hash(encoded_state: bytes) -> str:
    """The hash recorded for a state sent to a bot."""
    return hashlib.sha256(encoded_state).hexdigest()


def apply_step(
    state: GameState, seat: int, action: Action | None, fault: Fault | None, dq_reason: str | None
) -> None:
    """Apply the settled outcome of one request: the fault event, then the
    disqualification or the action. The match and :func:`steps` both go
    through here, so their event logs (and the views built from them) are
    the same."""
    if fault is not None:
        state.note_fault(seat, fault.kind, public_detail(fault))
    if dq_reason is not None:
        state.disqualify(seat, dq_reason)
    elif action is not None:
        state.apply(action, seat)


# ------------------------------------------------------- reading a record


class ReplayError(ValueError):
    """A replay record that cannot be used: the message says where and why."""


class ReplayMismatch(ReplayError):
    """Re-running a record did not reproduce it (another engine, or a changed record)."""


class Step(NamedTuple):
    """One request of a record, re-played.

    `line` and `dq_reason` (the disqualification that followed it, if any)
    are the record's; `state` is the live game state after the step (the
    generator goes on mutating it), whose ``events[since:]`` the step added.
    `sent` is the state the request was built from, when :func:`steps` was
    asked to keep it (during set-up every seat's request is built from the
    state before any choice).
    """

    line: RequestLine
    dq_reason: str | None
    state: GameState
    since: int
    sent: GameState | None


def _requests(record: ReplayRecord) -> list[tuple[RequestLine, str | None]]:
    """The record's requests, each with the disqualification that follows it."""
    requests: list[tuple[RequestLine, str | None]] = []
    for line in record.lines:
        if isinstance(line, RequestLine):
            requests.append((line, None))
        elif isinstance(line, DisqualifiedLine):
            if not requests or requests[-1][0].request_id != line.request_id:
                raise ReplayMismatch(
                    f"disqualification of seat {line.seat} does not follow its request {line.request_id}"
                )
            requests[-1] = (requests[-1][0], line.reason)
    return requests


def steps(record: ReplayRecord, *, keep_sent: bool = False) -> Iterator[Step]:
    """Deal the game of `record` again and apply each request's recorded outcome.

    Yields one :class:`Step` per request, after applying it (a request the
    game ended before, ``by == "skipped"``, is yielded without applying
    anything). Every request's state is rebuilt with
    :func:`referee.game.view` and its hash compared with the record; the
    batches must be the seats the engine asks, in its order; the record must
    end when the game does, with the result the engine gives. Raises
    :class:`ReplayMismatch` at the first difference, so a consumer that
    reaches the end has a record that re-runs exactly.

    `keep_sent`: also give each step the state its request was built from
    (a copy per set-up batch; the live state otherwise, before the step).
    """
    header = record.header
    state = new_game(header.rules, header.names, random.Random(header.seed))
    requests = _requests(record)
    since = [0] * len(header.names)
    cache = ViewCache()
    i = 0
    while not state.over:
        seats = state.to_move()
        batch = requests[i : i + len(seats)]
        got = [line.seat for line, _ in batch]
        if got != seats:
            where = batch[0][0].request_id if batch else "the end of the record"
            raise ReplayMismatch(f"at {where}: the engine asks seats {seats}, the record has {got}")
        for line, _ in batch:
            digest = state_hash(ENCODER.encode(view(state, line.seat, since[line.seat], cache)))
            since[line.seat] = len(state.events)
            if digest != line.state_sha256:
                raise ReplayMismatch(
                    f"request {line.request_id} (seat {line.seat}, turn {line.turn}): the "
                    "state rebuilt from the seed differs from the state that was sent"
                )
        snapshot = state.copy() if keep_sent and len(seats) > 1 else None
        for line, reason in batch:
            start = len(state.events)
            if line.by == "skipped":
                yield Step(line, reason, state, start, snapshot if keep_sent else None)
                continue
            if state.over:
                raise ReplayMismatch(f"request {line.request_id}: the game was over already")
            sent = snapshot if snapshot is not None else (state.copy() if keep_sent else None)
            try:
                apply_step(state, line.seat, line.action, line.fault, reason)
            except ValueError as e:
                raise ReplayMismatch(f"request {line.request_id}: {e}") from None
            yield Step(line, reason, state, start, sent)
        i += len(seats)
    if i != len(requests):
        raise ReplayMismatch(f"the game ended after {i} requests; the record has {len(requests)}")
    recorded = record.result
    if recorded is not None:
        result = state.result()
        mine = (result.places, result.adjudicated, result.disqualified, result.points, result.turns)
        theirs = (
            recorded.places,
            recorded.adjudicated,
            recorded.disqualified,
            recorded.points,
            recorded.turns,
        )
        if mine != theirs:
            raise ReplayMismatch(f"re-run result {result} differs from the recorded {recorded}")


class Follower:
    """A game followed while its record grows (issue 36: watching live):
    deals it again from the header and applies each batch of requests once
    the whole batch is in the record (the set-up choices together, as the
    seats see them), through the same :func:`apply_step` as :func:`steps`.

    :meth:`advance` reads the record's lines up to a length taken once (a
    record written on another thread only grows, and a line is whole once
    appended). It shows only what :func:`~referee.game.public_view` shows; a
    request that disqualified its seat waits for its disqualification line.
    The record's own checks (the hashes, the result) are :func:`steps`'
    business, once the game is over."""

    def __init__(self, header: ReplayHeader) -> None:
        self.state = new_game(header.rules, header.names, random.Random(header.seed))
        #: Lines of the record read so far.
        self.read = 0
        #: Requests read whose batch is not whole yet, with their disqualification.
        self._waiting: list[tuple[RequestLine, str | None]] = []

    def advance(self, lines: Sequence[RequestLine | DisqualifiedLine | NoticeLine]) -> bool:
        """Apply what the record has that is new; whether the game moved."""
        n = len(lines)  # one look: the lines the other thread appends later wait for the next call
        moved = False
        for line in lines[self.read : n]:
            if isinstance(line, RequestLine):
                self._waiting.append((line, None))
            elif isinstance(line, DisqualifiedLine) and self._waiting:
                self._waiting[-1] = (self._waiting[-1][0], line.reason)
        self.read = n
        state = self._waiting
        while not self.state.over:
            seats = self.state.to_move()
            batch = state[: len(seats)]
            if len(batch) < len(seats) or any(line.by == "none" and reason is None for line, reason in batch):
                break
            if [line.seat for line, _ in batch] != seats:
                raise ReplayMismatch(
                    f"the engine asks seats {seats}, the record has {[line.seat for line, _ in batch]}"
                )
            for line, reason in batch:
                if line.by != "skipped" and not self.state.over:
                    apply_step(self.state, line.seat, line.action, line.fault, reason)
            del state[: len(seats)]
            moved = True
        return moved

    def public(self, since: int = 0) -> dict[str, object]:
        """The game as a watcher sees it now, with the public log from `since`."""
        return public_view(self.state, since)
