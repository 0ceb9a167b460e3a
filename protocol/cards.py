"""Card strings (PROTOCOL.md "Cards", RULES.md section 1).

A card is a string. Number cards are a rank ``1``..``10`` followed by one colour
letter of ``R O Y G B I V``: ``"7R"``, ``"10V"``. Clear cards are ``"C"``,
``"C+1"``, ``"C+2"``. Order: 1 < ... < 10 < every Clear; the three Clear kinds
get ranks 11, 12 and 13 here so that a single integer comparison orders any two
cards. A face-down card is never a string: 3DOWN cards are named by slot.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLEARS",
    "CLEAR_RANKS",
    "COLOURS",
    "MAX_NUMBER_RANK",
    "card_rank",
    "is_card",
    "parse_card",
]

#: The colour letters, in deck order: red, orange, yellow, green, blue, indigo,
#: violet.
COLOURS: Final = "ROYGBIV"

#: The Clear card strings: ``Clear``, ``Clear+1``, ``Clear+2``.
CLEARS: Final = ("C", "C+1", "C+2")

#: Highest rank of a number card.
MAX_NUMBER_RANK: Final = 10

#: Rank of each Clear kind (above every number card).
CLEAR_RANKS: Final[dict[str, int]] = {"C": 11, "C+1": 12, "C+2": 13}

# Every valid card string -> (rank, colour); 73 entries, so parsing is one
# dict lookup and only failures pay for a detailed message.
_CARDS: Final[dict[str, tuple[int, str | None]]] = {
    **{f"{rank}{colour}": (rank, colour) for rank in range(1, MAX_NUMBER_RANK + 1) for colour in COLOURS},
    **{clear: (rank, None) for clear, rank in CLEAR_RANKS.items()},
}


def _why_bad(s: object) -> str:
    """Explain why ``s`` is not a card string."""
    if not isinstance(s, str):
        return f"bad card {s!r}: a card is a string, got {type(s).__name__}"
    head = f"bad card {s!r}: "
    if not s:
        return head + "empty string"
    if s != s.strip():
        return head + "no blanks allowed around a card"
    if s.startswith("C"):
        return head + "a Clear card is exactly 'C', 'C+1' or 'C+2'"
    digits = s[:-1]
    colour = s[-1]
    if not digits:
        return head + "a number card is a rank 1..10 followed by a colour letter, e.g. '7R'"
    if not (digits.isascii() and digits.isdigit()):
        return head + (
            "a number card is a rank 1..10 followed by a colour letter, e.g. '7R' "
            "(Clear cards are 'C', 'C+1', 'C+2')"
        )
    if digits.startswith("0") or not 1 <= int(digits) <= MAX_NUMBER_RANK:
        return head + f"rank must be 1..10 without leading zeros, got {digits!r}"
    if colour.upper() in COLOURS and colour not in COLOURS:
        return head + f"colour letters are upper case: {colour.upper()!r}, not {colour!r}"
    return head + f"colour must be one of {' '.join(COLOURS)}, got {colour!r}"


def parse_card(s: str) -> tuple[int, str | None]:
    """Return ``(rank, colour)`` of a card string.

    Rank is 1..10 for number cards and 11, 12, 13 for ``C``, ``C+1``, ``C+2``;
    colour is the colour letter, or ``None`` for a Clear card.

    >>> parse_card("10V")
    (10, 'V')
    >>> parse_card("C+1")
    (12, None)

    Raises ``ValueError`` saying what is wrong for anything else (lower-case
    colours, leading zeros and surrounding blanks included).
    """
    try:
        return _CARDS[s]
    except (KeyError, TypeError):
        raise ValueError(_why_bad(s)) from None


def card_rank(s: str) -> int:
    """Rank of a card string (1..10, or 11/12/13 for C/C+1/C+2); ``ValueError`` if invalid."""
    return parse_card(s)[0]


def is_card(s: object) -> bool:
    """Whether ``s`` is a valid card string."""
    return isinstance(s, str) and s in _CARDS
