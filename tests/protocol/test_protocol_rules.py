"""protocol.messages Rules / Deck / Timeouts: configuration and its validation (RULES.md 1, [D1])."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from protocol import DECK_PRESETS, Deck, Rules, Timeouts, is_card


def test_standard_deck_is_84_cards_D1() -> None:
    deck = Rules().resolved_deck()
    assert deck == Deck() == DECK_PRESETS["standard"]
    assert deck.size() == 84
    cards = deck.cards()
    assert len(cards) == 84
    counts = Counter(cards)
    assert counts["C"] == 7 and counts["C+1"] == 6 and counts["C+2"] == 1
    assert len(set(cards)) == 70 + 3  # every number card once
    assert all(is_card(c) for c in cards)


def test_italian_deck_is_74_cards() -> None:
    rules = Rules(deck="italian")
    deck = rules.resolved_deck()
    assert deck == Deck(colours="RYG", copies=2, clear=6, clear_plus1=6, clear_plus2=2)
    assert deck.size() == 74
    counts = Counter(deck.cards())
    assert sum(counts.values()) == 74
    assert counts["7Y"] == 2 and counts["7B"] == 0
    assert counts["C"] == 6 and counts["C+1"] == 6 and counts["C+2"] == 2
    rules.validate(6)  # 74 >= 54


def test_inline_deck() -> None:
    rules = Rules(deck=Deck(colours="BR", copies=1, clear=2, clear_plus1=1, clear_plus2=0))
    assert rules.resolved_deck().colours == "BR"
    assert rules.resolved_deck().size() == 23
    rules.validate(2)  # 23 >= 18


@pytest.mark.parametrize("players", [2, 3, 4, 5, 6])
def test_defaults_valid(players: int) -> None:
    Rules().validate(players)


@pytest.mark.parametrize("players", [0, 1, 7, -2])
def test_player_count(players: int) -> None:
    with pytest.raises(ValueError, match=f"a game needs 2 to 6 players, got {players}"):
        Rules().validate(players)


def test_too_small_deck_message() -> None:
    deck = Deck(colours="RGB", copies=1, clear=0, clear_plus1=0, clear_plus2=0)  # 30 cards
    assert deck.size() == 30
    with pytest.raises(ValueError) as info:
        Rules(deck=deck).validate(4)
    assert str(info.value) == (
        "a deck of 30 cards is too small for 4 players: 3UP 3DOWN needs at least 9 cards per player (36)"
    )
    Rules(deck=deck).validate(3)  # 27 needed: fine


def test_smallest_deck_for_6_players() -> None:
    deck = Deck(colours="ROYGB", copies=1, clear=4, clear_plus1=0, clear_plus2=0)  # 54
    Rules(deck=deck).validate(6)
    with pytest.raises(ValueError, match="a deck of 53 cards is too small for 6 players"):
        Rules(deck=msgspec.structs.replace(deck, clear=3)).validate(6)


@pytest.mark.parametrize(
    ("colours", "words"),
    [
        ("", "it is empty"),
        ("RXZ", "not colour letters: 'X', 'Z'"),
        ("rgb", "not colour letters: 'r', 'g', 'b'"),
        ("RRG", "repeated: 'R'"),
        ("ROYGBIVR", "repeated: 'R'"),
        ("R G", "not colour letters: ' '"),
    ],
)
def test_bad_colours(colours: str, words: str) -> None:
    with pytest.raises(ValueError) as info:
        Rules(deck=Deck(colours=colours)).validate(2)
    message = str(info.value)
    assert message.startswith("deck colours must be 1 to 7 distinct letters of ROYGBIV")
    assert repr(colours) in message
    assert words in message
    with pytest.raises(ValueError):
        Deck(colours=colours).validate()


def test_colours_in_any_order() -> None:
    Rules(deck=Deck(colours="VIBGYOR")).validate(6)
    Rules(deck=Deck(colours="G", copies=5)).validate(5)  # 50 + 14 = 64 >= 45


def test_bad_counts() -> None:
    with pytest.raises(ValueError, match="deck copies must be at least 1, got 0"):
        Rules(deck=Deck(copies=0)).validate(2)
    with pytest.raises(ValueError, match="deck clear_plus1 must be 0 or more, got -1"):
        Rules(deck=Deck(clear_plus1=-1)).validate(2)
    Rules(deck=Deck(clear=0, clear_plus1=0, clear_plus2=0)).validate(2)


def test_turn_limit() -> None:
    with pytest.raises(ValueError, match="turn_limit must be at least 1, got 0"):
        Rules(turn_limit=0).validate(2)
    Rules(turn_limit=1).validate(2)


def test_every_problem_is_reported() -> None:
    with pytest.raises(ValueError) as info:
        Rules(turn_limit=0, deck=Deck(copies=0, clear=-1)).validate(9)
    message = str(info.value)
    for words in ("2 to 6 players, got 9", "turn_limit", "copies", "deck clear must be"):
        assert words in message


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match=r"unknown deck preset 'huge'; presets: italian, standard"):
        Rules(deck="huge").resolved_deck()
    with pytest.raises(ValueError, match="unknown deck preset 'huge'"):
        Rules(deck="huge").validate(2)


def test_presets_are_frozen() -> None:
    with pytest.raises(AttributeError):
        DECK_PRESETS["standard"].copies = 2  # type: ignore[misc]


def test_rules_decode_from_mapping() -> None:
    rules = msgspec.convert(
        {"deck": {"colours": "RGB", "copies": 2}, "play_for_places": True, "turn_limit": 50},
        Rules,
    )
    assert rules.resolved_deck() == Deck(colours="RGB", copies=2)
    assert rules.play_for_places and not rules.reverses
    assert msgspec.json.decode(b'{"deck": "italian"}', type=Rules).resolved_deck().size() == 74
    assert msgspec.json.decode(b"{}", type=Rules) == Rules()


def test_unknown_fields_tolerated_for_forward_compatibility() -> None:
    # Strictness about typos belongs to the league-file loader, not the wire.
    assert msgspec.json.decode(b'{"play_for_place": true}', type=Rules) == Rules()
    assert msgspec.json.decode(b'{"move": 5}', type=Timeouts) == Timeouts()
    assert msgspec.json.decode(b'{"move_ms": 5}', type=Timeouts) == Timeouts(move_ms=5)


def test_rules_types_strict() -> None:
    with pytest.raises(msgspec.ValidationError, match="Expected `bool`"):
        msgspec.json.decode(b'{"reverses": 1}', type=Rules)
    with pytest.raises(msgspec.ValidationError, match="Expected `int`"):
        msgspec.json.decode(b'{"turn_limit": "100"}', type=Rules)
