"""Table-driven rule cases: RULES.md's worked examples E1–E6, one test per
decision tag [D1]…[D17] and per variant V1–V8."""

from __future__ import annotations

import random
from collections import Counter

import msgspec
import pytest

from protocol import ChooseUp, Deck, Draw, Flip, Pass, Pickup, Play, Rules, Swap
from referee.game import (
    IllegalActionError,
    MalformedActionError,
    new_game,
    view,
)
from referee.game import cards as C
from referee.game.layout import layout
from referee.game.state import GONE, HAND, PLAY, SABOTAGE
from tests.support.game import kinds, play_random, random_game

# --------------------------------------------------------------- E1–E6


@pytest.mark.parametrize(
    "pile, hand, legal",
    [
        # E1: pile top 3; hand 2, 3, 9 -> play 3, play 9; not 2; no pick-up.
        (["3R"], ["2R", "3G", "9B"], ["play 3G", "play 9B"]),
        # E2: pile top 7; hand 2, 4, 4 -> must pick up.
        (["7R"], ["2R", "4G", "4B"], ["pickup"]),
        # E3: pile top 5; hand 5, 5, 8 -> one 5, both 5s, the 8.
        (["5Y"], ["5R", "5G", "8B"], ["play 5R", "play 5R 5G", "play 8B"]),
        # Empty pile: anything; a Clear alone [D5].
        ([], ["2R", "C", "C+1"], ["play 2R", "play C", "play C+1"]),
        # Clears are legal on anything.
        (["10V"], ["9R", "C+2"], ["play C+2"]),
    ],
    ids=["E1", "E2", "E3", "empty-pile", "clear-on-10"],
)
def test_legal_actions_table(pile: list[str], hand: list[str], legal: list[str]) -> None:
    s = layout(hands=[hand, ["2V", "3V", "4V"]], pile=pile, draw=["6V"] * 5)
    assert kinds(s.legal_actions()) == legal


def test_E1_illegal_low_card_rejected_with_reason() -> None:
    s = layout(hands=[["2R", "3G", "9B"], ["4V"]], pile=["3R"], draw=["6V"])
    with pytest.raises(IllegalActionError, match="2R is lower than the top of the pile, 3R"):
        s.apply(Play(cards=["2R"]))
    with pytest.raises(IllegalActionError, match="must play if you can"):
        s.apply(Pickup())


def test_E2_pickup_takes_the_pile_and_ends_the_turn() -> None:
    s = layout(hands=[["2R", "4G", "4B"], ["5V"]], pile=["3Y", "7R"], draw=["6V"] * 3)
    s.apply(Pickup())
    assert sorted(C.to_str(s.hands[0])) == sorted(["2R", "4G", "4B", "3Y", "7R"])
    assert s.pile == [] and s.current == 1
    assert len(s.draw) == 3  # 5 cards in hand: draws nothing (§6)


def test_E3_three_of_a_kind_clears_and_ends_the_turn() -> None:
    s = layout(hands=[["5R", "5G", "8B"], ["2V"]], pile=["5Y"], draw=["6V", "7V", "9V"])
    s.apply(Play(cards=["5G", "5R"]))
    assert s.pile == []
    assert C.to_str(s.cleared) == ["5Y", "5G", "5R"]
    assert s.current == 1 and s.turn == 2
    assert sorted(C.to_str(s.hands[0])) == ["6V", "7V", "8B"]  # drew back to 3


def test_E4_clear_plus1_then_a_4() -> None:
    s = layout(hands=[["C+1", "4R", "9G"], ["2V"]], pile=["8Y"], draw=["6V", "7V"])
    s.apply(Play(cards=["C+1"]))
    assert s.pile == [] and s.current == 0 and len(s.extras) == 1
    s.apply(Play(cards=["4R"]))
    assert C.to_str(s.pile) == ["4R"]
    assert s.current == 1
    assert sorted(C.to_str(s.hands[0])) == ["6V", "7V", "9G"]  # drew back to 3


