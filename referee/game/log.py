"""The event log: one small typed record per kind of event.

:attr:`GameState.events <referee.game.state.GameState.events>` is a list of
these, in order; an event's index in it is its ``seq`` on the wire. Each kind
has its own fields, so no field changes meaning with the kind. Cards are the
engine's ints. Records are frozen: copies of a state share them.

What a record does not hold: the card of a failed flip, which only the
flipper may see ([D6]); it is in ``GameState.private`` under the event's
index. :func:`referee.game.view.event` turns a record into the wire
:class:`~protocol.messages.Event` (PROTOCOL.md lists the fields of each type);
``type`` below is that wire type.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import msgspec

# gc=False: a record holds ints, strings and tuples of ints, never a cycle, so
# the collector need not track it (and it is cheaper to make).


class ChoseUp(msgspec.Struct, frozen=True, gc=False):
    """``seat`` chose these 3UP cards; logged for every seat once all have chosen [D2]."""

    type: ClassVar[str] = "choose_up"
    seat: int
    cards: tuple[int, ...]


class PileSwapped(msgspec.Struct, frozen=True, gc=False):
    """``seat`` and ``target`` exchanged their 3UP and 3DOWN cards (V5 [D15])."""

    type: ClassVar[str] = "pile_swap"
    seat: int
    target: int


class Swapped(msgspec.Struct, frozen=True, gc=False):
    """``seat`` gave ``give`` from its hand for ``take`` from ``target``'s 3UP:
    another seat's in sabotage (V5b [D16]), its own (``target == seat``) in a
    colour run (V6 [D17])."""

    type: ClassVar[str] = "swap"
    seat: int
    give: int
    take: int
    target: int


class Passed(msgspec.Struct, frozen=True, gc=False):
    """``seat`` declined a sabotage (V5b) or colour-run (V6) swap."""

    type: ClassVar[str] = "pass"
    seat: int


class Played(msgspec.Struct, frozen=True, gc=False):
    """``seat`` played ``cards`` from its hand or 3UP."""

    type: ClassVar[str] = "play"
    seat: int
    cards: tuple[int, ...]


class Flipped(msgspec.Struct, frozen=True, gc=False):
    """``seat`` flipped its 3DOWN ``slot``: ``card`` was played; ``None`` when
    the flip failed (too low: the seat picked up the pile and the card, which
    stays secret, [D6])."""

    type: ClassVar[str] = "flip"
    seat: int
    slot: int
    card: int | None


class PickedUp(msgspec.Struct, frozen=True, gc=False):
    """``seat`` took the ``count`` cards of the discard pile."""

    type: ClassVar[str] = "pickup"
    seat: int
    count: int


class Drew(msgspec.Struct, frozen=True, gc=False):
    """``seat`` drew ``count`` cards from the draw pile (never shown)."""

    type: ClassVar[str] = "draw"
    seat: int
    count: int


class Cleared(msgspec.Struct, frozen=True, gc=False):
    """``seat`` cleared the pile: ``kind`` is "clear", "clear+1", "clear+2", or
    "three" (three of a kind, [D8])."""

    type: ClassVar[str] = "clear"
    seat: int
    kind: str


class Reversed(msgspec.Struct, frozen=True, gc=False):
    """``seat``'s play turned the direction of play (V3 [D13])."""

    type: ClassVar[str] = "reverse"
    seat: int


class WentOut(msgspec.Struct, frozen=True, gc=False):
    """``seat`` went out, finishing in ``place`` (1 = first)."""

    type: ClassVar[str] = "out"
    seat: int
    place: int


class Disqualified(msgspec.Struct, frozen=True, gc=False):
    """The referee disqualified ``seat`` (RULES §7); ``reason`` says why."""

    type: ClassVar[str] = "disqualified"
    seat: int
    reason: str | None


class Faulted(msgspec.Struct, frozen=True, gc=False):
    """``seat``'s bot faulted: ``kind`` is the fault kind, ``detail`` what happened."""

    type: ClassVar[str] = "fault"
    seat: int
    kind: str
    detail: str | None


class Ended(msgspec.Struct, frozen=True, gc=False):
    """The game ended; ``adjudicated``: by the turn limit [D12]."""

    type: ClassVar[str] = "end"
    #: The end concerns no seat (-1 on the wire).
    seat: ClassVar[int] = -1
    adjudicated: bool


#: One entry of the event log.
Record: TypeAlias = (
    ChoseUp
    | PileSwapped
    | Swapped
    | Passed
    | Played
    | Flipped
    | PickedUp
    | Drew
    | Cleared
    | Reversed
    | WentOut
    | Disqualified
    | Faulted
    | Ended
)
