"""Card sense shared by the sample bots.

Everything here works on the wire vocabulary (:mod:`protocol`: card strings,
action Structs, the ``State`` view), so it needs no engine:

- card helpers: :func:`rank`, :func:`is_clear`;
- the greedy choices: :func:`highest_up_index` (3UP = the 3 highest cards) and
  :func:`lowest_play_index` (the lowest legal play, Clears only when nothing
  else will do);
- :class:`Tracker`: one game's public history as one seat saw it — the pile
  replayed from the events, what each opponent was forced to pick up on (so
  what its unknown cards cannot beat), the cards still unseen;
- :class:`Tactics`: the tactician's decisions (3UP choice, plays, Clears, the
  optional draw, the V6 swap, V5b sabotage), which the searcher also uses as
  its fallback and to short-list its set-up candidates;
- :class:`GameMemory`: per-seat state keyed by ``game_id`` and seat (rules
  from ``/start``, the tracker), a :class:`~sample_bots.sdk.SeatMemory`.

The weights in :class:`Params` were chosen by measurement with
``benchmarks/strength.py`` against greedy over 4,000 games each: the 3
highest cards as 3UP did better than the other splits tried; playing every
copy of a rank is worth ~7 points of win rate, keeping Clear+1/+2 for last ~5,
the attack on a player likely to pick up ~3, the free draw ~1.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from protocol import (
    CLEAR_RANKS,
    Action,
    ChooseUp,
    Draw,
    Flip,
    Pass,
    Pickup,
    Play,
    Rules,
    State,
    Swap,
    card_rank,
)

from .sdk import SeatMemory

__all__ = [
    "CLEAR",
    "CLEAR1",
    "CLEAR2",
    "Game",
    "GameMemory",
    "Params",
    "Tactics",
    "Tracker",
    "beats",
    "equivalent_flips",
    "finishes",
    "highest_up_index",
    "index_of",
    "is_clear",
    "lowest_play_index",
    "next_seat",
    "rank",
    "setup_score",
]

CLEAR: Final = CLEAR_RANKS["C"]
CLEAR1: Final = CLEAR_RANKS["C+1"]
CLEAR2: Final = CLEAR_RANKS["C+2"]

#: 1..10 for a number card, 11/12/13 for C/C+1/C+2.
rank = card_rank


def is_clear(card: str) -> bool:
    return card_rank(card) >= CLEAR


def beats(card_rank_: int, top: int) -> bool:
    """Whether a card of this rank may be played on a pile whose top has rank ``top`` (0: empty)."""
    return card_rank_ >= CLEAR or card_rank_ >= top


def index_of(legal: Sequence[Action], action: Action) -> int:
    """The index of ``action`` in ``legal`` (0 if absent)."""
    for i, a in enumerate(legal):
        if a == action:
            return i
    return 0


# ------------------------------------------------------------------ greedy


def highest_up_index(legal: Sequence[Action]) -> int:
    """Among ``choose_up`` actions, the one laying the 3 highest cards (Clears highest)."""
    best, best_key = 0, (-1, -1)
    for i, a in enumerate(legal):
        if isinstance(a, ChooseUp):
            ranks = sorted((rank(c) for c in a.cards), reverse=True)
            key = (sum(ranks), ranks[0])
            if key > best_key:
                best, best_key = i, key
    return best


def lowest_play_index(legal: Sequence[Action]) -> int:
    """The greedy choice: the lowest number card (one card), else the lowest Clear
    (a plain Clear before a Clear+1 before a Clear+2), else the first flip, else
    pick up; at set-up the 3 highest cards as 3UP; never the optional draw; pass
    on any swap."""
    if isinstance(legal[0], ChooseUp):
        return highest_up_index(legal)
    best, best_key = -1, (99, 99)
    fallback = -1
    for i, a in enumerate(legal):
        if isinstance(a, Play):
            key = (rank(a.cards[0]), len(a.cards))
            if key < best_key:
                best, best_key = i, key
        elif isinstance(a, (Flip, Pickup, Pass)) and fallback < 0:
            fallback = i
    if best >= 0:
        return best
    if fallback >= 0:
        return fallback
    return 0


# ----------------------------------------------------------------- tracker


class Tracker:
    """One game's public history, as seen by one seat, rebuilt from the events.

    Call :meth:`update` with each request's ``state``. It replays the events
    it has not seen (by ``seq``) to follow the discard pile, and records for
    each seat the rank its unknown hand cards are all below: a player that
    picks up without a failed flip had no legal play, so none of its cards
    could beat the top of the pile, nor was a Clear. The bound holds until the
    player draws.
    """

    def __init__(self, seat: int, rules: Rules | None = None) -> None:
        self.seat = seat
        self.deck: Counter[str] = Counter((rules or Rules()).resolved_deck().cards())
        self.next_seq = 0
        self.pile: list[str] = []
        #: seat -> every unknown card in that seat's hand ranks below this.
        self.cap: dict[int, int] = {}
        self._failed_flip: int | None = None  # seat whose last event was a failed flip

    def update(self, state: State) -> None:
        for ev in state.events:
            if ev.seq < self.next_seq:
                continue
            self.next_seq = ev.seq + 1
            kind = ev.type
            if kind == "play" and ev.cards:
                self.pile.extend(ev.cards)
            elif kind == "flip":
                if ev.cards and not self._flip_failed(ev.cards[0]):
                    self.pile.extend(ev.cards)
                else:
                    self._failed_flip = ev.seat
                    continue
            elif kind == "pickup":
                if self._failed_flip != ev.seat and self.pile and ev.seat != self.seat:
                    top = rank(self.pile[-1])
                    self.cap[ev.seat] = min(self.cap.get(ev.seat, top), top)
                self.pile = []
            elif kind == "clear":
                self.pile = []
            elif kind in ("draw", "swap", "pile_swap", "out", "disqualified"):
                self.cap.pop(ev.seat, None)
                if kind == "pile_swap" and ev.target is not None:
                    self.cap.pop(ev.target, None)
            self._failed_flip = None
        if self.pile != state.pile:  # missed events: trust the view
            self.pile = list(state.pile)

    def _flip_failed(self, card: str) -> bool:
        """For our own flips the view shows the card even when it failed."""
        if not self.pile:
            return False
        return not beats(rank(card), rank(self.pile[-1]))

    def unseen(self, state: State) -> Counter[str]:
        """Cards this seat cannot place: the draw pile, every 3DOWN card, the
        unknown part of the others' hands, cards removed face down."""
        pool = self.deck.copy()
        seen: list[str] = [*state.you.hand, *state.you.up, *state.pile, *state.cleared]
        for p in state.players:
            if p.seat != self.seat:
                seen += p.up
                seen += p.known
        pool.subtract(seen)
        return +pool  # drop zero and negative counts (a view that does not fit the deck)

    def opponent_cannot_beat(self, state: State, seat: int, top: int, pool: Counter[str]) -> float:
        """Probability that ``seat`` has no card that may be played on a pile
        topped by rank ``top`` (its next action is then a pick-up)."""
        if top <= 1:
            return 0.0
        p = state.players[seat]
        if p.out:
            return 0.0
        if p.hand_count == 0 and state.draw_count == 0:
            if p.up:
                return 0.0 if any(beats(rank(c), top) for c in p.up) else 1.0
            if p.down_count == 0:
                return 0.0
            total = sum(pool.values())
            if total == 0:
                return 0.0
            low = sum(n for c, n in pool.items() if rank(c) < top)
            return low / total  # one blind flip
        if any(beats(rank(c), top) for c in p.known):
            return 0.0
        unknown = p.hand_count - len(p.known)
        if p.hand_count == 0:
            unknown = min(3, state.draw_count)
        if unknown <= 0:
            return 1.0
        cap = self.cap.get(seat)
        if cap is not None:
            if top >= cap:
                return 1.0
            total = sum(n for c, n in pool.items() if rank(c) < cap)
        else:
            total = sum(pool.values())
        low = sum(n for c, n in pool.items() if rank(c) < top)
        if total <= 0:
            return 0.0
        prob = 1.0
        for i in range(unknown):
            if low - i <= 0:
                return 0.0
            prob *= (low - i) / max(1, total - i)
        return prob


