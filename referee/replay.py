"""Replay files: one gzip-compressed JSON-lines file per game, and what they show.

Line 1 is the header (format and referee versions, rules, seed, names,
timeouts, fault policy, game id); then one line per ``/act`` request (seat,
turn, request id, SHA-256 of the state sent, the action applied and whether
it was the bot's or the default, the fault, the latency), a line per
disqualification right after the request that caused it, a line per
``/start`` or ``/end`` fault; the last line is the result. Every line is a
JSON object whose ``type`` says which (``header``, ``request``,
``disqualified``, ``notice``, ``result``). The line Structs are in
:mod:`referee.record`.

:func:`rerun` deals the game again from the seed and plays the recorded
actions through the engine, checking the hash of every state a bot was sent:
the record is enough to re-run the game exactly, and proves what each bot
saw. :func:`frames` is the replay viewer's data, built on the same reading
(:func:`referee.record.steps`).
"""

from __future__ import annotations

import gzip
import os
import random
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from protocol.codec import ENCODER
from referee.game import GameResult, GameState, ViewCache, events, full_view, new_game, view

from .record import (
    FORMAT_VERSION,
    DisqualifiedLine,
    Line,
    MatchResult,
    NoticeLine,
    ReplayError,
    ReplayHeader,
    ReplayMismatch,
    ReplayRecord,
    RequestLine,
    ResultLine,
    public_detail,
    steps,
)
from .report import describe

__all__ = [
    "ReplayError",
    "ReplayMismatch",
    "compress",
    "dumps",
    "frames",
    "loads",
    "read",
    "rerun",
    "write",
]

_LINE_DECODER: Final = msgspec.json.Decoder(Line)


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
                    f"{source}: replay format {line.format}; this referee reads format {FORMAT_VERSION}"
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
    """Read a record: gzip-compressed (as :func:`write` makes them) or plain
    JSON lines. Raises :class:`ReplayError`."""
    source = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except OSError as e:
        raise ReplayError(f"{source}: cannot read the replay: {e.strerror or e}") from None
    except (EOFError, zlib.error) as e:
        raise ReplayError(f"{source}: cannot read the replay: {e}") from None
    return loads(data, source)


Observer = Callable[[GameState, RequestLine], None]


def rerun(record: ReplayRecord, observe: Observer | None = None) -> GameResult:
    """Deal the game again and play the recorded actions; the engine's result.

    Every request's state is rebuilt with :func:`referee.game.view` and its
    hash compared with the record. `observe(state, line)` is called for each
    request with the state the request was built from (during set-up: the
    state before any seat's choice). The result must equal the recorded one,
    if any. Raises :class:`ReplayMismatch` at the first difference.
    """
    state: GameState | None = None
    for step in steps(record, keep_sent=observe is not None):
        if observe is not None:
            assert step.sent is not None
            observe(step.sent, step.line)
        state = step.state
    if state is None:  # pragma: no cover - every game has its set-up requests
        header = record.header
        state = new_game(header.rules, header.names, random.Random(header.seed))
    return state.result()


# ------------------------------------------------------------- the viewer


def _seat_view(state: GameState, seat: int, cache: ViewCache) -> dict[str, Any]:
    v = msgspec.to_builtins(view(state, seat, len(state.events), cache))
    assert isinstance(v, dict)
    v.pop("events", None)
    return v


def _frame(
    state: GameState,
    cache: ViewCache,
    since: int,
    label: str,
    seat: int | None,
    by: str | None,
    fault: str | None,
) -> dict[str, Any]:
    return {
        "label": label,
        "seat": seat,
        "by": by,
        "fault": fault,
        "full": full_view(state),
        "views": [_seat_view(state, s, cache) for s in range(state.n)],
        "events": msgspec.to_builtins(events(state, None, since)),
    }


def frames(
    record: ReplayRecord,
    *,
    public: bool = False,
    output_seat: int | None = None,
    outputs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The replay viewer's data for a record: the game's header, its result
    and one frame per step (the deal first): the full state, what each seat
    could see, and the step's public events. Raises :class:`ReplayMismatch`
    when the record does not re-run.

    `public`: every fault's detail is the public text of its kind
    (:func:`referee.record.public_detail`), never what the bot answered:
    that is its team's to see (the service's pages).

    `outputs`: what seat `output_seat`'s bot printed while it answered each
    request, by request id (:func:`referee.diagnostics.output_by_request`):
    each of that seat's frames gets its request's as ``output`` (the team's
    own replay only; never a public one)."""
    header = record.header
    names = header.names
    deal = new_game(header.rules, names, random.Random(header.seed))
    out = [_frame(deal, ViewCache(), 0, "the deal", None, None, None)]
    out[0]["turn"] = None  # no move yet
    cache = ViewCache()
    for step in steps(record):
        line, reason = step.line, step.dq_reason
        if line.by == "skipped":
            continue
        who = f"{names[line.seat]} (seat {line.seat})"
        if reason is not None:
            label = f"{who} is disqualified: {reason}"
        else:
            label = f"{who}: {describe(line.action)}"
            if line.by == "default":
                label += " (default move)"
        fault = None
        if line.fault is not None:
            detail = public_detail(line.fault) if public else line.fault.detail
            fault = f"{line.fault.kind}: {detail}"
        frame = _frame(step.state, cache, step.since, label, line.seat, line.by, fault)
        frame["turn"] = line.turn  # the request's `turn` (PROTOCOL.md), never the state's after the move
        if outputs is not None and line.seat == output_seat:
            frame["output"] = outputs.get(line.request_id, "")
        out.append(frame)
    result: dict[str, Any] = {
        "game_id": header.game_id,
        "seed": header.seed,
        "names": names,
        "rules": msgspec.to_builtins(header.rules),
        "result": _result(record.result, public),
        "frames": out,
    }
    if outputs is not None:
        result["output_seat"] = output_seat
    return result


def _result(result: MatchResult | None, public: bool) -> dict[str, Any] | None:
    if result is None:
        return None
    if public:
        result = msgspec.structs.replace(
            result,
            faults=[
                [msgspec.structs.replace(f, detail=public_detail(f)) for f in seat] for seat in result.faults
            ],
        )
    out: dict[str, Any] = msgspec.to_builtins(result)
    return out
