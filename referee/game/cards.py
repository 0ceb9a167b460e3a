"""Card encoding for the engine.

Inside the engine a card is a small int: ``rank << 3 | colour``. Number cards
have rank 1..10 and colour 0..6 (R O Y G B I V); the three Clear kinds have rank
11 (``C``), 12 (``C+1``) and 13 (``C+2``) and colour 7 (no colour). Ints keep the
inner loop cheap; the wire strings of PROTOCOL.md ("7R", "C+1") are produced and
parsed only at the boundary, by table look-up.
"""

from __future__ import annotations

from protocol.cards import COLOURS
from protocol.messages import Deck

CLEAR: int = 11
CLEAR1: int = 12
CLEAR2: int = 13
NO_COLOUR: int = 7

#: Penalty points of a card by rank (RULES V4 [D14], also used by [D12]).
POINTS: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25)


def make(rank: int, colour: int = NO_COLOUR) -> int:
    return rank << 3 | colour


def rank(card: int) -> int:
    return card >> 3


def colour(card: int) -> int:
    return card & 7


def _string(card: int) -> str:
    r = card >> 3
    if r == CLEAR:
        return "C"
    if r == CLEAR1:
        return "C+1"
    if r == CLEAR2:
        return "C+2"
    return f"{r}{COLOURS[card & 7]}"


#: Every encodable card and its wire string.
_ALL: list[int] = [make(r, c) for r in range(1, 11) for c in range(7)] + [
    make(CLEAR),
    make(CLEAR1),
    make(CLEAR2),
]
#: Wire string of a card int (indexable by the int).
STR: list[str] = [""] * (make(CLEAR2) + 1)
#: Card int of a wire string.
INT: dict[str, int] = {}
for _c in _ALL:
    STR[_c] = _string(_c)
    INT[STR[_c]] = _c
del _c


def to_str(cards: list[int]) -> list[str]:
    return [STR[c] for c in cards]


_DECKS: dict[Deck, tuple[int, ...]] = {}


def build_deck(deck: Deck) -> list[int]:
    """The full card list of a deck configuration, in a fixed order (RULES §1)."""
    cached = _DECKS.get(deck)
    if cached is None:
        cached = _DECKS[deck] = tuple(_build_deck(deck))
    return list(cached)


def _build_deck(deck: Deck) -> list[int]:
    cards: list[int] = []
    for letter in deck.colours:
        col = COLOURS.index(letter)
        for r in range(1, 11):
            cards.extend([make(r, col)] * deck.copies)
    cards.extend([make(CLEAR)] * deck.clear)
    cards.extend([make(CLEAR1)] * deck.clear_plus1)
    cards.extend([make(CLEAR2)] * deck.clear_plus2)
    return cards