def finishes(hand: Sequence[str], up: Sequence[str], extras: int) -> bool:
    """Whether ``extras`` extra actions on an empty pile, with an empty draw pile
    and no 3DOWN card left, can get rid of ``hand`` and then ``up``: each plays
    a Clear+1/+2 if there is one, else every copy of the lowest rank that may
    go on the pile, else a plain Clear."""
    ranks = [sorted(rank(c) for c in hand), sorted(rank(c) for c in up)]
    top = 0
    while extras > 0:
        extras -= 1
        src = ranks[0] if ranks[0] else ranks[1]
        if not src:
            return True
        # A Clear+1/+2 first (it gives its action back), then the lowest
        # number that may be played, a plain Clear (it ends the turn) last.
        plus = [x for x in src if x > CLEAR]
        numbers = [x for x in src if x < CLEAR and x >= top]
        if plus:
            r = plus[0]
        elif numbers:
            r = numbers[0]
        elif CLEAR in src:
            r = CLEAR
        else:
            return False
        if r >= CLEAR:
            src.remove(r)
            top = 0
            if r == CLEAR:
                return not ranks[0] and not ranks[1]
            extras += r - CLEAR
            continue
        k = src.count(r)
        del src[src.index(r) : src.index(r) + k]
        top = r
        if k >= 3:  # three of a kind clears and ends the turn
            return not ranks[0] and not ranks[1]
    return not ranks[0] and not ranks[1]


