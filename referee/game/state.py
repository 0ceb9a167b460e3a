"""The 3UP 3DOWN game state: legal actions and transitions (RULES.md §2–§9).

Pure: no I/O, no clock, no global randomness. A game is a function of the rules,
the ``random.Random`` passed to :func:`new_game` (used once, to shuffle and to
draw every later chance outcome up front) and the players' actions.

Actions are the wire Structs of :mod:`protocol` (``Play(cards=["5R"])``), so the
referee, the bots and the engine speak one vocabulary; cards are ints inside.
What happens is logged in :attr:`GameState.events` as typed records
(:mod:`referee.game.log`); :mod:`referee.game.view` turns them into the wire's.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Sequence
from itertools import combinations
from typing import Final, NewType, NoReturn

from protocol.messages import (
    MAX_PLAYERS,
    Action,
    ChooseUp,
    Draw,
    Flip,
    Pass,
    Pickup,
    Play,
    Rules,
    Swap,
)

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

# Plain ints under names (an IntEnum's attribute look-up costs the inner loop
# several times a comparison); the NewTypes keep mypy from mixing them up.

#: The phase of a game: one of the four constants below.
Phase = NewType("Phase", int)
SETUP: Final = Phase(0)
SABOTAGE: Final = Phase(1)
PLAY: Final = Phase(2)
OVER: Final = Phase(3)
#: The wire name of each phase, by phase.
PHASE_NAMES: Final = ("setup", "sabotage", "play", "over")

#: Where a player plays from (RULES §3): one of the four constants below.
Source = NewType("Source", int)
HAND: Final = Source(0)
UP: Final = Source(1)
DOWN: Final = Source(2)
NONE: Final = Source(3)  # holds nothing

GONE: Final = -1  # a 3DOWN slot that has been played
_ALL_GONE: Final = [GONE, GONE, GONE]
_CLEAR: Final = C.CLEAR
_CLEAR1: Final = C.CLEAR1

#: ``_DREW[seat][count]``: the records of draws (of 1 to 3 cards, the only
#: counts), made once: a record is frozen, so the log may share it.
_DREW: Final = tuple(tuple(Drew(seat, k) for k in range(4)) for seat in range(MAX_PLAYERS))

#: V3: a play of this rank turns the direction of play [D13].
REVERSE_RANK: Final = 1

_PICKUP: Final = Pickup()
_DRAW: Final = Draw()
_PASS: Final = Pass()
_FLIPS: Final = (Flip(slot=0), Flip(slot=1), Flip(slot=2))

# Interned canonical plays: the legal list of the inner loop reuses one Play
# object per card group, and apply() reads its cards back as ints by identity.
# Bounded by the number of same-rank card groups a deck can form.
_PLAYS: dict[tuple[int, ...], list[Play]] = {}
_PLAY_INTS: dict[int, tuple[int, ...]] = {}


def _choose_up(combo: tuple[int, ...]) -> ChooseUp:
    a = _CHOOSE.get(combo)
    if a is None:
        strs = C.STR
        a = _CHOOSE[combo] = ChooseUp(cards=(strs[combo[0]], strs[combo[1]], strs[combo[2]]))
    return a


_CHOOSE: dict[tuple[int, ...], ChooseUp] = {}


def _plays(group: tuple[int, ...]) -> list[Play]:
    """The canonical plays of a sorted same-rank group: its first 1, 2, … cards."""
    plays = _PLAYS.get(group)
    if plays is None:
        plays = []
        strs = tuple(C.STR[c] for c in group)
        count = 1 if _alone(group[0] >> 3) else len(group)
        for k in range(1, count + 1):
            p = Play(cards=strs[:k])
            _PLAY_INTS[id(p)] = group[:k]
            plays.append(p)
        _PLAYS[group] = plays
    return plays


# ------------------------------------------- what may be played, defined once
#
# RULES §3–§5 as the legal list (_play_options) and the checks of apply
# (_apply_play, _apply_flip, _apply_draw; a pick-up is checked against the
# list itself) both read them: where a seat plays from is _play_source, which
# cards go on the pile _FLOOR, which go together _alone, when a draw is allowed
# _draw_refusal.


def _alone(rank: int) -> bool:
    """[D5] A Clear card is played alone; cards of one number rank go together."""
    return rank >= _CLEAR


#: The lowest card (as an int) that may go on a pile whose top card is the
#: index: a card of the top's rank or higher (§4), any Clear on anything. On an
#: empty pile anything goes. (A Clear never stays on the pile: it clears it.)
_FLOOR: Final = tuple(min(c >> 3, C.CLEAR) << 3 for c in range(len(C.STR)))

#: The play of a single card, by card int.
_SINGLE: list[Play] = [_plays((c,))[0] if C.STR[c] else Play(cards=()) for c in range(len(C.STR))]


class ActionError(ValueError):
    """An action that cannot be applied; ``str(err)`` says why."""


class MalformedActionError(ActionError):
    """The action cannot be read: not an action, an unknown card, a bad slot."""


class IllegalActionError(ActionError):
    """A well-formed action that the rules forbid in this state."""


class GameResult:
    """The outcome of a finished game."""

    __slots__ = ("places", "adjudicated", "disqualified", "points", "turns")

    def __init__(
        self,
        places: list[int],
        adjudicated: bool,
        disqualified: list[int],
        points: list[int],
        turns: int,
    ) -> None:
        #: Place by seat, 1 = best; equal places are shared ([D11], [D12]).
        self.places = places
        #: True when the turn limit ended the game ([D12]).
        self.adjudicated = adjudicated
        #: Disqualified seats, in the order they were disqualified.
        self.disqualified = disqualified
        #: Penalty points each seat still held at the end (RULES V4 [D14]).
        self.points = points
        #: The number of the last turn played.
        self.turns = turns

    def __repr__(self) -> str:
        return (
            f"GameResult(places={self.places}, adjudicated={self.adjudicated}, "
            f"disqualified={self.disqualified}, points={self.points}, turns={self.turns})"
        )

    def _key(self) -> tuple[list[int], bool, list[int], list[int], int]:
        return (self.places, self.adjudicated, self.disqualified, self.points, self.turns)

    def __eq__(self, other: object) -> bool:
        # (Not through __slots__: a class compiled by mypyc has none.)
        return isinstance(other, GameResult) and self._key() == other._key()


def new_game(rules: Rules, players: int | Sequence[str], rng: random.Random) -> GameState:
    """Shuffle and deal a new game (RULES §2).

    ``players`` is a player count or the players' names by seat. ``rules`` is
    validated first: a bad configuration raises ``ValueError`` saying why.
    """
    names = [f"seat{i}" for i in range(players)] if isinstance(players, int) else list(players)
    n = len(names)
    rules.validate(n)
    deck = C.build_deck(rules.resolved_deck())
    order = deck[:]
    rng.shuffle(order)
    pair = rng.sample(range(n), 2) if rules.pile_swap else None
    return GameState._deal(rules, names, deck, order, pair)


class GameState:
    """A game of 3UP 3DOWN in progress. Mutable; :meth:`copy` for search."""

    __slots__ = (
        "rules",
        "names",
        "n",
        "deck",
        "hands",
        "up",
        "down",
        "known",
        "draw",
        "pile",
        "cleared",
        "removed",
        "current",
        "direction",
        "extras",
        "drew",
        "pending_swap",
        "phase",
        "turn",
        "chosen",
        "out_order",
        "dq_order",
        "adjudicated",
        "places",
        "events",
        "private",
        "swap_pair",
        "_legal",
        "alive",
        "dq_points",
        "_play_for_places",
        "_draw_instead_of_playing",
        "_reverses",
        "_colour_run",
        "_one_draw_per_clear2",
    )

    rules: Rules
    names: list[str]
    n: int
    deck: list[int]
    hands: list[list[int]]
    up: list[list[int]]
    down: list[list[int]]
    known: list[list[int]]
    draw: list[int]
    pile: list[int]
    cleared: list[int]
    removed: list[int]
    current: int
    direction: int
    extras: list[bool]
    drew: bool
    pending_swap: bool
    phase: Phase
    turn: int
    chosen: list[bool]
    out_order: list[int]
    dq_order: list[int]
    #: Penalty points each disqualified seat held when it was disqualified [D14].
    dq_points: dict[int, int]
    adjudicated: bool
    places: list[int] | None
    #: The event log, in order (a record's index is its ``seq``); append-only.
    events: list[Record]
    #: Cards of an event that only its seat may see, by the event's index: the
    #: card of a failed flip [D6].
    private: dict[int, tuple[int, ...]]
    swap_pair: list[int] | None
    #: Not out and not disqualified, by seat (kept with out_order/dq_order).
    alive: list[bool]
    #: The current seat's legal actions, once listed (None: not yet).
    _legal: list[Action] | None
    # The variants the inner loop asks about, read once from the rules.
    _play_for_places: bool  # V1
    _draw_instead_of_playing: bool  # V2
    _reverses: bool  # V3
    _colour_run: bool  # V6
    _one_draw_per_clear2: bool  # V8

    # ------------------------------------------------------------------ set-up

    @classmethod
    def _deal(
        cls,
        rules: Rules,
        names: list[str],
        deck: list[int],
        order: list[int],
        pair: list[int] | None,
    ) -> GameState:
        s = cls._blank(rules, names)
        s.deck = deck
        # The draw pile's top is its last element: deal from the top.
        draw = order[:]
        s.down = [[draw.pop(), draw.pop(), draw.pop()] for _ in range(s.n)]
        s.hands = [[draw.pop() for _ in range(6)] for _ in range(s.n)]
        s.draw = draw
        s.swap_pair = pair
        return s

    @classmethod
    def _blank(cls, rules: Rules, names: list[str]) -> GameState:
        """A state in set-up with no cards anywhere."""
        s = cls()  # no __init__: every field is set below
        n = len(names)
        s.rules = rules
        s.names = names
        s.n = n
        s.deck = []
        s.hands = [[] for _ in range(n)]
        s.down = [[GONE, GONE, GONE] for _ in range(n)]
        s.up = [[] for _ in range(n)]
        s.known = [[] for _ in range(n)]
        s.draw = []
        s.pile = []
        s.cleared = []
        s.removed = []
        s.current = 0
        s.direction = 1
        s.extras = []
        s.drew = False
        s.pending_swap = False
        s.phase = SETUP
        s.turn = 0
        s.chosen = [False] * n
        s.out_order = []
        s.dq_order = []
        s.dq_points = {}
        s.adjudicated = False
        s.places = None
        s.events = []
        s.private = {}
        s.swap_pair = None
        s.alive = [True] * n
        s._legal = None
        s._play_for_places = rules.play_for_places
        s._draw_instead_of_playing = rules.draw_instead_of_playing
        s._reverses = rules.reverses
        s._colour_run = rules.colour_run
        s._one_draw_per_clear2 = rules.one_draw_per_clear2
        return s

    def copy(self) -> GameState:
        """An independent copy (for search: simulate without touching this one)."""
        s = GameState()
        s.rules = self.rules
        s.names = self.names
        s.n = self.n
        s.deck = self.deck
        s.hands = [h[:] for h in self.hands]
        s.up = [u[:] for u in self.up]
        s.down = [d[:] for d in self.down]
        s.known = [k[:] for k in self.known]
        s.draw = self.draw[:]
        s.pile = self.pile[:]
        s.cleared = self.cleared[:]
        s.removed = self.removed[:]
        s.current = self.current
        s.direction = self.direction
        s.extras = self.extras[:]
        s.drew = self.drew
        s.pending_swap = self.pending_swap
        s.phase = self.phase
        s.turn = self.turn
        s.chosen = self.chosen[:]
        s.out_order = self.out_order[:]
        s.dq_order = self.dq_order[:]
        s.dq_points = dict(self.dq_points)
        s.adjudicated = self.adjudicated
        s.places = None if self.places is None else self.places[:]
        s.events = self.events[:]  # the records are frozen: shared
        s.private = dict(self.private)
        s.swap_pair = self.swap_pair
        s.alive = self.alive[:]
        s._legal = self._legal
        s._play_for_places = self._play_for_places
        s._draw_instead_of_playing = self._draw_instead_of_playing
        s._reverses = self._reverses
        s._colour_run = self._colour_run
        s._one_draw_per_clear2 = self._one_draw_per_clear2
        return s

    # ------------------------------------------------------------- inspection

    @property
    def over(self) -> bool:
        return self.phase == OVER

    def active(self, seat: int) -> bool:
        """Still playing: neither out nor disqualified."""
        return self.alive[seat]

    def to_move(self) -> list[int]:
        """The seats that may act now: every seat yet to choose its 3UP cards
        during set-up (they choose at once, [D2]); otherwise the current seat."""
        phase = self.phase
        if phase == SETUP:
            return [i for i in range(self.n) if not self.chosen[i] and i not in self.dq_order]
        if phase == OVER:
            return []
        return [self.current]

    def source(self, seat: int) -> Source:
        """Where ``seat`` plays from: HAND, UP, DOWN or NONE (RULES §3)."""
        cards = self._play_source(seat)
        if cards is not None:
            return HAND if cards is self.hands[seat] else UP
        for c in self.down[seat]:
            if c != GONE:
                return DOWN
        return NONE

    def _play_source(self, seat: int) -> list[int] | None:
        """The cards ``seat`` plays from (RULES §3): its hand, also an empty one
        while the draw pile has cards (it draws before acting, [D4]); else its
        3UP cards; None when it must flip a 3DOWN card, or holds nothing.

        The inner loop writes ``self.hands[seat] or self._play_source(seat)``:
        the same answer (a hand with cards is the source), without the call."""
        hand = self.hands[seat]
        if hand or self.draw:
            return hand
        up = self.up[seat]
        return up if up else None

    def _draw_refusal(self) -> str | None:
        """Why the current seat may not draw now; None when it may: once before
        each extra action [D10] (V8: not before a Clear+2's second), or with V2
        instead of a turn's first action."""
        if not self.draw:
            return "the draw pile is empty"
        extras = self.extras
        if extras:
            if self.drew:
                return "you have drawn before this extra action already"
            if not extras[-1]:
                return "no draw before the second extra action of a Clear+2 (V8)"
            return None
        if not self._draw_instead_of_playing:
            return "you may draw only before an extra action (or with variant V2)"
        return None

    def points(self, seat: int) -> int:
        """Penalty points of the cards ``seat`` holds (RULES V4 [D14]); for a
        disqualified seat, of the cards it held when disqualified (its cards
        leave the game, its penalty does not)."""
        if seat in self.dq_points:
            return self.dq_points[seat]
        p = C.POINTS
        total = sum(p[c >> 3] for c in self.hands[seat])
        total += sum(p[c >> 3] for c in self.up[seat])
        total += sum(p[c >> 3] for c in self.down[seat] if c != GONE)
        return total

    def result(self) -> GameResult:
        if self.places is None:
            raise RuntimeError("the game is not over")
        return GameResult(
            self.places[:],
            self.adjudicated,
            self.dq_order[:],
            [self.points(i) for i in range(self.n)],
            self.turn,
        )

    def all_cards(self) -> list[int]:
        """Every card of the game wherever it is (for conservation checks)."""
        out: list[int] = []
        for i in range(self.n):
            out += self.hands[i]
            out += self.up[i]
            out += [c for c in self.down[i] if c != GONE]
        return out + self.draw + self.pile + self.cleared + self.removed

    # ---------------------------------------------------------- legal actions

    def legal_actions(self, seat: int | None = None) -> list[Action]:
        """Every legal action of ``seat`` (default: the current seat), never
        empty for a seat in :meth:`to_move`. One ``play`` per (rank, count), with
        the lowest cards of that rank in the source as the canonical choice."""
        legal = self._legal
        if legal is not None and (seat is None or seat == self.current):
            return legal
        if self.phase == PLAY and not self.pending_swap and (seat is None or seat == self.current):
            legal = self._legal = self._play_options(self.current)
            return legal
        if self.phase == SETUP:
            return self._compute_legal(self.current if seat is None else seat)
        if seat is None or seat == self.current:
            legal = self._legal = self._compute_legal(self.current)
            return legal
        return []

    def _compute_legal(self, seat: int) -> list[Action]:
        phase = self.phase
        if phase == PLAY:
            if seat != self.current:
                return []
            if self.pending_swap:
                return self._swap_options(seat, None)
            return self._play_options(seat)
        if phase == SETUP:
            if self.chosen[seat] or seat in self.dq_order:
                return []
            # Every distinct choice of 3 of the dealt cards ([D2]).
            combos = dict.fromkeys(combinations(sorted(self.hands[seat]), 3))
            get = _CHOOSE.get
            acts: list[Action] = []
            for combo in combos:
                a = get(combo)
                acts.append(a if a is not None else _choose_up(combo))
            return acts
        if phase == SABOTAGE:
            if seat != self.current:
                return []
            acts = [_PASS]
            for t in range(self.n):
                if t != seat and self.active(t):
                    acts += self._swap_options(seat, t)[:-1]
            return acts
        return []

    def _swap_options(self, seat: int, target: int | None) -> list[Action]:
        """Swaps of one hand card of ``seat`` with one 3UP card (of ``target``,
        or its own for the V6 colour run), then ``pass``."""
        ups = sorted(set(self.up[seat if target is None else target]))
        acts: list[Action] = []
        for g in sorted(set(self.hands[seat])):
            for t in ups:
                acts.append(Swap(give=C.STR[g], take=C.STR[t], target=target))
        acts.append(_PASS)
        return acts

    def _play_options(self, seat: int) -> list[Action]:
        """The legal list of the play phase: the draw before an extra action,
        then a play per (rank, count) from the source, or a pick-up when none
        goes on the pile, or the flips; last V2's draw."""
        acts: list[Action] = []
        extras = self.extras
        may_draw = False
        if self.draw and (extras or self._draw_instead_of_playing):
            # (Otherwise _draw_refusal refuses: the common case skips the call.)
            may_draw = self._draw_refusal() is None
        if may_draw and extras:
            acts.append(_DRAW)  # [D10] draw before an extra action
        source = self.hands[seat] or self._play_source(seat)
        if source is None:
            for slot, c in enumerate(self.down[seat]):
                if c != GONE:
                    acts.append(_FLIPS[slot])
            return acts
        cards = sorted(source)
        pile = self.pile
        # Cards below the floor cannot be played: start at the first that can.
        i = bisect_left(cards, _FLOOR[pile[-1]]) if pile else 0
        played = i < len(cards)
        ncards = len(cards)
        while i < ncards:
            c = cards[i]
            r = c >> 3
            j = i + 1
            while j < ncards and cards[j] >> 3 == r:
                j += 1
            if j == i + 1:
                acts.append(_SINGLE[c])
            else:
                acts += _plays(tuple(cards[i:j]))
            i = j
        if not played:
            acts.append(_PICKUP)
        if may_draw and not extras:
            acts.append(_DRAW)  # V2: draw instead of playing
        return acts

    # ---------------------------------------------------------------- apply

    def apply(self, action: Action, seat: int | None = None) -> None:
        """Apply ``action`` for ``seat`` (default: the current seat).

        Raises :class:`MalformedActionError` or :class:`IllegalActionError`
        with a message that says why; the state is then unchanged.
        """
        phase = self.phase
        if phase == PLAY and (seat is None or seat == self.current) and not self.pending_swap:
            t = type(action)
            if t is Play:
                self._apply_play(action, self.current)  # type: ignore[arg-type]
            elif t is Flip:
                self._apply_flip(action, self.current)  # type: ignore[arg-type]
            elif t is Pickup:
                self._apply_pickup(self.current)
            elif t is Draw:
                self._apply_draw(self.current)
            elif t is ChooseUp:
                raise IllegalActionError("the 3UP cards are chosen at set-up only")
            elif t is Swap or t is Pass:
                raise IllegalActionError(
                    f"'{_kind(action)}' answers a colour-run (V6) or sabotage (V5b) decision; none is pending"
                )
            else:
                raise MalformedActionError(f"not an action: {action!r}")
            self._legal = None
            return
        if seat is None:
            seat = self.current
        if phase == OVER:
            raise IllegalActionError("the game is over")
        if phase == SETUP:
            self._apply_setup(action, seat)
            return
        if seat != self.current:
            raise IllegalActionError(f"it is seat {self.current}'s turn, not seat {seat}'s")
        if phase == SABOTAGE:
            self._apply_sabotage(action, seat)
        else:
            self._apply_colour_run(action, seat)
        self._legal = None

    # -- set-up [D2], pile swap V5 [D15], sabotage V5b [D16]

    def _apply_setup(self, action: Action, seat: int) -> None:
        if not isinstance(action, ChooseUp):
            raise IllegalActionError(f"during set-up the only action is 'choose_up', not '{_kind(action)}'")
        if not 0 <= seat < self.n:
            raise IllegalActionError(f"there is no seat {seat}")
        if seat in self.dq_order:
            raise IllegalActionError(f"seat {seat} is disqualified")
        if self.chosen[seat]:
            raise IllegalActionError(f"seat {seat} has chosen its 3UP cards already")
        cards = _parse_cards(action.cards)
        if len(cards) != 3:
            raise MalformedActionError(f"choose_up takes exactly 3 cards, got {len(cards)}")
        hand = self.hands[seat]
        _require_in(cards, hand, "of the 6 cards dealt to you")
        for c in cards:
            hand.remove(c)
        self.up[seat] = cards
        self.chosen[seat] = True
        self._legal = None
        if all(self.chosen[i] or i in self.dq_order for i in range(self.n)):
            self._end_setup()

    def _end_setup(self) -> None:
        for i in range(self.n):
            if i not in self.dq_order:
                self.events.append(ChoseUp(i, tuple(self.up[i])))
        pair = self.swap_pair
        if pair is not None and self.active(pair[0]) and self.active(pair[1]):
            a, b = pair
            self.up[a], self.up[b] = self.up[b], self.up[a]
            self.down[a], self.down[b] = self.down[b], self.down[a]
            self.events.append(PileSwapped(a, b))
        self.swap_pair = None
        if self.rules.sabotage:
            self.phase = SABOTAGE
            self.current = -1
            self._next_saboteur()
        else:
            self._start_play()

    def _next_saboteur(self) -> None:
        for i in range(self.current + 1, self.n):
            if self.active(i):
                self.current = i
                return
        self._start_play()

    def _start_play(self) -> None:
        self.phase = PLAY
        self.turn = 1
        # [D3] seat 0 starts (the first seat still in, should seat 0 be gone).
        self.current = next(i for i in range(self.n) if self.active(i))
        self._begin_action(True)

    def _apply_sabotage(self, action: Action, seat: int) -> None:
        if isinstance(action, Pass):
            self.events.append(Passed(seat))
        elif isinstance(action, Swap):
            t = action.target
            if t is None or not 0 <= t < self.n or t == seat:
                raise MalformedActionError("a sabotage swap names the 'target' seat whose 3UP card you take")
            if not self.active(t):
                raise IllegalActionError(f"seat {t} is no longer in the game")
            self._swap(seat, t, action)
        else:
            raise IllegalActionError(f"sabotage (V5b) asks for 'swap' or 'pass', not '{_kind(action)}'")
        self._next_saboteur()

    def _swap(self, seat: int, target: int, action: Swap) -> None:
        give = _parse_card(action.give)
        take = _parse_card(action.take)
        if give not in self.hands[seat]:
            raise IllegalActionError(f"'give' {action.give} is not in your hand")
        ups = self.up[target]
        if take not in ups:
            whose = "your" if target == seat else f"seat {target}'s"
            raise IllegalActionError(f"'take' {action.take} is not among {whose} 3UP cards")
        self.hands[seat].remove(give)
        _forget(self.known[seat], give)
        ups[ups.index(take)] = give
        self.hands[seat].append(take)
        self.known[seat].append(take)
        self.events.append(Swapped(seat, give, take, target))

    # -- the colour run V6 [D17]

    def _apply_colour_run(self, action: Action, seat: int) -> None:
        if isinstance(action, Pass):
            self.events.append(Passed(seat))
        elif isinstance(action, Swap):
            if action.target is not None and action.target != seat:
                raise IllegalActionError("the colour-run swap is with your own 3UP cards")
            self._swap(seat, seat, action)
        else:
            raise IllegalActionError(f"a colour run (V6) asks for 'swap' or 'pass', not '{_kind(action)}'")
        self.pending_swap = False
        self._continue(seat)

    # -- play, flip, pick up, draw (RULES §4–§5)

    def _apply_play(self, action: Play, seat: int) -> None:
        interned = _PLAY_INTS.get(id(action))
        if interned is not None:
            cards: tuple[int, ...] = interned
        elif not action.cards:
            raise MalformedActionError("'play' needs at least one card")
        else:
            cards = tuple(_parse_cards(action.cards))
        source = self.hands[seat] or self._play_source(seat)
        if source is None:
            self._play_source_error(seat)
        hand = self.hands[seat]
        if len(cards) == 1:
            if cards[0] not in source:
                _require_in(cards, source, "in your hand" if source is hand else "in your 3UP cards")
        else:
            r = cards[0] >> 3
            for c in cards:
                if c >> 3 != r:
                    raise IllegalActionError(
                        f"cards played together must share one rank: {', '.join(action.cards)}"
                    )
            if _alone(r):
                raise IllegalActionError(f"a Clear card is played alone [D5]: {', '.join(action.cards)}")
            _require_in(cards, source, "in your hand" if source is hand else "in your 3UP cards")
        pile = self.pile
        if pile and cards[0] < _FLOOR[pile[-1]]:
            raise IllegalActionError(
                f"{action.cards[0]} is lower than the top of the pile, {C.STR[pile[-1]]}"
            )
        # Legal: from here on nothing raises.
        for c in cards:
            source.remove(c)
        if source is hand:
            known = self.known[seat]
            if known:
                for c in cards:
                    if c in known:
                        known.remove(c)
        if self.extras:
            self.extras.pop()
            self.drew = False
        self.events.append(Played(seat, cards))
        self._played(seat, cards)

    def _play_source_error(self, seat: int) -> NoReturn:
        if any(c != GONE for c in self.down[seat]):
            raise IllegalActionError("your hand and 3UP cards are empty: flip a 3DOWN card")
        raise IllegalActionError("you hold no cards")

    def _apply_flip(self, action: Flip, seat: int) -> None:
        slot = action.slot
        if not isinstance(slot, int) or not 0 <= slot <= 2:
            raise MalformedActionError(f"a 3DOWN slot is 0, 1 or 2, not {slot!r}")
        src = self.source(seat)
        if src != DOWN:
            where = "hand" if src == HAND else "3UP cards"
            raise IllegalActionError(
                f"you may flip only once your hand and 3UP cards are empty; play from your {where}"
            )
        down = self.down[seat]
        card = down[slot]
        if card == GONE:
            raise IllegalActionError(f"3DOWN slot {slot} has been played already")
        down[slot] = GONE
        self._consume_extra()
        pile = self.pile
        if not pile or card >= _FLOOR[pile[-1]]:
            self.events.append(Flipped(seat, slot, card))
            self._played(seat, [card])
            return
        # Failed flip: pick up the pile and the card; the card stays secret [D6].
        seq = len(self.events)
        self.events.append(Flipped(seat, slot, None))
        self.private[seq] = (card,)
        self._pickup(seat)
        self.hands[seat].append(card)
        self._end_turn()

    def _apply_pickup(self, seat: int) -> None:
        if _PICKUP not in (self._legal or self.legal_actions()):
            if self.source(seat) == DOWN:
                raise IllegalActionError("you may not pick up: flip a 3DOWN card")
            raise IllegalActionError("you may not pick up while you have a legal play (must play if you can)")
        self._consume_extra()
        self._pickup(seat)
        self._end_turn()

    def _apply_draw(self, seat: int) -> None:
        refusal = self._draw_refusal()
        if refusal is not None:
            raise IllegalActionError(refusal)
        self.hands[seat].append(self.draw.pop())
        self.events.append(_DREW[seat][1])
        if self.extras:
            self.drew = True  # [D10] this extra action's draw
        else:
            self._end_turn()  # V2: instead of playing; the turn ends

    # ------------------------------------------------------------ mechanics

    def _consume_extra(self) -> None:
        if self.extras:
            self.extras.pop()
            self.drew = False

    def _pickup(self, seat: int) -> None:
        pile = self.pile
        self.hands[seat] += pile
        self.known[seat] += pile
        self.events.append(PickedUp(seat, len(pile)))
        self.pile = []

    def _played(self, seat: int, cards: Sequence[int]) -> None:
        """Consequences of cards reaching the pile (RULES §5, V3, V6)."""
        pile = self.pile
        pile += cards
        r = cards[0] >> 3
        ends = False
        if r >= _CLEAR:
            self.cleared += pile
            self.pile = []
            if r == _CLEAR:
                self.events.append(Cleared(seat, "clear"))
                ends = True
            elif r == _CLEAR1:
                self.events.append(Cleared(seat, "clear+1"))
                self.extras.append(True)  # [D9] extra actions add up
            else:
                self.events.append(Cleared(seat, "clear+2"))
                # A stack: the first extra action is popped first. V8: no draw
                # before the second extra action of a Clear+2.
                self.extras += [not self._one_draw_per_clear2, True]
        else:
            if self._reverses and r == REVERSE_RANK:
                self.direction = -self.direction  # [D13] once per play
                self.events.append(Reversed(seat))
            if len(pile) >= 3 and pile[-2] >> 3 == r and pile[-3] >> 3 == r:
                # Three of a kind clears like a Clear and ends the turn [D8].
                self.cleared += pile
                self.pile = []
                self.events.append(Cleared(seat, "three"))
                ends = True
            elif (
                self._colour_run
                and len(pile) >= 4
                and (pile[-1] & 7) == (pile[-2] & 7) == (pile[-3] & 7) == (pile[-4] & 7)
                and self.hands[seat]
                and self.up[seat]
            ):
                self.pending_swap = True  # [D17] may swap, or decline
                return
        if not self.hands[seat] and not self.up[seat] and self.down[seat] == _ALL_GONE:
            self._goes_out(seat)
        elif ends or not self.extras:
            self._end_turn()
        else:
            self._begin_action(False)

    def _continue(self, seat: int) -> None:
        """After an action that did not end the turn: the next extra action, or
        the end of the turn."""
        if self.extras:
            self._begin_action(False)
        else:
            self._end_turn()

    def _begin_action(self, turn_start: bool) -> None:
        """[D4] and §5: a player with an empty hand draws before acting while
        the draw pile has cards: up to 3 at a turn's start, 1 for an extra action."""
        seat = self.current
        self._legal = None
        if not self.hands[seat] and self.draw:
            want = 3 if turn_start else 1
            hand = self.hands[seat]
            draw = self.draw
            k = 0
            while k < want and draw:
                hand.append(draw.pop())
                k += 1
            self.events.append(_DREW[seat][k])
            if not turn_start:
                self.drew = True  # the automatic draw is this extra action's draw

    def _end_turn(self) -> None:
        seat = self.current
        if self.extras:
            self.extras.clear()
        self.drew = False
        self.pending_swap = False
        self._legal = None
        hand = self.hands[seat]
        draw = self.draw
        if len(hand) < 3 and draw and self.alive[seat]:
            k = min(3 - len(hand), len(draw))
            hand += draw[: -k - 1 : -1]  # from the top (the end) down
            del draw[-k:]
            self.events.append(_DREW[seat][k])
        if self.phase == OVER:
            return
        if self.turn >= self.rules.turn_limit:
            self._adjudicate()
            return
        self.turn += 1
        n = self.n
        d = self.direction
        alive = self.alive
        i = (seat + d) % n
        while not alive[i]:
            i = (i + d) % n
        self.current = i
        if not self.hands[i] and draw:
            self._begin_action(True)

    def _goes_out(self, seat: int) -> None:
        self.out_order.append(seat)
        self.alive[seat] = False
        place = len(self.out_order)
        self.events.append(WentOut(seat, place))
        remaining = [i for i in range(self.n) if self.active(i)]
        if not self._play_for_places or len(remaining) <= 1:
            # [D11] the first out wins; the others share the next place (with V1
            # the last one left takes it alone).
            self._finish()
            return
        self.extras.clear()  # going out with extra actions owed simply stops
        self._end_turn()

    def _adjudicate(self) -> None:
        """[D12] the turn limit: rank the players still in by penalty points."""
        self.adjudicated = True
        self._finish()

    def _finish(self) -> None:
        n = self.n
        places = [0] * n
        for k, seat in enumerate(self.out_order):
            places[seat] = k + 1
        still = [i for i in range(n) if self.active(i)]
        base = len(self.out_order) + 1
        if self.adjudicated:
            pts = {i: self.points(i) for i in still}
            for i in still:
                places[i] = base + sum(1 for j in still if pts[j] < pts[i])
        else:
            for i in still:
                places[i] = base
        # Disqualified seats rank below everyone else; the later a seat was
        # disqualified, the better its place among them.
        ndq = len(self.dq_order)
        playing = n - ndq
        for k, seat in enumerate(self.dq_order):
            places[seat] = playing + ndq - k
        self.places = places
        self.phase = OVER
        self.extras.clear()
        self.pending_swap = False
        self._legal = None
        self.events.append(Ended(self.adjudicated))

    # ------------------------------------------------------ referee's powers

    def disqualify(self, seat: int, reason: str = "") -> None:
        """Put ``seat`` out of the game at once (RULES §7): its cards leave face
        down, it ranks below every seat not disqualified."""
        if self.phase == OVER or not self.active(seat):
            return
        self.dq_points[seat] = self.points(seat)
        self.dq_order.append(seat)
        self.alive[seat] = False
        self.removed += self.hands[seat]
        self.removed += self.up[seat]
        self.removed += [c for c in self.down[seat] if c != GONE]
        self.hands[seat] = []
        self.up[seat] = []
        self.down[seat] = [GONE, GONE, GONE]
        self.known[seat] = []
        self._legal = None
        self.events.append(Disqualified(seat, reason or None))
        remaining = [i for i in range(self.n) if self.active(i)]
        if len(remaining) <= 1:
            self._finish()
            return
        if self.phase == SETUP:
            if all(self.chosen[i] or i in self.dq_order for i in range(self.n)):
                self._end_setup()
        elif self.phase == SABOTAGE:
            if seat == self.current:
                self._next_saboteur()
        elif seat == self.current:
            self.extras.clear()
            self.pending_swap = False
            self._end_turn()

    def note_fault(self, seat: int, kind: str, detail: str = "") -> None:
        """Record a bot's fault in the public event log (the referee's policy
        decides what it costs)."""
        self.events.append(Faulted(seat, kind, detail or None))


# ---------------------------------------------------------------- helpers


def _kind(action: object) -> str:
    cfg = getattr(type(action), "__struct_config__", None)
    tag = getattr(cfg, "tag", None)
    return tag if isinstance(tag, str) else type(action).__name__


def _parse_card(s: object) -> int:
    c = C.INT.get(s) if isinstance(s, str) else None
    if c is None:
        raise MalformedActionError(
            f"{s!r} is not a card: write a rank 1-10 and a colour letter of ROYGBIV ('7R'), or C, C+1, C+2"
        )
    return c


def _parse_cards(strs: Sequence[object]) -> list[int]:
    get = C.INT.get
    out: list[int] = []
    for s in strs:
        c = get(s) if isinstance(s, str) else None
        if c is None:
            _parse_card(s)
        else:
            out.append(c)
    return out


def _require_in(cards: Sequence[int], source: list[int], where: str) -> None:
    if len(cards) == 1:
        if cards[0] in source:
            return
    else:
        pool = source[:]
        try:
            for c in cards:
                pool.remove(c)
            return
        except ValueError:
            pass
    missing = list(cards)
    for c in source:
        if c in missing:
            missing.remove(c)
    raise IllegalActionError(
        f"{', '.join(C.STR[c] for c in missing)} not {where}"
        if len(missing) > 1
        else f"{C.STR[missing[0]]} is not {where}"
    )


def _forget(known: list[int], card: int) -> None:
    if card in known:
        known.remove(card)
