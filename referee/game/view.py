"""What one seat may see (RULES §8): the only way state leaves the engine
towards a bot.

:func:`view` builds PROTOCOL.md's ``state`` object for a seat. Everything it
reads is either public or that seat's own; the resampling tests prove it by
re-dealing every card the seat cannot see and checking the view is unchanged.

:class:`ViewCache` keeps the wire forms of one game's views from one call to
the next, so that a caller walking a game step by step pays per step, not per
game: :meth:`ViewCache.view_bytes` is the match runner's path (the bytes of
encoding :func:`view`, built faster; a property test holds it to them), and
``view(..., cache=)`` / ``events(..., cache=)`` share its wire events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from protocol.codec import ENCODER
from protocol.messages import Event, PlayerView, State, YouView

from . import cards as C
from .log import (
    ChoseUp,
    Cleared,
    Disqualified,
    Drew,
    Ended,
    Faulted,
    Flipped,
    Passed,
    PickedUp,
    PileSwapped,
    Played,
    Record,
    Reversed,
    Swapped,
    WentOut,
)
from .state import GONE, OVER, PHASE_NAMES, SETUP, GameState

# The wire form of each kind of record (PROTOCOL.md's Event), by record type.
# A dict on the type: isinstance() on a Struct class costs several times more.


def _chose_up(seq: int, r: ChoseUp) -> Event:
    return Event(seq=seq, seat=r.seat, type="choose_up", cards=[C.STR[c] for c in r.cards])


def _pile_swapped(seq: int, r: PileSwapped) -> Event:
    return Event(seq=seq, seat=r.seat, type="pile_swap", target=r.target)


def _swapped(seq: int, r: Swapped) -> Event:
    strs = C.STR
    return Event(seq=seq, seat=r.seat, type="swap", cards=[strs[r.give], strs[r.take]], target=r.target)


def _passed(seq: int, r: Passed) -> Event:
    return Event(seq=seq, seat=r.seat, type="pass")


def _played(seq: int, r: Played) -> Event:
    strs = C.STR
    return Event(seq=seq, seat=r.seat, type="play", cards=[strs[c] for c in r.cards])


def _flipped(seq: int, r: Flipped) -> Event:
    if r.card is None:
        return Event(seq=seq, seat=r.seat, type="flip", slot=r.slot, kind="failed")
    return Event(seq=seq, seat=r.seat, type="flip", cards=[C.STR[r.card]], slot=r.slot, kind="played")


def _picked_up(seq: int, r: PickedUp) -> Event:
    return Event(seq=seq, seat=r.seat, type="pickup", count=r.count)


def _drew(seq: int, r: Drew) -> Event:
    return Event(seq=seq, seat=r.seat, type="draw", count=r.count)


def _cleared(seq: int, r: Cleared) -> Event:
    return Event(seq=seq, seat=r.seat, type="clear", kind=r.kind)


def _reversed(seq: int, r: Reversed) -> Event:
    return Event(seq=seq, seat=r.seat, type="reverse")


def _went_out(seq: int, r: WentOut) -> Event:
    return Event(seq=seq, seat=r.seat, type="out", place=r.place)


def _disqualified(seq: int, r: Disqualified) -> Event:
    return Event(seq=seq, seat=r.seat, type="disqualified", detail=r.reason)


def _faulted(seq: int, r: Faulted) -> Event:
    return Event(seq=seq, seat=r.seat, type="fault", kind=r.kind, detail=r.detail)


def _ended(seq: int, r: Ended) -> Event:
    return Event(seq=seq, seat=r.seat, type="end", detail="adjudicated" if r.adjudicated else None)


_WIRE: dict[type[Record], Callable[[int, Any], Event]] = {
    ChoseUp: _chose_up,
    PileSwapped: _pile_swapped,
    Swapped: _swapped,
    Passed: _passed,
    Played: _played,
    Flipped: _flipped,
    PickedUp: _picked_up,
    Drew: _drew,
    Cleared: _cleared,
    Reversed: _reversed,
    WentOut: _went_out,
    Disqualified: _disqualified,
    Faulted: _faulted,
    Ended: _ended,
}


def event(seq: int, record: Record, cards: tuple[int, ...] | None = None) -> Event:
    """The wire form of the log's entry ``seq``; ``cards``, when given, in
    place of its public cards (a seat's own view of its failed flip, [D6])."""
    ev = _WIRE[type(record)](seq, record)
    if cards is not None:
        ev.cards = [C.STR[c] for c in cards]
    return ev


def events(state: GameState, seat: int | None, since: int = 0, cache: ViewCache | None = None) -> list[Event]:
    """The log from ``since`` on as ``seat`` sees it (``None``: the public
    log, private cards hidden from all).

    With a ``cache``, the public entries are built once per game and shared
    between views (treat them as read-only); a seat's own private details
    (the card of its failed flip, [D6]) are put in its own copies.
    """
    log = state.events
    if cache is not None:
        out = cache._wire_events(state)[since:]
    else:
        out = [event(seq, log[seq]) for seq in range(len(log))[since:]]
    private = state.private
    if private and seat is not None:
        for seq, cards in private.items():
            if seq >= since and log[seq].seat == seat:
                out[seq - since] = event(seq, log[seq], cards)
    return out


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


def _player(state: GameState, i: int, hand_count: int, up: list[int], place: int | None) -> PlayerView:
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


def view(state: GameState, seat: int, since: int = 0, cache: ViewCache | None = None) -> State:
    """PROTOCOL.md's ``state`` for ``seat``, with the events from ``since``.

    During set-up the players choose at once [D2]: nobody sees another's
    choice, nor whether it has been made, until all have chosen.

    A caller that views one game step by step may pass the game's
    :class:`ViewCache`: the events and cleared cards are then built once per
    game (the events shared between views: treat them as read-only).
    """
    setup = state.phase == SETUP
    place = _place_of(state)
    players: list[PlayerView] = []
    for i in range(state.n):
        hand_count, up = _shown(state, i, seat, setup)
        players.append(_player(state, i, hand_count, up, place(i)))
    if cache is not None:
        cleared = cache._wire_cleared(state)[:]
    else:
        strs = C.STR
        cleared = [strs[c] for c in state.cleared]
    return State(
        you=_you(state, seat),
        players=players,
        cleared=cleared,
        events=events(state, seat, since, cache),
        **_table(state, seat, setup),
    )


#: The JSON of :class:`~protocol.messages.State` with its parts filled in by
#: ``%``: the fields in the Structs' order, as ``ENCODER.encode(view(...))``
#: writes them (no spaces; a property test holds the two to the same bytes).
#: One ``bytes % tuple`` is cheaper than building a Struct to encode.
_STATE_JSON: Final = (
    b'{"you":{"seat":%d,"hand":%b,"up":%b,"down":%b},"players":[%b],"pile":%b,'
    b'"draw_count":%d,"cleared":%b,"removed_count":%d,"current":%d,"direction":%d,'
    b'"extra_actions":%d,"events":%b,"phase":%b,"turn":%d,"pending":%b}'
)
#: The JSON of each phase's name, and of ``pending``.
_PHASE_JSON: Final = tuple(ENCODER.encode(name) for name in PHASE_NAMES)
_SWAP_JSON: Final = ENCODER.encode("swap")
_NULL_JSON: Final = b"null"


class ViewCache:
    """The wire forms of one game's views, kept from one view to the next.

    One per game, owned by whoever views it step by step (the match runner, a
    replay re-run, the replay viewer). It keeps the public events (as Events
    and as JSON) and the cleared cards' strings, which only ever grow, and
    each seat's :class:`PlayerView` encoded, with every fact it is built from,
    rebuilt only when one of them changes.

    **A cache follows one state**: the :class:`GameState` object it was first
    given, as the engine moves it on (``apply``, ``disqualify``,
    ``note_fault``). Given another state (a copy that went its own way, a
    resampled world, another game) it starts afresh, so it is never wrong;
    alternating between states merely throws it away each time: give each
    state that goes its own way a cache of its own. (Changing a state's
    fields by hand after viewing it is not following it.)
    """

    __slots__ = ("_state", "_events", "_event_json", "_cleared", "_cleared_json", "_players")

    def __init__(self) -> None:
        #: The state followed; None until the first view.
        self._state: GameState | None = None
        #: The public wire form of each event, by seq.
        self._events: list[Event] = []
        #: The JSON of each of them.
        self._event_json: list[bytes] = []
        #: The wire strings of the cleared cards, in order.
        self._cleared: list[str] = []
        #: Their JSON.
        self._cleared_json = b"[]"
        #: By seat: (the facts its PlayerView shows, its JSON), once built.
        self._players: list[tuple[tuple[Any, ...], bytes] | None] = []

    def _follow(self, state: GameState) -> None:
        """Start afresh on ``state``."""
        self._state = state
        self._events = []
        self._event_json = []
        self._cleared = []
        self._cleared_json = b"[]"
        self._players = [None] * state.n

    def _wire_events(self, state: GameState) -> list[Event]:
        """The public wire events of ``state``'s whole log (the cache itself:
        do not change it)."""
        if state is not self._state:
            self._follow(state)
        wire = self._events
        log = state.events
        for seq in range(len(wire), len(log)):
            wire.append(event(seq, log[seq]))
        return wire

    def _wire_cleared(self, state: GameState) -> list[str]:
        """The cleared cards' wire strings (the cache itself: do not change it)."""
        if state is not self._state:
            self._follow(state)
        done = self._cleared
        cleared = state.cleared
        if len(done) < len(cleared):
            strs = C.STR
            done += [strs[c] for c in cleared[len(done) :]]
        return done

    def view_bytes(self, state: GameState, seat: int, since: int = 0) -> bytes:
        """``ENCODER.encode(view(state, seat, since))``, built faster: the
        match runner's path. Each seat's :class:`PlayerView` is kept encoded
        with every fact it is built from and rebuilt only when one changes;
        each public event and the cleared cards are encoded once; the rest
        is filled into the JSON's frame."""
        if state is not self._state:
            self._follow(state)
        setup = state.phase == SETUP
        place = _place_of(state)
        cache = self._players
        dq = state.dq_order
        alive = state.alive
        hands = state.hands
        ups = state.up
        downs = state.down
        knowns = state.known
        parts: list[bytes] = []
        for i in range(state.n):
            # As _shown: during set-up another's 3UP counts as in hand [D2].
            up = ups[i]
            hand_count = len(hands[i])
            if setup and i != seat:
                hand_count += len(up)
                up = []
            p = place(i)
            # Every fact _player reads (names and seats do not change).
            key = (hand_count, tuple(up), tuple(downs[i]), tuple(knowns[i]), alive[i], p, i in dq)
            hit = cache[i]
            if hit is not None and hit[0] == key:
                parts.append(hit[1])
            else:
                encoded = ENCODER.encode(_player(state, i, hand_count, up, p))
                cache[i] = (key, encoded)
                parts.append(encoded)
        strs = C.STR
        encode = ENCODER.encode
        cleared = state.cleared
        if len(self._cleared) < len(cleared):
            self._cleared_json = encode(self._wire_cleared(state))
        return _STATE_JSON % (
            seat,
            encode([strs[c] for c in sorted(hands[seat])]),
            encode([strs[c] for c in ups[seat]]),
            encode(_down(downs[seat])),
            b",".join(parts),
            encode([strs[c] for c in state.pile]),
            len(state.draw),
            self._cleared_json,
            len(state.removed),
            seat if setup else state.current,
            state.direction,
            len(state.extras),
            self._events_json(state, seat, since),
            _PHASE_JSON[state.phase],
            state.turn,
            _SWAP_JSON if state.pending_swap else _NULL_JSON,
        )

    def _events_json(self, state: GameState, seat: int, since: int) -> bytes:
        """The JSON of ``events(state, seat, since)``."""
        log = state.events
        done = self._event_json
        if len(done) < len(log):
            encode = ENCODER.encode
            done += [encode(event(seq, log[seq])) for seq in range(len(done), len(log))]
        if since >= len(log):
            return b"[]"
        parts = done[since:]
        private = state.private
        if private:
            for seq, cards in private.items():
                if seq >= since and log[seq].seat == seat:
                    parts[seq - since] = ENCODER.encode(event(seq, log[seq], cards))
        return b"[" + b",".join(parts) + b"]"


def public_view(state: GameState, since: int = 0) -> dict[str, Any]:
    """What a watcher may see of a game in play (issue 36): the state's
    public fields (PROTOCOL.md's ``state`` without ``you``, every 3UP hidden
    during set-up [D2], ``current`` None then) and the public log from
    ``since`` (private cards hidden from all). Built from the same parts as
    :func:`view`, so it holds nothing a seat's view keeps to that seat."""
    setup = state.phase == SETUP
    place = _place_of(state)
    players: list[PlayerView] = []
    for i in range(state.n):
        hand_count, up = _shown(state, i, -1, setup)
        players.append(_player(state, i, hand_count, up, place(i)))
    table = _table(state, -1, setup)
    if setup:
        table["current"] = None
    return {
        **table,
        "players": players,
        "cleared": [C.STR[c] for c in state.cleared],
        "events": events(state, None, since),
    }


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