def next_seat(state: State, seat: int) -> int:
    """The next seat still playing after ``seat`` in the direction of play."""
    n = len(state.players)
    i = (seat + state.direction) % n
    for _ in range(n):
        if not state.players[i].out:
            return i
        i = (i + state.direction) % n
    return seat


# ----------------------------------------------------------------- tactics


@dataclass(frozen=True)
class Params:
    """Weights of the tactician's choices (tuned against greedy with the strength harness)."""

    #: 3UP: value of a card in 3UP by rank (index 0 unused; 11-13: C, C+1, C+2).
    up_value: tuple[float, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)
    #: 3UP: value of a card kept in hand by rank.
    hand_value: tuple[float, ...] = (0,) * 14
    #: 3UP: bonus for two 3UP cards of one rank (they go together).
    up_pair: float = 1.5
    #: 3UP: bonus for three 3UP cards of one rank (they clear the pile at once).
    up_triple: float = 4.0
    #: Play: worth of an expected card the next player picks up.
    pickup_gain: float = 1.0
    #: Play: cost of playing a higher rank than the lowest legal one, per rank.
    rank_cost: float = 0.6
    #: Play: only attack when the next player fails with at least this chance.
    attack_min_p: float = 0.35
    #: Play every copy of the chosen rank (False: one card).
    multiples: bool = True
    #: Take the draw before an extra action when it is free.
    draw_free: bool = True
    #: When a Clear is needed: the plain one first (False: Clear+1/+2 first).
    save_plus: bool = True


#: How much a card picked up with the pile burdens the player who takes it, by
#: rank: low cards are hard to get rid of, high ones are weapons.
_BURDEN: Final = (0, 1.0, 1.0, 0.95, 0.9, 0.85, 0.75, 0.65, 0.5, 0.4, 0.3, 0, 0, 0)

#: Value of a card in hand for deciding swaps, by rank.
_HOLD: Final = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16)


def setup_score(up: Sequence[str], hand: Sequence[str], params: Params) -> float:
    """How good a split of the 6 dealt cards into 3UP and hand is (higher is better)."""
    score = sum(params.up_value[rank(c)] for c in up)
    score += sum(params.hand_value[rank(c)] for c in hand)
    counts = Counter(rank(c) for c in up if not is_clear(c))
    for n in counts.values():
        if n == 2:
            score += params.up_pair
        elif n >= 3:
            score += params.up_triple
    return score


