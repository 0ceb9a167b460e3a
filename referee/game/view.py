"""What one seat may see (RULES §8): the only way state leaves the engine
towards a bot.

:func:`view` builds PROTOCOL.md's ``state`` object for a seat. Everything it
reads is either public or that seat's own; the resampling tests prove it by
re-dealing every card the seat cannot see and checking the view is unchanged.
:func:`view_bytes` is the same state already encoded, built faster for the
match runner; a property test holds it to the bytes of encoding :func:`view`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.codec import ENCODER
from protocol.messages import Event, PlayerView, State, YouView

from . import cards as C
from .state import GONE, OVER, PHASE_NAMES, SETUP, EventRecord, GameState

# Which field the log's ``number`` goes to, by event type.
_NUMBER_FIELD = {
    "flip": "slot",
    "pickup": "count",
    "draw": "count",
    "swap": "target",
    "pile_swap": "target",
    "out": "place",
}
# Which field the log's ``text`` goes to, by event type.
_TEXT_FIELD = {"clear": "kind", "fault": "kind", "flip": "kind"}


def event(seq: int, record: EventRecord, cards: tuple[int, ...] | None = None) -> Event:
    """The wire form of one log entry (``cards`` overrides the public cards)."""
    kind, seat, pub, number, text = record
    shown = cards if cards is not None else pub
    ev = Event(seq=seq, seat=seat, type=kind)
    if shown is not None:
        ev.cards = [C.STR[c] for c in shown]
    if number is not None:
        setattr(ev, _NUMBER_FIELD.get(kind, "count"), number)
    if text is not None:
        if kind == "fault" and ": " in text:
            ev.kind, ev.detail = text.split(": ", 1)
        else:
            setattr(ev, _TEXT_FIELD.get(kind, "detail"), text)
    return ev


def events(state: GameState, seat: int | None, since: int = 0) -> list[Event]:
    """The log from ``since`` on as ``seat`` sees it (``None``: the public
    log, private cards hidden from all).

    The public entries are built once per game and shared between views
    (treat them as read-only); a seat's own private details (the card of its
    failed flip, [D6]) are put in its own copies.
    """
    log = state.events
    cache = state._wire_events
    for seq in range(len(cache), len(log)):
        cache.append(event(seq, log[seq]))
    out = cache[since:]
    private = state.private
    if private and seat is not None:
        for seq, cards in private.items():
            if seq >= since and log[seq][1] == seat:
                out[seq - since] = event(seq, log[seq], cards)
    return out


def _cleared_shared(state: GameState) -> list[str]:
    """The cleared cards' wire form: the cache itself (do not change it)."""
    cache = state._wire_cleared
    cleared = state.cleared
    if len(cache) < len(cleared):
        strs = C.STR
        cache += [strs[c] for c in cleared[len(cache):]]
    return cache


def _cleared(state: GameState) -> list[str]:
    return _cleared_shared(state)[:]


_DOWN: dict[tuple[bool, bool, bool], list[int]] = {
    (a, b, c): [slot for slot, live in enumerate((a, b, c)) if live]
    for a in (False, True)
    for b in (False, True)
    for c in (False, True)
}


def _down(slots: list[int]) -> list[int]:
    """The slots still face down (a fresh list each time)."""
    return _DOWN[(slots[0] != GONE, slots[1] != GONE, slots[2] != GONE)][:]


def _place_of(state: GameState) -> Any:
    """A function seat -> place (None while unknown)."""
    places = state.places
    if places is not None:
        return places.__getitem__
    if state.out_order:
        return {s: k + 1 for k, s in enumerate(state.out_order)}.get
    return _no_place


def _no_place(seat: int) -> None:
    return None


def _player(
    state: GameState, i: int, hand_count: int, up: list[int], place: int | None
) -> PlayerView:
    known = state.known[i]
    if known:
        known_strs = [C.STR[c] for c in known]
        known_strs.sort()
    else:
        known_strs = []
    down = _down(state.down[i])
    dq = state.dq_order
    return PlayerView(
        seat=i,
        name=state.names[i],
        hand_count=hand_count,
        up=[C.STR[c] for c in up],
        down_count=len(down),
        out=not state.alive[i],
        place=place,
        down=down,
        known=known_strs,
        disqualified=i in dq if dq else False,
    )


def _you(state: GameState, seat: int) -> YouView:
    strs = C.STR
    return YouView(
        seat=seat,
        hand=[strs[c] for c in sorted(state.hands[seat])],
        up=[strs[c] for c in state.up[seat]],
        down=_down(state.down[seat]),
    )


