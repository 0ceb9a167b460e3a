"""Scripted positions: a game state laid out card by card.

For rule tests, the compliance check's scripted states, and bot authors who
want to test their bot on a chosen position::

    state = layout(hands=[["5R", "5G", "8B"], ["2R", "3R", "4R"]], pile=["5Y"])
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.messages import Rules

from . import cards as C
from .state import GONE, PLAY, GameState


def _ints(strs: Sequence[str], what: str) -> list[int]:
    out = []
    for s in strs:
        c = C.INT.get(s)
        if c is None:
            raise ValueError(f"{what}: {s!r} is not a card")
        out.append(c)
    return out


def layout(
    hands: Sequence[Sequence[str]],
    up: Sequence[Sequence[str]] | None = None,
    down: Sequence[Sequence[str | None]] | None = None,
    pile: Sequence[str] = (),
    draw: Sequence[str] = (),
    cleared: Sequence[str] = (),
    rules: Rules | None = None,
    current: int = 0,
    turn: int = 1,
    names: Sequence[str] | None = None,
) -> GameState:
    """A state in the play phase with exactly these cards.

    ``draw`` is listed top first. ``down`` slots may be ``None`` (played). The
    deck of the game is the cards laid out; the rules' deck is not checked.
    """
    n = len(hands)
    if not 2 <= n <= 6:
        raise ValueError(f"a game has 2 to 6 players, not {n}")
    rules = rules or Rules()
    up = up if up is not None else [[] for _ in range(n)]
    down = down if down is not None else [[None, None, None] for _ in range(n)]
    if len(up) != n or len(down) != n:
        raise ValueError("hands, up and down must list every seat")
    down_ints: list[list[int]] = []
    for i, d in enumerate(down):
        if len(d) != 3:
            raise ValueError(f"seat {i}: 3DOWN has 3 slots (None for a played one)")
        down_ints.append([GONE if c is None else _ints([c], f"down[{i}]")[0] for c in d])
    names = list(names) if names is not None else [f"seat{i}" for i in range(n)]
    draw_ints = _ints(draw, "draw")
    order = list(reversed(draw_ints))  # the top of the draw pile is the last element
    s = GameState._blank(rules, names)
    s.hands = [_ints(h, f"hands[{i}]") for i, h in enumerate(hands)]
    s.up = [_ints(u, f"up[{i}]") for i, u in enumerate(up)]
    s.down = down_ints
    s.draw = order
    s.pile = _ints(pile, "pile")
    s.cleared = _ints(cleared, "cleared")
    s.chosen = [True] * n
    s.phase = PLAY
    s.turn = turn
    s.current = current
    s.deck = s.all_cards()
    return s
