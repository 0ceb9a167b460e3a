"""Resampling from an information state (OpenSpiel's term).

:func:`resample` returns a full game state that one seat cannot tell apart from
the real one: every card that seat cannot see is dealt afresh, every card it
knows stays where it is. A search bot samples many such worlds and plays them
out; the leak tests use it to prove that :func:`view` shows nothing hidden.

What a seat knows: its own hand; every 3UP card; the pile and the cleared
cards; the cards other players were seen to pick up and have not played since
(``known``). What it does not: every 3DOWN card (its own included), the draw
pile, the rest of the others' hands, cards removed face down, and during
set-up the other players' 6 cards. Resampling keeps the counts and the known
cards exactly; it does not weigh worlds by what forced pick-ups hint at (a
player who picked up held nothing playable then) — every world it returns is
consistent with the seat's view, not each with its exact posterior weight.
"""

from __future__ import annotations

import random
from collections import Counter

from protocol.messages import Action, Draw, Rules, State

from . import cards as C
from .state import GONE, PHASE_NAMES, PLAY, SETUP, GameState, Phase


def resample(state: GameState, seat: int, rng: random.Random) -> GameState:
    """A copy of ``state`` with every card ``seat`` cannot see re-dealt."""
    s = state.copy()
    setup = s.phase == SETUP
    pool: list[int] = []
    unknown_in_hand = [0] * s.n
    for i in range(s.n):
        if i == seat:
            continue
        if setup:
            # The others' 6 cards, and whether they have chosen yet, are hidden.
            pool += s.hands[i]
            pool += s.up[i]
            unknown_in_hand[i] = len(s.hands[i]) + len(s.up[i])
            s.hands[i] = []
            s.up[i] = []
            if i not in s.dq_order:
                s.chosen[i] = False
            continue
        rest = s.hands[i][:]
        for c in s.known[i]:
            rest.remove(c)
        pool += rest
        unknown_in_hand[i] = len(rest)
        s.hands[i] = s.known[i][:]
    for i in range(s.n):
        pool += [c for c in s.down[i] if c != GONE]
    pool += s.draw
    pool += s.removed
    _deal_unknown(s, pool, unknown_in_hand, len(s.draw), len(s.removed), rng)
    # Hidden chance still to come is drawn afresh too (V5's pair).
    if s.swap_pair is not None:
        s.swap_pair = rng.sample(range(s.n), 2)
    # Other seats' private event details (their failed flips) are unknown.
    s.private = {q: v for q, v in s.private.items() if s.events[q].seat == seat}
    s._legal = None
    return s


def _deal_unknown(
    s: GameState,
    pool: list[int],
    unknown_in_hand: list[int],
    draw_count: int,
    removed_count: int,
    rng: random.Random,
) -> None:
    """Shuffle ``pool`` and deal it to the hidden places of ``s``: the unknown
    part of each hand, every live 3DOWN slot, the draw pile, the removed cards."""
    rng.shuffle(pool)
    for i in range(s.n):
        for _ in range(unknown_in_hand[i]):
            s.hands[i].append(pool.pop())
        s.down[i] = [pool.pop() if c != GONE else GONE for c in s.down[i]]
    s.draw = [pool.pop() for _ in range(draw_count)]
    s.removed = [pool.pop() for _ in range(removed_count)]
    if pool:
        raise ValueError(f"{len(pool)} cards of the deck are unaccounted for")


def from_view(
    state: State,
    rules: Rules,
    rng: random.Random,
    legal: list[Action] | None = None,
) -> GameState:
    """A full game state consistent with what one seat sees: its view
    (``ActRequest.state``) and the rules of the game (``GameStart.rules``).

    The search bot's entry point: a bot that receives only its view samples
    worlds with this and simulates them with the engine. Pass the request's
    ``legal`` list too, so the state knows whether the optional draw before an
    extra action was used. Raises ``ValueError`` when the view does not fit the
    rules' deck.
    """
    seat = state.you.seat
    names = [p.name for p in state.players]
    s = GameState._blank(rules, names)
    n = s.n
    deck = C.build_deck(rules.resolved_deck())
    s.deck = deck
    pool = Counter(deck)

    def take(strs: list[str], where: str) -> list[int]:
        out = []
        for x in strs:
            c = C.INT.get(x)
            if c is None or pool[c] <= 0:
                raise ValueError(f"{where}: {x!r} is not a card left in the rules' deck")
            pool[c] -= 1
            out.append(c)
        return out

    phase = Phase(PHASE_NAMES.index(state.phase)) if state.phase in PHASE_NAMES else PLAY
    setup = phase == SETUP
    s.phase = phase
    s.hands[seat] = take(state.you.hand, "your hand")
    s.pile = take(state.pile, "pile")
    s.cleared = take(state.cleared, "cleared")
    unknown_in_hand = [0] * n
    for p in state.players:
        i = p.seat
        s.up[i] = take(state.you.up if i == seat else p.up, f"seat {i}'s 3UP")
        slots = state.you.down if i == seat else (p.down or list(range(p.down_count)))
        # A placeholder card marks a live slot; _deal_unknown fills it.
        s.down[i] = [0 if slot in slots else GONE for slot in range(3)]
        if i != seat:
            s.known[i] = take(p.known, f"seat {i}'s known cards")
            s.hands[i] = s.known[i][:]
            unknown_in_hand[i] = p.hand_count - len(p.known)
        else:  # what the others know of this seat's hand: part of it
            s.known[i] = [C.INT[x] for x in p.known if x in C.INT]
        if p.disqualified:
            s.dq_order.append(i)
        elif p.out:
            s.out_order.append(i)
        s.alive[i] = not (p.disqualified or p.out)
    s.out_order.sort(key=lambda i: state.players[i].place or 0)
    s.chosen = [not setup or (i == seat and len(s.up[i]) == 3) for i in range(n)]
    s.current = state.current
    s.direction = state.direction
    s.turn = state.turn
    s.extras = [True] * state.extra_actions
    if legal is not None and state.extra_actions and state.draw_count:
        s.drew = not any(isinstance(a, Draw) for a in legal)
    s.pending_swap = state.pending == "swap"
    if setup and rules.pile_swap:
        s.swap_pair = rng.sample(range(n), 2)
    rest = list(pool.elements())
    _deal_unknown(s, rest, unknown_in_hand, state.draw_count, state.removed_count, rng)
    return s
