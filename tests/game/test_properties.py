"""Property tests over random playouts: conservation, termination, a legal
action always, every listed action applies, unlisted plays are rejected, and
views that leak nothing (the resampling proof)."""

from __future__ import annotations

import random
from collections import Counter

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import Play, Rules
from referee.game import (
    GameState,
    IllegalActionError,
    from_view,
    new_game,
    resample,
    view,
    view_bytes,
)
from referee.game import cards as C
from referee.game.state import DOWN, HAND, SETUP, UP

VARIANTS = (
    "play_for_places",
    "draw_instead_of_playing",
    "reverses",
    "pile_swap",
    "sabotage",
    "colour_run",
    "one_draw_per_clear2",
)
ENCODE = msgspec.json.Encoder().encode


def random_rules(rng: random.Random) -> Rules:
    flags = {v: rng.random() < 0.35 for v in VARIANTS}
    deck = rng.choice(["standard", "standard", "italian"])
    return Rules(deck=deck, turn_limit=rng.choice([1000, 1000, 60]), **flags)


def check_invariants(s: GameState, total: Counter[int]) -> None:
    assert Counter(s.all_cards()) == total, "cards are conserved"
    for i in range(s.n):
        assert not Counter(s.known[i]) - Counter(s.hands[i]), "known cards are in the hand"
    if not s.over:
        for seat in s.to_move():
            assert s.legal_actions(seat), f"seat {seat} has a legal action"


def unlisted_plays(s: GameState, seat: int, rng: random.Random) -> list[Play]:
    """Plays from the source that are not equivalent to a listed one."""
    src = s.source(seat)
    cards = s.hands[seat] if src == HAND else s.up[seat] if src == UP else []
    listed = {
        (C.INT[a.cards[0]] >> 3, len(a.cards))
        for a in s.legal_actions(seat)
        if isinstance(a, Play)
    }
    by_rank: dict[int, list[int]] = {}
    for c in cards:
        by_rank.setdefault(c >> 3, []).append(c)
    out = []
    for r, cs in by_rank.items():
        for k in range(1, len(cs) + 1):
            if (r, k) not in listed:
                out.append(Play(cards=[C.STR[c] for c in rng.sample(cs, k)]))
    return out


def playout(seed: int, n: int, rules: Rules, deep: bool) -> int:
    rng = random.Random(seed)
    s = new_game(rules, n, rng)
    total = Counter(s.all_cards())
    steps = 0
    while not s.over:
        if deep or steps % 17 == 0:
            check_invariants(s, total)
        seats = s.to_move()
        seat = seats[rng.randrange(len(seats))] if s.phase == SETUP else seats[0]
        legal = s.legal_actions(seat)
        if deep and steps % 5 == 0:
            for a in legal:  # every listed action applies
                s.copy().apply(a, seat)
            for bad in unlisted_plays(s, seat, rng):
                with pytest.raises(IllegalActionError):
                    s.copy().apply(bad, seat)
        s.apply(rng.choice(legal), seat)
        steps += 1
        assert s.turn <= rules.turn_limit
    check_invariants(s, total)
    res = s.result()
    assert sorted(res.places)[0] == 1
    assert all(res.places[d] > res.places[i] for d in res.disqualified for i in range(n) if i not in res.disqualified)
    return steps


def test_10000_random_playouts_conserve_cards_and_terminate() -> None:
    """The issue's bar: 10,000 playouts over 2–6 players and variant mixes."""
    rng = random.Random(20261129)
    steps = 0
    for g in range(10_000):
        n = 2 + g % 5
        rules = random_rules(rng)
        steps += playout(rng.randrange(2**32), n, rules, deep=False)
    assert steps > 10_000 * 50


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 6),
    flags=st.fixed_dictionaries({v: st.booleans() for v in VARIANTS}),
    deck=st.sampled_from(["standard", "italian"]),
)
def test_every_listed_action_applies_and_unlisted_plays_are_rejected(
    seed: int, n: int, flags: dict[str, bool], deck: str
) -> None:
    playout(seed, n, Rules(deck=deck, **flags), deep=True)


def test_disqualifications_mid_game_keep_invariants() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        n = 2 + seed % 5
        s = new_game(random_rules(rng), n, rng)
        total = Counter(s.all_cards())
        while not s.over:
            if rng.random() < 0.004:
                s.disqualify(rng.randrange(n), "test")
                check_invariants(s, total)
                continue
            seat = s.to_move()[0]
            s.apply(rng.choice(s.legal_actions(seat)), seat)
        check_invariants(s, total)
        for d in s.result().disqualified:
            assert s.hands[d] == [] and s.up[d] == []