def _shown(state: GameState, i: int, seat: int, setup: bool) -> tuple[int, list[int]]:
    """Player `i`'s hand count and 3UP as `seat` sees them: during set-up
    another's 3UP is not shown, its cards count as in hand [D2]."""
    hand_count = len(state.hands[i])
    up = state.up[i]
    if setup and i != seat:
        return hand_count + len(up), []
    return hand_count, up


def _table(state: GameState, seat: int, setup: bool) -> dict[str, Any]:
    """The fields of the state besides `you`, `players` and `events`."""
    return {
        "pile": [C.STR[c] for c in state.pile],
        "draw_count": len(state.draw),
        "removed_count": len(state.removed),
        "current": seat if setup else state.current,
        "direction": state.direction,
        "extra_actions": len(state.extras),
        "phase": PHASE_NAMES[state.phase],
        "turn": state.turn,
        "pending": "swap" if state.pending_swap else None,
    }


def view(state: GameState, seat: int, since: int = 0) -> State:
    """PROTOCOL.md's ``state`` for ``seat``, with the events from ``since``.

    During set-up the players choose at once [D2]: nobody sees another's
    choice, nor whether it has been made, until all have chosen.
    """
    setup = state.phase == SETUP
    place = _place_of(state)
    players: list[PlayerView] = []
    for i in range(state.n):
        hand_count, up = _shown(state, i, seat, setup)
        players.append(_player(state, i, hand_count, up, place(i)))
    return State(
        you=_you(state, seat),
        players=players,
        cleared=_cleared(state),
        events=events(state, seat, since),
        **_table(state, seat, setup),
    )


class _StateWire(msgspec.Struct, kw_only=True):
    """:class:`~protocol.messages.State` with `players` and `events` already
    encoded (the same fields in the same order: the same bytes)."""

    you: YouView
    players: msgspec.Raw
    pile: list[str]
    draw_count: int
    cleared: list[str]
    removed_count: int
    current: int
    direction: int
    extra_actions: int
    events: msgspec.Raw
    phase: str
    turn: int
    pending: str | None


def view_bytes(state: GameState, seat: int, since: int = 0) -> bytes:
    """``ENCODER.encode(view(state, seat, since))``, built faster: the match
    runner's path. Each seat's :class:`PlayerView` is kept encoded together
    with every fact it is built from, and rebuilt only when one changes;
    each public event is encoded once."""
    setup = state.phase == SETUP
    place = _place_of(state)
    cache = state._wire_players
    dq = state.dq_order
    alive = state.alive
    parts: list[bytes] = []
    for i in range(state.n):
        hand_count, up = _shown(state, i, seat, setup)
        key = (
            hand_count,
            tuple(up),
            tuple(state.down[i]),
            tuple(state.known[i]),
            alive[i],
            place(i),
            i in dq,
        )
        hit = cache[i]
        if hit is not None and hit[0] == key:
            parts.append(hit[1])
        else:
            encoded = ENCODER.encode(_player(state, i, hand_count, up, key[5]))
            cache[i] = (key, encoded)
            parts.append(encoded)
    return ENCODER.encode(
        _StateWire(
            you=_you(state, seat),
            players=msgspec.Raw(b"[" + b",".join(parts) + b"]"),
            cleared=_cleared_shared(state),
            events=msgspec.Raw(_events_json(state, seat, since)),
            **_table(state, seat, setup),
        )
    )


def _events_json(state: GameState, seat: int, since: int) -> bytes:
    """The JSON of ``events(state, seat, since)``."""
    log = state.events
    done = state._wire_event_json
    if len(done) < len(log):
        wire = state._wire_events
        for seq in range(len(wire), len(log)):
            wire.append(event(seq, log[seq]))
        done += [ENCODER.encode(ev) for ev in wire[len(done) : len(log)]]
    if since >= len(log):
        return b"[]"
    parts = done[since:]
    private = state.private
    if private:
        for seq, cards in private.items():
            if seq >= since and log[seq][1] == seat:
                parts[seq - since] = ENCODER.encode(event(seq, log[seq], cards))
    return b"[" + b",".join(parts) + b"]"


def full_view(state: GameState) -> dict[str, object]:
    """Everything, for replays and the referee's own logs (never for a bot)."""
    return {
        "phase": PHASE_NAMES[state.phase],
        "turn": state.turn,
        "current": state.current,
        "direction": state.direction,
        "hands": [C.to_str(sorted(h)) for h in state.hands],
        "up": [C.to_str(u) for u in state.up],
        "down": [[C.STR[c] if c != GONE else None for c in d] for d in state.down],
        "draw": C.to_str(state.draw),
        "pile": C.to_str(state.pile),
        "cleared_count": len(state.cleared),
        "removed_count": len(state.removed),
        "extra_actions": len(state.extras),
        "places": state.places if state.phase == OVER else None,
    }