def test_E5_clear_plus2_from_3up_then_a_failed_flip() -> None:
    s = layout(
        hands=[[], ["2V"]],
        up=[["C+2", "6R"], ["3V"]],
        down=[["2G", "9G", "9B"], ["4V", "5V", "6V"]],
        pile=["8Y"],
    )
    s.apply(Play(cards=["C+2"]))
    assert len(s.extras) == 2
    assert kinds(s.legal_actions()) == ["play 6R"]  # no draw: the draw pile is empty
    s.apply(Play(cards=["6R"]))
    assert C.to_str(s.pile) == ["6R"]
    assert kinds(s.legal_actions()) == ["flip 0", "flip 1", "flip 2"]
    s.apply(Flip(slot=0))  # the 2: lower than the 6
    assert sorted(C.to_str(s.hands[0])) == ["2G", "6R"]
    assert s.pile == [] and s.current == 1 and s.extras == []


def test_E6_flip_of_a_10_on_a_7_is_played() -> None:
    s = layout(hands=[[], ["2V"]], down=[["10G", "4B", None], ["4V", "5V", "6V"]], pile=["7Y"])
    s.apply(Flip(slot=0))
    assert C.to_str(s.pile) == ["7Y", "10G"]
    assert s.down[0] == [GONE, C.INT["4B"], GONE]
    flip = view(s, 1).events[-1]
    assert flip.type == "flip" and flip.cards == ["10G"] and flip.slot == 0 and flip.kind == "played"


def test_E6_failed_flip_card_hidden_from_others_D6() -> None:
    s = layout(hands=[[], ["2V"]], down=[["4B", "9G", None], ["4V", "5V", "6V"]], pile=["7Y"])
    s.apply(Flip(slot=0))  # the 4 on a 7: picked up with the pile
    own = [e for e in view(s, 0).events if e.type == "flip"][-1]
    other = [e for e in view(s, 1).events if e.type == "flip"][-1]
    assert own.cards == ["4B"] and own.slot == 0 and own.kind == "failed"
    assert other.cards is None and other.slot == 0 and other.kind == "failed"
    assert "4B" not in msgspec.json.encode(view(s, 1)).decode()
    assert view(s, 1).players[0].known == ["7Y"]  # the pile is public, the 4 is not


# ------------------------------------------------------- decisions [D#]


def test_D1_default_deck_is_84_cards() -> None:
    deck = C.build_deck(Rules().resolved_deck())
    assert len(deck) == 84
    ranks = Counter(c >> 3 for c in deck)
    assert all(ranks[r] == 7 for r in range(1, 11))
    assert (ranks[C.CLEAR], ranks[C.CLEAR1], ranks[C.CLEAR2]) == (7, 6, 1)
    assert {C.STR[c][-1] for c in deck if c >> 3 <= 10} == set("ROYGBIV")


def test_D1_italian_preset_and_configurable_deck() -> None:
    assert len(C.build_deck(Rules(deck="italian").resolved_deck())) == 74
    small = Rules(deck=Deck(colours="RG", copies=1, clear=2, clear_plus1=1, clear_plus2=1))
    assert len(C.build_deck(small.resolved_deck())) == 24
    s = new_game(small, 2, random.Random(1))
    assert len(s.all_cards()) == 24


def test_deck_too_small_is_refused_with_reason() -> None:
    tiny = Rules(deck=Deck(colours="R", copies=1, clear=0, clear_plus1=0, clear_plus2=0))
    with pytest.raises(ValueError, match="too small"):
        new_game(tiny, 2, random.Random(1))
    with pytest.raises(ValueError):
        new_game(Rules(), 7, random.Random(1))
    with pytest.raises(ValueError):
        new_game(Rules(), 1, random.Random(1))


def test_D2_3up_choice_simultaneous_and_hidden_until_all_chose() -> None:
    s = random_game(3, seed=5)
    assert s.to_move() == [0, 1, 2]
    assert len(s.legal_actions(1)) >= 1
    before_1 = msgspec.json.encode(view(s, 1))
    s.apply(s.legal_actions(2)[-1], 2)
    # Seat 1 cannot tell that seat 2 has chosen.
    assert msgspec.json.encode(view(s, 1)) == before_1
    assert s.to_move() == [0, 1]
    with pytest.raises(IllegalActionError, match="already"):
        s.apply(s.legal_actions(2)[0] if s.legal_actions(2) else ChooseUp(cards=["C", "C", "C"]), 2)
    s.apply(s.legal_actions(0)[0], 0)
    s.apply(s.legal_actions(1)[0], 1)
    ups = [e for e in view(s, 1).events if e.type == "choose_up"]
    assert [e.seat for e in ups] == [0, 1, 2]
    assert all(len(e.cards or []) == 3 for e in ups)