def test_view_bytes_equals_the_encoded_view() -> None:
    """view_bytes (the match runner's path: players kept encoded with the
    facts they show, events encoded once) gives exactly the bytes of encoding
    view(), for every seat at every step, from any `since`, faults and
    disqualifications included, and on copies that go separate ways."""
    compared = 0
    for seed in range(400):
        rng = random.Random(seed)
        n = 2 + seed % 5
        s = new_game(random_rules(rng), n, rng)
        since = [0] * n
        while not s.over:
            for seat in range(n):
                start = rng.choice((0, since[seat], len(s.events)))
                assert view_bytes(s, seat, start) == ENCODE(view(s, seat, start)), (seed, seat)
                compared += 1
            if rng.random() < 0.02:
                other = s.copy()
                seat = other.to_move()[0]
                other.apply(rng.choice(other.legal_actions(seat)), seat)
                assert view_bytes(other, seat) == ENCODE(view(other, seat))
            mover = rng.choice(s.to_move())
            since[mover] = len(s.events)
            roll = rng.random()
            if roll < 0.003:
                s.disqualify(rng.randrange(n), "test")
            elif roll < 0.01:
                s.note_fault(mover, "timeout", "no reply in time")
            else:
                s.apply(rng.choice(s.legal_actions(mover)), mover)
        for seat in range(n):
            assert view_bytes(s, seat) == ENCODE(view(s, seat))
    assert compared > 50_000


def mid_game_states(count: int, seed: int) -> list[tuple[GameState, Rules]]:
    """Random states at random depths, across player counts and variants."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        n = rng.randint(2, 6)
        rules = random_rules(rng)
        s = new_game(rules, n, rng)
        stop = rng.randrange(1, 250)
        for _ in range(stop):
            if s.over:
                break
            seats = s.to_move()
            seat = rng.choice(seats)
            s.apply(rng.choice(s.legal_actions(seat)), seat)
            if rng.random() < 0.002:
                s.disqualify(rng.randrange(n), "test")
        if not s.over:
            out.append((s, rules))
    return out


def test_resampling_leaks_nothing() -> None:
    """Re-deal every card a seat cannot see: its view must not change, byte
    for byte, and cards the public history placed stay where it put them."""
    rng = random.Random(7)
    changed = 0
    for s, _ in mid_game_states(400, seed=1):
        total = Counter(s.all_cards())
        for seat in range(s.n):
            before = ENCODE(view(s, seat))
            for _ in range(3):
                r = resample(s, seat, rng)
                assert ENCODE(view(r, seat)) == before
                assert Counter(r.all_cards()) == total
                for i in range(s.n):
                    assert not Counter(r.known[i]) - Counter(r.hands[i])
                    assert r.known[i] == s.known[i]
                assert r.hands[seat] == s.hands[seat]
                changed += r.draw != s.draw or r.down != s.down
                # The resampled world plays on like any other.
                if not r.over:
                    for who in r.to_move():
                        assert r.legal_actions(who)
    assert changed > 0, "resampling must actually re-deal hidden cards"


def test_view_differs_when_a_visible_card_changes() -> None:
    """The leak test can fail: swapping a card a seat does see changes its view."""
    for s, _ in mid_game_states(50, seed=2):
        seat = s.to_move()[0]
        if s.phase == SETUP or not s.hands[seat]:
            continue
        before = ENCODE(view(s, seat))
        t = s.copy()
        c = t.hands[seat][0]
        t.hands[seat][0] = c ^ 1 if (c >> 3) <= 10 and (c & 7) < 6 else c
        if t.hands[seat][0] != c:
            assert ENCODE(view(t, seat)) != before


def test_from_view_rebuilds_a_consistent_state() -> None:
    """A bot holding only its view can rebuild a world that gives the same
    view and the same legal actions, and play it to the end."""
    rng = random.Random(3)
    for s, rules in mid_game_states(300, seed=3):
        if s.phase == SETUP:
            continue
        seat = s.current
        v = view(s, seat)
        legal = s.legal_actions(seat)
        w = from_view(v, rules, rng, legal)
        assert ENCODE(view(w, seat).you) == ENCODE(v.you)
        wv = view(w, seat)
        wv.events = v.events
        assert ENCODE(wv) == ENCODE(v)
        assert [ENCODE(a) for a in w.legal_actions(seat)] == [ENCODE(a) for a in legal]
        while not w.over:
            who = w.to_move()[0]
            w.apply(rng.choice(w.legal_actions(who)), who)


def test_source_order_hand_up_down() -> None:
    for s, _ in mid_game_states(100, seed=4):
        for i in range(s.n):
            src = s.source(i)
            if s.hands[i] or s.draw:
                assert src == HAND
            elif s.up[i]:
                assert src == UP
            elif any(c >= 0 for c in s.down[i]):
                assert src == DOWN
