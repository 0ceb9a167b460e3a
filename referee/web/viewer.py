"""The replay viewer's data: every step of a recorded game, rebuilt by the engine.

:func:`frames` deals the game again from the record's seed and applies the
recorded outcome of every request (as :func:`referee.replay.rerun` does),
keeping after each step the full state (:func:`referee.game.full_view`), what
each seat could see then (:func:`referee.game.view`) and the public events of
the step. :func:`standalone_html` is the viewer as one self-contained file.
"""

from __future__ import annotations

import os
import random
from typing import Any

import msgspec

from protocol.messages import Action
from referee.game import GameState, events, full_view, new_game, view
from referee.match import DisqualifiedLine, RequestLine, apply_step
from referee.replay import ReplayError, ReplayMismatch, ReplayRecord, loads, read


def read_replay(path: str | os.PathLike[str]) -> ReplayRecord:
    """A replay file, gzip-compressed (as :func:`referee.replay.write` makes
    them) or plain JSON lines."""
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as e:
        raise ReplayError(f"{os.fspath(path)}: cannot read the replay: {e.strerror or e}") from None
    if magic == b"\x1f\x8b":
        return read(path)
    with open(path, "rb") as f:
        return loads(f.read(), os.fspath(path))


def describe(action: Action | None) -> str:
    if action is None:
        return "nothing"
    d = msgspec.to_builtins(action)
    kind = str(d.pop("type", "?"))
    if kind in ("choose_up", "play"):
        return f"{kind.replace('_', ' ')} {' '.join(d.get('cards', []))}"
    if kind == "flip":
        return f"flip slot {d.get('slot')}"
    if kind == "swap":
        target = f" with seat {d['target']}" if d.get("target") is not None else ""
        return f"swap {d.get('give')} for {d.get('take')}{target}"
    return kind


def _seat_view(state: GameState, seat: int) -> dict[str, Any]:
    v = msgspec.to_builtins(view(state, seat, len(state.events)))
    assert isinstance(v, dict)
    v.pop("events", None)
    return v


def _frame(state: GameState, since: int, label: str, seat: int | None, by: str | None,
           fault: str | None) -> dict[str, Any]:
    return {
        "label": label,
        "seat": seat,
        "by": by,
        "fault": fault,
        "full": full_view(state),
        "views": [_seat_view(state, s) for s in range(state.n)],
        "events": msgspec.to_builtins(events(state, None, since)),
    }


def frames(record: ReplayRecord) -> dict[str, Any]:
    """The viewer's data for a record: the game's header, its result and one
    frame per step (the deal first). Raises :class:`ReplayMismatch` when the
    record does not re-run."""
    header = record.header
    names = header.names
    state = new_game(header.rules, names, random.Random(header.seed))
    requests: list[tuple[RequestLine, str | None]] = []
    for line in record.lines:
        if isinstance(line, RequestLine):
            requests.append((line, None))
        elif isinstance(line, DisqualifiedLine) and requests:
            requests[-1] = (requests[-1][0], line.reason)
    out = [_frame(state, 0, "the deal", None, None, None)]
    i = 0
    while not state.over and i < len(requests):
        seats = state.to_move()
        batch = requests[i:i + len(seats)]
        if [line.seat for line, _ in batch] != seats:
            raise ReplayMismatch(f"step {i}: the engine asks seats {seats}, the record has "
                                 f"{[line.seat for line, _ in batch]}")
        for line, reason in batch:
            if line.by == "skipped" or state.over:
                continue
            since = len(state.events)
            try:
                apply_step(state, line.seat, line.action, line.fault, reason)
            except ValueError as e:
                raise ReplayMismatch(f"request {line.request_id}: {e}") from None
            who = f"{names[line.seat]} (seat {line.seat})"
            if reason is not None:
                label = f"{who} is disqualified: {reason}"
            else:
                label = f"{who}: {describe(line.action)}"
                if line.by == "default":
                    label += " (default move)"
            fault = f"{line.fault.kind}: {line.fault.detail}" if line.fault is not None else None
            out.append(_frame(state, since, label, line.seat, line.by, fault))
        i += len(seats)
    result = msgspec.to_builtins(record.result) if record.result is not None else None
    return {
        "game_id": header.game_id,
        "seed": header.seed,
        "names": names,
        "rules": msgspec.to_builtins(header.rules),
        "result": result,
        "frames": out,
    }


def json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``,
    no ``<!--``, no line separators can break out."""
    text = msgspec.json.encode(data).decode()
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def standalone_html(data: dict[str, Any], title: str = "") -> str:
    """The replay viewer as one self-contained HTML file (styles, script and data inline)."""
    from .pages import replay_page

    return replay_page(data, title=title or f"replay {data['game_id']}", standalone=True)