def test_D2_choose_up_must_use_dealt_cards() -> None:
    s = random_game(2, seed=3)
    not_mine = next(c for c in C.STR if c and C.INT[c] not in s.hands[0])
    mine = C.to_str(s.hands[0])
    with pytest.raises(IllegalActionError, match="not of the 6 cards dealt"):
        s.apply(ChooseUp(cards=[mine[0], mine[1], not_mine]), 0)
    with pytest.raises(MalformedActionError, match="exactly 3"):
        s.apply(ChooseUp(cards=mine[:2]), 0)
    with pytest.raises(MalformedActionError, match="not a card"):
        s.apply(ChooseUp(cards=[mine[0], mine[1], "11R"]), 0)


def test_D3_seat_0_starts() -> None:
    for seed in range(5):
        s = random_game(4, seed)
        for seat in range(4):
            s.apply(s.legal_actions(seat)[0], seat)
        assert s.phase == PLAY and s.current == 0 and s.turn == 1


def test_D4_empty_hand_with_draw_pile_draws_up_to_3_first() -> None:
    s = layout(
        hands=[[], ["9V", "2V"]], up=[["8R"], []], pile=["3Y"], draw=["4G", "5G", "6G", "7G", "8G"], current=1
    )
    s.apply(Play(cards=["9V"]))
    # Seat 1 drew back to 3 (two cards), then seat 0 starts with an empty hand.
    assert s.current == 0
    assert sorted(C.to_str(s.hands[0])) == ["6G", "7G", "8G"]
    assert s.source(0) == HAND


def test_D4_the_list_and_apply_agree_on_an_empty_hand_before_its_draw() -> None:
    # Only a laid-out position skips [D4]'s draw: the hand is still the source
    # (empty), for the legal list and for apply alike; the 3UP card waits.
    s = layout(hands=[[], ["9V"]], up=[["8R"], []], pile=["3Y"], draw=["4G"])
    assert s.source(0) == HAND
    assert kinds(s.legal_actions()) == ["pickup"]
    with pytest.raises(IllegalActionError, match="8R is not in your hand"):
        s.apply(Play(cards=["8R"]))


def test_D5_clear_is_played_alone() -> None:
    s = layout(hands=[["C", "C", "5R"], ["2V"]], pile=[], draw=["6V"])
    assert kinds(s.legal_actions()) == ["play 5R", "play C"]
    with pytest.raises(IllegalActionError, match="played alone"):
        s.apply(Play(cards=["C", "C"]))


def test_D7_an_extra_action_may_flip_again() -> None:
    s = layout(hands=[[], ["2V"]], down=[["C+1", "3G", "4G"], ["4V", "5V", "6V"]], pile=["9Y"])
    s.apply(Flip(slot=0))  # a Clear+1: played, one extra action
    assert s.current == 0 and len(s.extras) == 1
    assert kinds(s.legal_actions()) == ["flip 1", "flip 2"]
    s.apply(Flip(slot=2))
    assert C.to_str(s.pile) == ["4G"] and s.current == 1
    with pytest.raises(IllegalActionError):
        s.apply(Flip(slot=0))  # seat 1 plays from hand; no flip


def test_D8_three_of_a_kind_across_players_ends_turn_and_loses_extras() -> None:
    # Two 5s on the pile from earlier plays; a Clear+2 owes two extra actions,
    # but the pile is cleared by it, so lay out the state just after: the
    # player owes 2 extra actions and the pile holds 5, 5 (refilled).
    s = layout(hands=[["5R", "9G"], ["2V"]], pile=["5G", "5B"], draw=["6V"] * 6)
    s.extras = [True, True]
    s.apply(Play(cards=["5R"]))
    assert s.pile == [] and C.to_str(s.cleared) == ["5G", "5B", "5R"]
    assert s.current == 1 and s.extras == []  # the turn ended, the extra lost
    assert [e.kind for e in view(s, 1).events if e.type == "clear"] == ["three"]


