"""Replay records: one gzip-compressed JSON-lines file per game.

Line 1 is the header (format and referee versions, rules, seed, names,
timeouts, fault policy, game id); then one line per ``/act`` request (seat,
turn, request id, SHA-256 of the state sent, the action applied and whether
it was the bot's or the default, the fault, the latency), a line per
disqualification right after the request that caused it, a line per
``/start`` or ``/end`` fault; the last line is the result. Every line is a
JSON object whose ``type`` says which (``header``, ``request``,
``disqualified``, ``notice``, ``result``).

:func:`rerun` deals the game again from the seed and plays the recorded
actions through the engine, checking the hash of every state a bot was sent:
the record is enough to re-run the game exactly, and proves what each bot saw.
"""

from __future__ import annotations

import gzip
import os
import random
from collections.abc import Callable
from typing import Final

import msgspec

from protocol.codec import ENCODER
from referee.game import GameResult, GameState, new_game, view

from .match import (
    FORMAT_VERSION,
    DisqualifiedLine,
    Line,
    MatchResult,
    NoticeLine,
    ReplayHeader,
    ReplayRecord,
    RequestLine,
    ResultLine,
    apply_step,
    state_hash,
)

__all__ = [
    "FORMAT_VERSION",
    "DisqualifiedLine",
    "NoticeLine",
    "ReplayError",
    "ReplayHeader",
    "ReplayMismatch",
    "ReplayRecord",
    "RequestLine",
    "ResultLine",
    "dumps",
    "loads",
    "read",
    "rerun",
    "write",
]

_LINE_DECODER: Final = msgspec.json.Decoder(Line)


class ReplayError(ValueError):
    """A replay file that cannot be read: the message says where and why."""


class ReplayMismatch(ReplayError):
    """Re-running a record did not reproduce it (another engine, or a changed record)."""


def dumps(record: ReplayRecord) -> bytes:
    """The record as JSON lines (uncompressed)."""
    parts = [ENCODER.encode(record.header)]
    parts.extend(ENCODER.encode(line) for line in record.lines)
    if record.result is not None:
        parts.append(ENCODER.encode(ResultLine(result=record.result)))
    return b"\n".join(parts) + b"\n"


def loads(data: bytes, source: str = "replay") -> ReplayRecord:
    """A record from JSON lines (uncompressed). Raises :class:`ReplayError`."""
    header: ReplayHeader | None = None
    lines: list[RequestLine | DisqualifiedLine | NoticeLine] = []
    result: MatchResult | None = None
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = _LINE_DECODER.decode(raw)
        except msgspec.DecodeError as e:
            raise ReplayError(f"{source}:{number}: {e}") from None
        if isinstance(line, ReplayHeader):
            if header is not None or number != 1:
                raise ReplayError(f"{source}:{number}: a header must be the first line only")
            if line.format != FORMAT_VERSION:
                raise ReplayError(
                    f"{source}: replay format {line.format}; this referee reads format "
                    f"{FORMAT_VERSION}"
                )
            header = line
        elif header is None:
            raise ReplayError(f"{source}:{number}: the first line must be the header")
        elif result is not None:
            raise ReplayError(f"{source}:{number}: a line after the result")
        elif isinstance(line, ResultLine):
            result = line.result
        else:
            lines.append(line)
    if header is None:
        raise ReplayError(f"{source}: empty replay")
    return ReplayRecord(header=header, lines=lines, result=result)


def compress(record: ReplayRecord) -> bytes:
    """`record` as stored: gzip-compressed JSON lines."""
    return gzip.compress(dumps(record), compresslevel=6)


def write(record: ReplayRecord, path: str | os.PathLike[str]) -> None:
    """Write `record` to `path` as gzip-compressed JSON lines."""
    with open(path, "wb") as f:
        f.write(compress(record))


def read(path: str | os.PathLike[str]) -> ReplayRecord:
    """Read a record written by :func:`write`. Raises :class:`ReplayError`."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ReplayError(f"{os.fspath(path)}: cannot read the replay: {e}") from None
    return loads(data, os.fspath(path))


Observer = Callable[[GameState, RequestLine], None]


def rerun(record: ReplayRecord, observe: Observer | None = None) -> GameResult:
    """Deal the game again and play the recorded actions; the engine's result.

    Every request's state is rebuilt with :func:`referee.game.view` and its
    hash compared with the record. `observe(state, line)` is called before each
    request is settled, with the state the request was built from (during
    set-up: the state before any seat's choice). The result must equal the
    recorded one, if any. Raises :class:`ReplayMismatch` at the first
    difference.
    """
    header = record.header
    state = new_game(header.rules, header.names, random.Random(header.seed))
    n = len(header.names)
    since = [0] * n
    requests: list[tuple[RequestLine, str | None]] = []
    for line in record.lines:
        if isinstance(line, RequestLine):
            requests.append((line, None))
        elif isinstance(line, DisqualifiedLine):
            if not requests or requests[-1][0].request_id != line.request_id:
                raise ReplayMismatch(
                    f"disqualification of seat {line.seat} does not follow its request "
                    f"{line.request_id}"
                )
            requests[-1] = (requests[-1][0], line.reason)

    i = 0
    while not state.over:
        seats = state.to_move()
        batch = requests[i : i + len(seats)]
        got = [line.seat for line, _ in batch]
        if got != seats:
            where = batch[0][0].request_id if batch else "the end of the record"
            raise ReplayMismatch(
                f"at {where}: the engine asks seats {seats}, the record has {got}"
            )
        snapshot = state.copy() if observe is not None and len(seats) > 1 else state
        for line, _ in batch:
            digest = state_hash(ENCODER.encode(view(state, line.seat, since[line.seat])))
            since[line.seat] = len(state.events)
            if digest != line.state_sha256:
                raise ReplayMismatch(
                    f"request {line.request_id} (seat {line.seat}, turn {line.turn}): the "
                    "state rebuilt from the seed differs from the state that was sent"
                )
        for line, reason in batch:
            if observe is not None:
                observe(snapshot, line)
            if line.by == "skipped":
                continue
            if state.over:
                raise ReplayMismatch(f"request {line.request_id}: the game was over already")
            try:
                apply_step(state, line.seat, line.action, line.fault, reason)
            except ValueError as e:
                raise ReplayMismatch(f"request {line.request_id}: {e}") from None
        i += len(seats)
    if i != len(requests):
        raise ReplayMismatch(
            f"the game ended after {i} requests; the record has {len(requests)}"
        )
    result = state.result()
    recorded = record.result
    if recorded is not None:
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
    return result
