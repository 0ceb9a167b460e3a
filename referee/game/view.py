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
_TEXT_FIELD = {"clear": "kind", "fault": "kind"}


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
    log, private cards hidden from all)."""
    private = state.private
    out: list[Event] = []
    log = state.events
    for seq in range(since, len(log)):
        rec = log[seq]
        own = private.get(seq) if rec[1] == seat else None
        out.append(event(seq, rec, own))
    return out


def view(state: GameState, seat: int, since: int = 0) -> State:
    """PROTOCOL.md's ``state`` for ``seat``, with the events from ``since``.

    During set-up the players choose at once [D2]: nobody sees another's
    choice, nor whether it has been made, until all have chosen.
    """
    setup = state.phase == SETUP
    players: list[PlayerView] = []
    for i in range(state.n):
        down = [slot for slot, c in enumerate(state.down[i]) if c != GONE]
        dq = i in state.dq_order
        hand_count = len(state.hands[i])
        up = state.up[i]
        if setup and i != seat:
            hand_count += len(up)
            up = []
        place = state.places[i] if state.places is not None else None
        if place is None and i in state.out_order:
            place = state.out_order.index(i) + 1
        players.append(
            PlayerView(
                seat=i,
                name=state.names[i],
                hand_count=hand_count,
                up=[C.STR[c] for c in up],
                down_count=len(down),
                out=not state.active(i),
                place=place,
                down=down,
                known=sorted(C.STR[c] for c in state.known[i]) if state.known[i] else [],
                disqualified=dq,
            )
        )
    you = YouView(
        seat=seat,
        hand=[C.STR[c] for c in sorted(state.hands[seat])],
        up=[C.STR[c] for c in state.up[seat]],
        down=[slot for slot, c in enumerate(state.down[seat]) if c != GONE],
    )
    return State(
        you=you,
        players=players,
        pile=[C.STR[c] for c in state.pile],
        draw_count=len(state.draw),
        cleared=[C.STR[c] for c in state.cleared],
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