def test_D9_extra_actions_add_up_and_clear_ends_at_once() -> None:
    s = layout(hands=[["C+2", "C+1", "C", "9G"], ["2V"]], pile=["3R"], draw=["6V"] * 6)
    s.apply(Play(cards=["C+2"]))
    assert len(s.extras) == 2
    s.apply(Play(cards=["C+1"]))
    assert len(s.extras) == 2  # 1 left from the C+2, 1 from the C+1
    s.apply(Play(cards=["C"]))
    assert s.current == 1 and s.extras == []  # a Clear ends the turn at once


def test_D10_draw_before_each_extra_action() -> None:
    s = layout(hands=[["C+2", "3R", "4R"], ["2V"]], pile=["9Y"], draw=["6V", "7V", "8V"])
    s.apply(Play(cards=["C+2"]))
    assert "draw" in kinds(s.legal_actions())
    s.apply(Draw())
    assert "draw" not in kinds(s.legal_actions())  # once per extra action
    assert sorted(C.to_str(s.hands[0])) == ["3R", "4R", "6V"]
    s.apply(Play(cards=["3R"]))
    assert "draw" in kinds(s.legal_actions())  # again before the second
    with pytest.raises(IllegalActionError):
        s2 = layout(hands=[["3R"], ["2V"]], pile=[], draw=["6V"])
        s2.apply(Draw())  # no extra action owed, no V2


def test_D10_automatic_draw_when_source_empty_for_an_extra_action() -> None:
    s = layout(hands=[["C+1"], ["2V"]], up=[["9R"], []], pile=[], draw=["6V", "7V"])
    s.apply(Play(cards=["C+1"]))
    assert C.to_str(s.hands[0]) == ["6V"]  # drawn automatically (the top card)
    assert "draw" not in kinds(s.legal_actions())


def test_V8_one_draw_per_clear_plus2() -> None:
    rules = Rules(one_draw_per_clear2=True)
    s = layout(hands=[["C+2", "3R", "4R"], ["2V"]], pile=["9Y"], draw=["6V", "7V", "8V"], rules=rules)
    s.apply(Play(cards=["C+2"]))
    assert "draw" in kinds(s.legal_actions())
    s.apply(Play(cards=["3R"]))
    assert "draw" not in kinds(s.legal_actions())
    with pytest.raises(IllegalActionError, match="V8"):
        s.apply(Draw())
    # A Clear+1 still allows its draw.
    s = layout(hands=[["C+1", "3R"], ["2V"]], pile=["9Y"], draw=["6V"], rules=rules)
    s.apply(Play(cards=["C+1"]))
    assert "draw" in kinds(s.legal_actions())


def test_D11_default_first_out_wins_others_share_second() -> None:
    s = layout(hands=[["9R"], ["2V"], ["3V"]], pile=["5Y"])
    s.apply(Play(cards=["9R"]))
    assert s.over
    assert s.result().places == [1, 2, 2]


def test_V1_ranks_in_the_order_players_go_out() -> None:
    rules = Rules(play_for_places=True)
    s = layout(hands=[["9R"], ["2V", "8V"], ["3V"]], pile=["5Y"], rules=rules)
    s.apply(Play(cards=["9R"]))  # seat 0 out: place 1
    assert not s.over and s.current == 1
    s.apply(Pickup())  # seat 1 cannot beat 9
    s.apply(Play(cards=["3V"]))  # seat 2 out on the empty pile: place 2
    assert s.over
    assert s.result().places == [1, 3, 2]


def test_D12_turn_limit() -> None:
    rules = Rules(turn_limit=2)
    s = layout(
        hands=[["2R", "3R", "4R"], ["2G", "3G", "9G"], ["C+2", "C+1", "3B"]],
        pile=["10Y"],
        rules=rules,
    )
    s.apply(Pickup())  # turn 1: seat 0 takes the 10 (2+3+4+10 = 19 points)
    assert s.turn == 2
    s.apply(Play(cards=["2G"]))  # turn 2 ends the game: seat 1 holds 3+9 = 12
    assert s.over and s.result().adjudicated
    # seat 2: 25 + 20 + 3 = 48 points
    assert s.result().points == [19, 12, 48]
    assert s.result().places == [2, 1, 3]
    assert view(s, 0).events[-1].type == "end"
    assert view(s, 0).events[-1].detail == "adjudicated"