class Tactics:
    """The tactician's decisions for one request, given the game's :class:`Tracker`."""

    def __init__(self, params: Params | None = None) -> None:
        self.params = params or Params()

    # -- entry point

    def choose(self, state: State, legal: Sequence[Action], tracker: Tracker) -> int:
        first = legal[0]
        if len(legal) == 1:
            return 0
        if isinstance(first, ChooseUp):
            return self.choose_up(state, legal)
        if any(isinstance(a, Swap) for a in legal):
            if state.phase == "sabotage":
                return self.sabotage(state, legal)
            return self.colour_run(state, legal)
        if equivalent_flips(legal):
            return 0  # 3DOWN slots are all alike: nobody knows them
        if any(isinstance(a, Draw) for a in legal) and self.wants_draw(state, legal):
            return next(i for i, a in enumerate(legal) if isinstance(a, Draw))
        return self.play(state, legal, tracker)  # play() passes over the draw

    # -- set-up

    def choose_up(self, state: State, legal: Sequence[Action]) -> int:
        return self.rank_choose_up(state, legal)[0]

    def rank_choose_up(self, state: State, legal: Sequence[Action]) -> list[int]:
        """Indices of the ``choose_up`` actions, best first."""
        dealt = list(state.you.hand) + list(state.you.up)
        scored: list[tuple[float, int]] = []
        for i, a in enumerate(legal):
            if not isinstance(a, ChooseUp):
                continue
            hand = list(dealt)
            for c in a.cards:
                hand.remove(c)
            scored.append((setup_score(a.cards, hand, self.params), i))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [i for _, i in scored]

    # -- the swaps

    def colour_run(self, state: State, legal: Sequence[Action]) -> int:
        """V6: swap a hand card into 3UP when it makes the split clearly better."""
        hand, up = list(state.you.hand), list(state.you.up)
        base = setup_score(up, hand, self.params)
        best, best_gain = index_of(legal, Pass()), 1.0
        for i, a in enumerate(legal):
            if isinstance(a, Swap):
                h, u = hand[:], up[:]
                h.remove(a.give)
                u[u.index(a.take)] = a.give
                h.append(a.take)
                gain = setup_score(u, h, self.params) - base
                if gain > best_gain:
                    best, best_gain = i, gain
        return best

    def sabotage(self, state: State, legal: Sequence[Action]) -> int:
        """V5b: give my weakest hand card for an opponent's strongest 3UP card."""
        best, best_gain = index_of(legal, Pass()), 0.0
        for i, a in enumerate(legal):
            if isinstance(a, Swap):
                gain = _HOLD[rank(a.take)] - _HOLD[rank(a.give)]
                if gain > best_gain:
                    best, best_gain = i, gain
        return best

    # -- the draw before an extra action

    def wants_draw(self, state: State, legal: Sequence[Action]) -> bool:
        """Draw when it costs nothing: a hand of 3 or fewer is topped up to 3 at
        the end of the turn anyway, so the drawn card is free and widens the
        choice. With a bigger hand the card would be one more to get rid of,
        unless nothing but a Clear can be played otherwise."""
        if state.draw_count == 0 or not self.params.draw_free:
            return False
        hand = state.you.hand
        if len(hand) <= 3:
            return True
        top = rank(state.pile[-1]) if state.pile else 0
        return not any(rank(c) < CLEAR and rank(c) >= top for c in hand)

    # -- plays

    def play(self, state: State, legal: Sequence[Action], tracker: Tracker) -> int:
        plays = [(i, a) for i, a in enumerate(legal) if isinstance(a, Play)]
        if not plays:
            for i, a in enumerate(legal):
                if isinstance(a, (Flip, Pickup)):
                    return i
            return 0
        numbers = [(i, a) for i, a in plays if not is_clear(a.cards[0])]
        clears = [(i, a) for i, a in plays if is_clear(a.cards[0])]
        held = len(state.you.hand) + len(state.you.up) + len(state.you.down)
        # Go out when a play empties every card I hold.
        for i, a in plays:
            if len(a.cards) == held:
                return i
        if not numbers:
            return self.pick_clear(state, clears)
        return self.pick_number(state, numbers, clears, tracker)

    def pick_clear(self, state: State, clears: list[tuple[int, Play]]) -> int:
        """A Clear is needed: the plain one first, the +1/+2 saved — unless a
        Clear+1/+2 lets me go out with its extra actions."""
        by_rank = {rank(a.cards[0]): i for i, a in clears}
        you = state.you
        if state.draw_count == 0 and not you.down:
            for kind, card in ((CLEAR1, "C+1"), (CLEAR2, "C+2")):
                if kind in by_rank:
                    hand, up = list(you.hand), list(you.up)
                    (hand if hand else up).remove(card)
                    if finishes(hand, up, kind - CLEAR):
                        return by_rank[kind]
        order = (CLEAR, CLEAR1, CLEAR2) if self.params.save_plus else (CLEAR2, CLEAR1, CLEAR)
        for kind in order:
            if kind in by_rank:
                return by_rank[kind]
        return clears[0][0]

    def pick_number(
        self,
        state: State,
        numbers: list[tuple[int, Play]],
        clears: list[tuple[int, Play]],
        tracker: Tracker,
    ) -> int:
        """Lead low with every copy of the rank, unless a higher rank is likely
        to make the next player pick up a pile worth the card."""
        params = self.params
        # The biggest play of each rank (multiples: all copies at once).
        biggest: dict[int, tuple[int, Play]] = {}
        for i, a in numbers:
            r = rank(a.cards[0])
            if r not in biggest or (len(a.cards) > len(biggest[r][1].cards)) == params.multiples:
                biggest[r] = (i, a)
        ranks = sorted(biggest)
        low = ranks[0]
        opp = next_seat(state, state.you.seat)
        if opp == state.you.seat:
            return biggest[low][0]
        pool = tracker.unseen(state)
        pile = state.pile
        best_i, best_score = biggest[low][0], float("-inf")
        for r in ranks:
            i, a = biggest[r]
            k = len(a.cards)
            clears_pile = k >= 3 or (
                len(pile) >= 3 - k and all(rank(c) == r for c in pile[len(pile) - (3 - k) :])
            )
            if clears_pile:
                p_fail, burden = 0.0, 0.0
            else:
                p_fail = tracker.opponent_cannot_beat(state, opp, r, pool)
                burden = sum(_BURDEN[rank(c)] for c in pile) + _BURDEN[r] * k
            gain = params.pickup_gain * p_fail * burden if p_fail >= params.attack_min_p else 0.0
            score = gain - params.rank_cost * (r - low) + 0.01 * k
            if score > best_score:
                best_i, best_score = i, score
        return best_i


# ------------------------------------------------------------ per-game memory


@dataclass
class Game:
    """What a bot remembers about one game: its rules (from ``/start``) and its :class:`Tracker`."""

    rules: Rules
    tracker: Tracker
    started: bool  # False: no /start was seen, the rules are the defaults
    #: A bot's own per-game random stream (the searcher's worlds), made on first use.
    rng: random.Random | None = None


class GameMemory(SeatMemory[Game]):
    """Each seat's :class:`Game`, keyed by ``game_id`` and seat (one
    :class:`Tracker` per seat: a service may hold several seats of one game):
    filled by ``on_start``, dropped by ``on_end``; a seat whose ``/start`` was
    missed gets the default rules."""

    def start(self, game_id: str, seat: int, rules: Rules) -> Game:
        return self.put(game_id, seat, Game(rules, Tracker(seat, rules), True))

    def get(self, game_id: str, seat: int) -> Game:
        game = super().get(game_id, seat)
        if game is None:
            game = self.start(game_id, seat, Rules())
            game.started = False
        return game


def equivalent_flips(legal: Iterable[Action]) -> bool:
    """Whether every action is a 3DOWN flip (the slots are alike: nobody knows them)."""
    return all(isinstance(a, Flip) for a in legal)
