"""What one seat may see (RULES §8): the only way state leaves the engine
towards a bot.

:func:`view` builds PROTOCOL.md's ``state`` object for a seat. Everything it
reads is either public or that seat's own; the resampling tests prove it by
re-dealing every card the seat cannot see and checking the view is unchanged.
"""

from __future__ import annotations

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


def _cleared(state: GameState) -> list[str]:
    cache = state._wire_cleared
    cleared = state.cleared
    if len(cache) < len(cleared):
        strs = C.STR
        cache += [strs[c] for c in cleared[len(cache):]]
    return cache[:]


_DOWN: dict[tuple[bool, bool, bool], list[int]] = {
    (a, b, c): [slot for slot, live in enumerate((a, b, c)) if live]
    for a in (False, True)
    for b in (False, True)
    for c in (False, True)
}


def _down(slots: list[int]) -> list[int]:
    """The slots still face down (a fresh list each time)."""
    return _DOWN[(slots[0] != GONE, slots[1] != GONE, slots[2] != GONE)][:]


def view(state: GameState, seat: int, since: int = 0) -> State:
    """PROTOCOL.md's ``state`` for ``seat``, with the events from ``since``.

    During set-up the players choose at once [D2]: nobody sees another's
    choice, nor whether it has been made, until all have chosen.
    """
    setup = state.phase == SETUP
    strs = C.STR
    places = state.places
    out_place = {s: k + 1 for k, s in enumerate(state.out_order)} if state.out_order else None
    dq = state.dq_order
    alive = state.alive
    players: list[PlayerView] = []
    for i in range(state.n):
        down = _down(state.down[i])
        hand_count = len(state.hands[i])
        up = state.up[i]
        if setup and i != seat:
            hand_count += len(up)
            up = []
        if places is not None:
            place: int | None = places[i]
        else:
            place = out_place.get(i) if out_place else None
        known = state.known[i]
        if known:
            known_strs = [strs[c] for c in known]
            known_strs.sort()
        else:
            known_strs = []
        players.append(
            PlayerView(
                seat=i,
                name=state.names[i],
                hand_count=hand_count,
                up=[strs[c] for c in up],
                down_count=len(down),
                out=not alive[i],
                place=place,
                down=down,
                known=known_strs,
                disqualified=i in dq if dq else False,
            )
        )
    hand = sorted(state.hands[seat])
    you = YouView(
        seat=seat,
        hand=[strs[c] for c in hand],
        up=[strs[c] for c in state.up[seat]],
        down=_down(state.down[seat]),
    )
    return State(
        you=you,
        players=players,
        pile=[strs[c] for c in state.pile],
        draw_count=len(state.draw),
        cleared=_cleared(state),
        removed_count=len(state.removed),
        current=seat if setup else state.current,
        direction=state.direction,
        extra_actions=len(state.extras),
        events=events(state, seat, since),
        phase=PHASE_NAMES[state.phase],
        turn=state.turn,
        pending="swap" if state.pending_swap else None,
    )


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