def test_D12_equal_points_share_a_place() -> None:
    s = layout(hands=[["5R", "2R"], ["4G", "3G"], ["9B"]], pile=["9Y"], rules=Rules(turn_limit=1))
    s.apply(Pickup())  # seat 0 now holds 5 + 2 + 9 = 16; seats 1 and 2: 7 and 9
    assert s.result().points == [16, 7, 9]
    assert s.result().places == [3, 1, 2]
    s = layout(hands=[["2R"], ["4G", "3G"], ["7B"]], pile=["1Y", "4Y"], rules=Rules(turn_limit=1))
    s.apply(Pickup())  # seat 0: 2 + 1 + 4 = 7 points, like seat 1 and seat 2
    assert s.result().places == [1, 1, 1]


def test_D12_random_games_always_end_by_the_limit() -> None:
    for seed in range(30):
        s = random_game(6, seed, Rules(turn_limit=20))
        play_random(s, random.Random(seed))
        assert s.over and s.turn <= 20


def test_D13_V3_a_play_with_1s_reverses_direction_once() -> None:
    rules = Rules(reverses=True)
    s = layout(hands=[["1R", "1G", "9R"], ["2V"], ["3V"], ["4V"]], pile=[], draw=["6V"] * 9, rules=rules)
    s.apply(Play(cards=["1R", "1G"]))
    assert s.direction == -1 and s.current == 3
    assert [e for e in view(s, 0).events if e.type == "reverse"][0].seat == 0
    no_v3 = layout(hands=[["1R", "9R"], ["2V"], ["3V"]], pile=[], draw=["6V"] * 3)
    no_v3.apply(Play(cards=["1R"]))
    assert no_v3.direction == 1 and no_v3.current == 1


def test_D14_V4_points_count_hand_3up_and_3down() -> None:
    s = layout(
        hands=[["C"], ["2V"]],
        up=[["C+1"], []],
        down=[["C+2", "7R", None], [None, None, None]],
        pile=[],
    )
    assert s.points(0) == 15 + 20 + 25 + 7
    assert s.points(1) == 2


def test_D15_V5_pile_swap_exchanges_3up_and_3down() -> None:
    rules = Rules(pile_swap=True)
    s = new_game(rules, 3, random.Random(11))
    pair = s.swap_pair
    assert pair is not None and len(set(pair)) == 2
    downs = [d[:] for d in s.down]
    for seat in range(3):
        s.apply(s.legal_actions(seat)[0], seat)
    a, b = pair
    assert s.down[a] == downs[b] and s.down[b] == downs[a]
    ev = [e for e in view(s, 0).events if e.type == "pile_swap"]
    assert len(ev) == 1 and {ev[0].seat, ev[0].target} == {a, b}
    chosen = {e.seat: e.cards for e in view(s, 0).events if e.type == "choose_up"}
    assert C.to_str(s.up[a]) == chosen[b] and C.to_str(s.up[b]) == chosen[a]


def test_D16_V5b_sabotage_in_seat_order() -> None:
    s = new_game(Rules(sabotage=True), 3, random.Random(4))
    for seat in range(3):
        s.apply(s.legal_actions(seat)[0], seat)
    assert s.phase == SABOTAGE and s.current == 0
    legal = s.legal_actions()
    assert isinstance(legal[0], Pass)
    swap = next(a for a in legal if isinstance(a, Swap) and a.target == 2)
    s.apply(swap)
    assert swap.give in C.to_str(s.up[2]) and swap.take in C.to_str(s.hands[0])
    assert view(s, 1).players[0].known == [swap.take]  # public: it was a 3UP card
    assert s.current == 1
    with pytest.raises(MalformedActionError, match="target"):
        s.apply(Swap(give=C.STR[s.hands[1][0]], take=C.STR[s.up[0][0]]))
    s.apply(Pass())
    s.apply(Pass())
    assert s.phase == PLAY and s.current == 0 and s.turn == 1


