"""protocol.cards: card strings (PROTOCOL.md "Cards", RULES.md section 1)."""

from __future__ import annotations

import pytest

from protocol.cards import CLEARS, COLOURS, card_rank, is_card, parse_card


def test_constants() -> None:
    assert COLOURS == "ROYGBIV"
    assert CLEARS == ("C", "C+1", "C+2")


@pytest.mark.parametrize(
    ("card", "parsed"),
    [
        ("1R", (1, "R")),
        ("7R", (7, "R")),
        ("10V", (10, "V")),
        ("5I", (5, "I")),
        ("C", (11, None)),
        ("C+1", (12, None)),
        ("C+2", (13, None)),
    ],
)
def test_parse_card(card: str, parsed: tuple[int, str | None]) -> None:
    assert parse_card(card) == parsed
    assert card_rank(card) == parsed[0]
    assert is_card(card)


def test_every_number_card_and_order() -> None:
    cards = [f"{r}{c}" for r in range(1, 11) for c in COLOURS]
    assert all(is_card(c) for c in cards)
    # 1 < ... < 10 < every Clear
    assert max(card_rank(c) for c in cards) < min(card_rank(c) for c in CLEARS)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("", "empty"),
        ("7", "rank 1..10 followed by a colour"),
        ("R", "rank 1..10 followed by a colour"),
        ("0R", "rank must be 1..10"),
        ("11R", "rank must be 1..10"),
        ("07R", "leading zeros"),
        ("7X", "colour must be one of R O Y G B I V"),
        ("7r", "upper case"),
        ("C+3", "'C', 'C+1' or 'C+2'"),
        ("Clear", "'C', 'C+1' or 'C+2'"),
        (" 7R", "no blanks"),
        ("7R ", "no blanks"),
        ("7 R", "rank 1..10 followed by a colour letter"),
        ("+7R", "rank 1..10"),
        ("½R", "rank 1..10"),
    ],
)
def test_bad_cards(bad: str, words: str) -> None:
    with pytest.raises(ValueError, match="bad card") as info:
        parse_card(bad)
    assert words in str(info.value)
    assert repr(bad) in str(info.value)
    assert not is_card(bad)
    with pytest.raises(ValueError):
        card_rank(bad)


@pytest.mark.parametrize("bad", [None, 7, ["7R"], b"7R"])
def test_not_a_string(bad: object) -> None:
    assert not is_card(bad)
    with pytest.raises(ValueError, match="a card is a string"):
        parse_card(bad)  # type: ignore[arg-type]