def test_D17_V6_colour_run_swap_or_decline() -> None:
    rules = Rules(colour_run=True)
    s = layout(
        hands=[["8R", "2G", "3G"], ["2V"]],
        up=[["9B", "C"], []],
        pile=["4R", "5R", "7R"],
        draw=["6V"] * 6,
        rules=rules,
    )
    s.apply(Play(cards=["8R"]))
    assert s.pending_swap and s.current == 0
    assert view(s, 0).pending == "swap"
    legal = kinds(s.legal_actions())
    assert legal[-1] == "pass" and "swap 2G>9B" in legal and "swap 3G>C" in legal
    with pytest.raises(IllegalActionError, match="swap"):
        s.apply(Play(cards=["2G"]))
    s.apply(Swap(give="2G", take="C"))
    assert sorted(C.to_str(s.up[0])) == ["2G", "9B"]
    assert "C" in C.to_str(s.hands[0])
    assert s.current == 1  # the turn ended after the decision
    # Declining leaves everything.
    s = layout(
        hands=[["8R", "2G"], ["2V"]], up=[["9B"], []], pile=["4R", "5R", "7R"], draw=["6V"] * 6, rules=rules
    )
    s.apply(Play(cards=["8R"]))
    s.apply(Pass())
    assert C.to_str(s.up[0]) == ["9B"] and s.current == 1
    # Without V6 nothing is asked.
    s = layout(hands=[["8R", "2G"], ["2V"]], up=[["9B"], []], pile=["4R", "5R", "7R"], draw=["6V"] * 6)
    s.apply(Play(cards=["8R"]))
    assert not s.pending_swap and s.current == 1


def test_V2_draw_instead_of_playing_ends_the_turn() -> None:
    rules = Rules(draw_instead_of_playing=True)
    s = layout(hands=[["9R", "2G", "3G"], ["2V"]], pile=["5R"], draw=["6V", "7V"], rules=rules)
    assert kinds(s.legal_actions()) == ["play 9R", "draw"]
    s.apply(Draw())
    assert s.current == 1 and sorted(C.to_str(s.hands[0])) == ["2G", "3G", "6V", "9R"]
    s = layout(hands=[["9R"], ["2V"]], pile=["5R"], rules=rules)
    assert "draw" not in kinds(s.legal_actions())  # only while the draw pile has cards


def test_V7_fewer_colours_make_a_smaller_deck() -> None:
    rules = Rules(deck=Deck(colours="ROY"))
    s = new_game(rules, 4, random.Random(2))
    assert len(s.all_cards()) == 30 + 14
    assert {C.STR[c][-1] for c in s.all_cards() if c >> 3 <= 10} == set("ROY")


# ----------------------------------------------------------- the referee


def test_disqualified_seat_ranks_last_and_its_cards_leave_face_down() -> None:
    s = layout(hands=[["9R", "2R"], ["2V", "3V"], ["4V", "5V"]], up=[["7R"], ["8G"], ["9B"]], pile=["5Y"])
    before = len(s.all_cards())
    s.disqualify(0, "3 strikes")
    assert s.current == 1 and s.removed and len(s.all_cards()) == before
    v = view(s, 1)
    assert v.removed_count == 3 and v.players[0].disqualified and v.players[0].up == []
    assert "9R" not in msgspec.json.encode(v).decode()
    s.apply(Pickup())  # seat 1 cannot beat the 5
    assert s.current == 2
    s.disqualify(2)
    assert s.over and s.result().places == [3, 1, 2] and s.result().disqualified == [0, 2]


def test_malformed_and_illegal_are_distinct_errors() -> None:
    s = layout(hands=[["9R", "2R"], ["2V"]], pile=["5Y"], draw=["6V"])
    with pytest.raises(MalformedActionError):
        s.apply(Play(cards=[]))
    with pytest.raises(MalformedActionError, match="not a card"):
        s.apply(Play(cards=["9X"]))
    with pytest.raises(MalformedActionError, match="slot"):
        s.apply(Flip(slot=7))
    with pytest.raises(IllegalActionError, match="not in your hand"):
        s.apply(Play(cards=["9G"]))
    with pytest.raises(IllegalActionError, match="share one rank"):
        s.apply(Play(cards=["9R", "2R"]))
    with pytest.raises(IllegalActionError, match="seat 0's turn"):
        s.apply(Pickup(), seat=1)
    with pytest.raises(IllegalActionError, match="flip only"):
        s.apply(Flip(slot=0))
    # Any cards of the same rank and count are accepted, not just the canonical.
    s = layout(hands=[["9R", "9G", "9B"], ["2V"]], pile=["5Y"], draw=["6V"])
    assert kinds(s.legal_actions())[:2] == ["play 9R", "play 9R 9G"]
    s.apply(Play(cards=["9B", "9G"]))
    assert C.to_str(s.pile) == ["5Y", "9B", "9G"]


def test_down_slots_and_known_cards_in_view() -> None:
    s = layout(hands=[["2R"], ["3V"]], down=[["4G", None, "5G"], ["4V", "5V", "6V"]], pile=["8Y", "9Y"])
    s.apply(Pickup())
    v = view(s, 1)
    assert v.players[0].down == [0, 2] and v.players[0].down_count == 2
    assert v.players[0].known == ["8Y", "9Y"]
    assert GONE == -1


# ------------------------------------------- where RULES.md leaves a detail


def test_D9_a_pickup_during_an_extra_action_ends_the_turn_and_loses_the_rest() -> None:
    # §5: "If a player cannot make an extra action they pick up the pile";
    # picking up ends the turn, so extra actions still owed [D9] are lost.
    s = layout(hands=[["C+2", "2R", "9G"], ["3V"]], pile=["8Y"], draw=[])
    s.apply(Play(cards=["C+2"]))  # owes 2 extra actions
    s.apply(Play(cards=["9G"]))  # first extra: a 9 on the empty pile
    assert kinds(s.legal_actions()) == ["pickup"]  # the 2 cannot beat the 9
    s.apply(Pickup())
    assert s.current == 1 and s.extras == []
    assert sorted(C.to_str(s.hands[0])) == ["2R", "9G"]


def test_D10_with_V2_a_draw_during_an_extra_action_is_the_draw_before_it() -> None:
    # V2's draw replaces a turn's first action only; owing an extra action,
    # "draw" is [D10]'s draw and the turn goes on.
    s = layout(
        hands=[["C+1", "3R"], ["2V"]],
        pile=["9Y"],
        draw=["6V", "7V"],
        rules=Rules(draw_instead_of_playing=True),
    )
    s.apply(Play(cards=["C+1"]))
    s.apply(Draw())
    assert s.current == 0 and len(s.extras) == 1
    assert kinds(s.legal_actions()).count("draw") == 0


def test_D8_three_of_a_kind_is_checked_before_a_V6_colour_run() -> None:
    # Four reds on top, the last three of one rank: the pile is cleared [D8],
    # so there is no colour run left to offer [D17].
    s = layout(
        hands=[["5R", "2G"], ["2V"]],
        up=[["9B"], []],
        pile=["3R", "5R", "5R"],
        draw=["6V"] * 4,
        rules=Rules(colour_run=True, deck=Deck(copies=3)),
    )
    s.apply(Play(cards=["5R"]))
    assert s.pile == [] and not s.pending_swap and s.current == 1


def test_D15_V5_pile_swap_comes_before_D16_V5b_sabotage() -> None:
    s = new_game(Rules(pile_swap=True, sabotage=True), 3, random.Random(8))
    for seat in range(3):
        s.apply(s.legal_actions(seat)[0], seat)
    types = [e.type for e in view(s, 0).events]
    assert types.index("pile_swap") > max(i for i, t in enumerate(types) if t == "choose_up")
    assert s.phase == SABOTAGE  # sabotage comes after the swap


# ------------------------------------------- rule clauses pinned one by one


def test_D17_V6_needs_four_of_one_colour_not_three() -> None:
    """Three reds on top (the fourth card is green) offer no swap."""
    s = layout(
        hands=[["8R", "2G"], ["2V"]],
        up=[["9B"], []],
        pile=["4G", "5R", "7R"],
        draw=["6V"] * 6,
        rules=Rules(colour_run=True),
    )
    s.apply(Play(cards=["8R"]))
    assert not s.pending_swap and s.current == 1


def test_D17_V6_no_offer_without_3up_cards() -> None:
    s = layout(
        hands=[["8R", "2G"], ["2V"]],
        up=[[], []],
        pile=["4R", "5R", "7R"],
        draw=["6V"] * 6,
        rules=Rules(colour_run=True),
    )
    s.apply(Play(cards=["8R"]))
    assert not s.pending_swap and s.current == 1


def test_D17_V6_a_colour_run_in_an_extra_action_lets_the_turn_go_on() -> None:
    s = layout(
        hands=[["8R", "2G", "3G"], ["2V"]],
        up=[["9B"], []],
        pile=["4R", "5R", "7R"],
        draw=["6V"] * 6,
        rules=Rules(colour_run=True),
    )
    s.extras = [True, True]
    s.apply(Play(cards=["8R"]))
    assert s.pending_swap
    s.apply(Pass())
    assert s.current == 0 and len(s.extras) == 1  # one extra action still owed


def test_D12_the_turn_limit_is_1000_by_default() -> None:
    assert Rules().turn_limit == 1000


def test_D12_adjudication_places_the_players_left_after_those_out_with_V1() -> None:
    """With V1 a player already out keeps their place; those still in at the
    limit are ranked after them by penalty points."""
    s = layout(
        hands=[["9R"], ["2V", "8V"], ["3V", "C"]],
        pile=["5Y"],
        rules=Rules(play_for_places=True, turn_limit=2),
    )
    s.apply(Play(cards=["9R"]))  # seat 0 goes out: first
    s.apply(Pickup())  # seat 1: turn 2 reaches the limit
    result = s.result()
    assert result.adjudicated
    assert result.points == [0, 24, 18]
    assert result.places == [1, 3, 2]


def test_D11_V1_a_player_out_with_extra_actions_owed_simply_stops() -> None:
    s = layout(hands=[["C+2"], ["2V", "3V"], ["4V"]], pile=["5Y"], rules=Rules(play_for_places=True))
    s.apply(Play(cards=["C+2"]))
    assert s.out_order == [0] and s.extras == [] and not s.over
    assert s.current == 1


def test_D11_V1_play_goes_on_past_the_seats_that_are_out() -> None:
    s = layout(
        hands=[["2R", "3R"], ["9G"], ["3V", "4V"], ["5V", "6V"]],
        pile=["5Y"],
        current=1,
        rules=Rules(play_for_places=True),
    )
    s.apply(Play(cards=["9G"]))  # seat 1 goes out
    s.apply(Pickup())  # seat 2
    s.apply(Play(cards=["5V"]))  # seat 3
    s.apply(Pickup())  # seat 0
    assert s.current == 2  # seat 1 is skipped


def test_D3_seat_0_disqualified_in_set_up_the_next_seat_starts() -> None:
    s = new_game(Rules(), 3, random.Random(1))
    s.disqualify(0, "test")
    for seat in (1, 2):
        s.apply(s.legal_actions(seat)[0], seat)
    assert s.phase == PLAY and s.current == 1


def test_D15_V5_no_pile_swap_when_one_of_the_pair_is_disqualified() -> None:
    s = new_game(Rules(pile_swap=True), 3, random.Random(11))
    assert s.swap_pair is not None
    out = s.swap_pair[0]
    s.disqualify(out, "test")
    for seat in range(3):
        if seat != out:
            s.apply(s.legal_actions(seat)[0], seat)
    assert s.phase == PLAY
    assert not [e for e in view(s, 1).events if e.type == "pile_swap"]


def test_D14_V4_a_disqualified_seat_keeps_the_points_it_held() -> None:
    """A disqualified seat's cards leave the game face down, but its penalty
    points stay those of the cards it held: disqualification must not score
    better than playing on."""
    s = layout(hands=[["C+2", "9R"], ["2V", "3V"], ["4V"]], up=[["5G"], [], []], pile=["5Y"])
    s.disqualify(0, "test")
    assert s.hands[0] == [] and s.up[0] == []
    assert s.points(0) == 25 + 9 + 5
    assert s.copy().points(0) == 39
