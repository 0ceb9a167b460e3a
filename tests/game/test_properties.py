"""Property tests over random playouts: conservation, termination, a legal
action always, every listed action applies and nothing else does, views that
leak nothing (the resampling proof), and the view cache's bytes."""

from __future__ import annotations

import importlib
import random
import typing
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import Draw, Event, Flip, Pickup, Play, Rules
from protocol.messages import PlayerView, State
from referee.game import (
    ActionError,
    GameState,
    IllegalActionError,
    ViewCache,
    from_view,
    new_game,
    resample,
    view,
)
from referee.game import cards as C
from referee.game.log import Faulted, Record
from referee.game.state import DOWN, HAND, PLAY, SETUP, UP
from tests.support.budget import scaled

#: The module (the package's ``view`` is the function).
view_module = importlib.import_module("referee.game.view")

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
    listed = {(C.INT[a.cards[0]] >> 3, len(a.cards)) for a in s.legal_actions(seat) if isinstance(a, Play)}
    by_rank: dict[int, list[int]] = {}
    for c in cards:
        by_rank.setdefault(c >> 3, []).append(c)
    out = []
    for r, cs in by_rank.items():
        for k in range(1, len(cs) + 1):
            if (r, k) not in listed:
                out.append(Play(cards=[C.STR[c] for c in rng.sample(cs, k)]))
    return out


def same_rank_variants(s: GameState, seat: int, rng: random.Random) -> list[Play]:
    """Each listed play with other cards of its rank from the source, when
    the source has others: the canonical choice is only one of them."""
    src = s.source(seat)
    cards = s.hands[seat] if src == HAND else s.up[seat] if src == UP else []
    out = []
    for a in s.legal_actions(seat):
        if isinstance(a, Play):
            r = C.INT[a.cards[0]] >> 3
            same = [c for c in cards if c >> 3 == r]
            out.append(Play(cards=[C.STR[c] for c in rng.sample(same, len(a.cards))]))
    return out


def applies(s: GameState, action: object, seat: int) -> bool:
    try:
        s.copy().apply(action, seat)  # type: ignore[arg-type]
    except ActionError:
        return False
    return True


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
            for play in same_rank_variants(s, seat, rng):
                s.copy().apply(play, seat)
            if s.phase == PLAY and not s.pending_swap:
                # Draws, pick-ups and flips: applied exactly when listed.
                for other in (Draw(), Pickup(), Flip(slot=0), Flip(slot=1), Flip(slot=2)):
                    assert applies(s, other, seat) == (other in legal), (other, legal)
        s.apply(rng.choice(legal), seat)
        steps += 1
        assert s.turn <= rules.turn_limit
    check_invariants(s, total)
    res = s.result()
    assert sorted(res.places)[0] == 1
    assert all(
        res.places[d] > res.places[i] for d in res.disqualified for i in range(n) if i not in res.disqualified
    )
    return steps


def test_random_playouts_conserve_cards_and_terminate() -> None:
    """The issue's bar: 10,000 playouts over 2–6 players and variant mixes
    (2,500 in the fast suite, tests/support/budget.py)."""
    rng = random.Random(20261129)
    steps = 0
    games = scaled(10_000)
    for g in range(games):
        n = 2 + g % 5
        rules = random_rules(rng)
        steps += playout(rng.randrange(2**32), n, rules, deep=False)
    assert steps > games * 50


@settings(max_examples=scaled(150))
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


def compare_view_bytes(
    games: int, view_bytes: Callable[[ViewCache, GameState, int, int], bytes] = ViewCache.view_bytes
) -> int:
    """Compare ``view_bytes`` (the match runner's path: players kept encoded
    with the facts they show, events encoded once) with encoding view(), for
    every seat at every step of random games, from any `since`, faults and
    disqualifications included, and on copies that go separate ways with a
    cache of their own. Returns the number of comparisons."""
    compared = 0
    for seed in range(games):
        rng = random.Random(seed)
        n = 2 + seed % 5
        s = new_game(random_rules(rng), n, rng)
        cache = ViewCache()
        since = [0] * n
        while not s.over:
            for seat in range(n):
                start = rng.choice((0, since[seat], len(s.events)))
                assert view_bytes(cache, s, seat, start) == ENCODE(view(s, seat, start)), (seed, seat)
                compared += 1
            if rng.random() < 0.02:
                other = s.copy()
                seat = other.to_move()[0]
                other.apply(rng.choice(other.legal_actions(seat)), seat)
                assert view_bytes(ViewCache(), other, seat, 0) == ENCODE(view(other, seat))
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
            assert view_bytes(cache, s, seat, 0) == ENCODE(view(s, seat))
    return compared


def test_view_bytes_equals_the_encoded_view() -> None:
    games = scaled(400)
    assert compare_view_bytes(games) > games * 125


#: The facts a seat's encoded PlayerView is kept under in a ViewCache, as the
#: view shows them (`out` and `disqualified` never change alone: a seat's cards
#: change with them, and its place).
CACHED_FACTS: dict[str, Callable[[PlayerView], object]] = {
    "hand_count": lambda p: p.hand_count,
    "up": lambda p: p.up,
    "down": lambda p: (p.down_count, p.down),
    "known": lambda p: p.known,
    "place": lambda p: p.place,
}


def test_view_bytes_comparison_sees_each_cached_fact_change_alone() -> None:
    """The comparison above has teeth: in the very views it compares, each
    fact a player's cached bytes are kept under changes alone, from one view
    to the next of the same cache, while the player's bytes change. A cache
    whose key left that fact out would serve the stale bytes at that view,
    and the comparison would fail there. (Read from the views as a bot gets
    them, not from the cache's inside.)"""
    last: dict[int, tuple[ViewCache, list[PlayerView]]] = {}
    alone: Counter[str] = Counter()

    def recording(cache: ViewCache, s: GameState, seat: int, since: int) -> bytes:
        got = cache.view_bytes(s, seat, since)
        players = msgspec.json.decode(got, type=State).players
        before = last.get(id(cache))
        if before is not None and before[0] is cache:
            for old, new in zip(before[1], players):
                if old == new:
                    continue
                changed = [name for name, fact in CACHED_FACTS.items() if fact(old) != fact(new)]
                if len(changed) == 1:
                    alone[changed[0]] += 1
        last[id(cache)] = (cache, players)  # the cache kept alive: its id is not reused
        return got

    compare_view_bytes(60, recording)
    assert set(alone) == set(CACHED_FACTS), alone


def test_a_view_cache_follows_one_state() -> None:
    """A cache used on a state and on its copies as they diverge (the rule:
    it follows one state, and starts afresh on another) still gives the
    right bytes; so do caches of their own."""
    compared = 0
    for seed in range(60):
        rng = random.Random(seed)
        n = 2 + seed % 5
        s = new_game(random_rules(rng), n, rng)
        shared = ViewCache()
        for _ in range(rng.randrange(0, 120)):
            if s.over:
                break
            seat = rng.choice(s.to_move())
            shared.view_bytes(s, seat, 0)
            s.apply(rng.choice(s.legal_actions(seat)), seat)
        states = [s, s.copy(), resample(s, 0, rng)]
        own = [ViewCache() for _ in states]
        for _ in range(40):
            for k, t in enumerate(states):
                if t.over:
                    continue
                seat = rng.choice(t.to_move())
                since = rng.randrange(len(t.events) + 1)
                want = ENCODE(view(t, seat, since))
                assert shared.view_bytes(t, seat, since) == want
                assert own[k].view_bytes(t, seat, since) == want
                assert ENCODE(view(t, seat, since, shared)) == want
                assert ENCODE(view(t, seat, since, own[k])) == want
                compared += 1
                t.apply(rng.choice(t.legal_actions(seat)), seat)
    assert compared > 3000


def test_the_state_holds_no_wire_forms() -> None:
    """Views leave nothing in the state: copies and resampled worlds copy
    rules and cards, never bytes or wire events."""
    for s, _ in mid_game_states(30, seed=5):
        cache = ViewCache()
        for seat in range(s.n):
            cache.view_bytes(s, seat, 0)
            view(s, seat, 0, cache)
        # Every attribute (dir(): a class compiled by mypyc has no __slots__).
        stack: list[object] = [
            v for name in dir(s) if not name.startswith("__") and not callable(v := getattr(s, name))
        ]
        assert len(stack) > 30
        while stack:
            value = stack.pop()
            assert not isinstance(value, (bytes, Event)), value
            if isinstance(value, (list, tuple)):
                stack += value
            elif isinstance(value, dict):
                stack += list(value.values())


def _example(kind: type[typing.Any]) -> typing.Any:
    """A record of ``kind`` with a plain value in every field."""
    plain = {int: 1, str: "x", bool: True}
    values: dict[str, object] = {}
    for f in msgspec.structs.fields(kind):
        if typing.get_origin(f.type) is tuple:
            values[f.name] = (2, 3)
        else:  # a plain type, or one of them or None
            values[f.name] = plain[
                next(t for t in typing.get_args(f.type) or (f.type,) if t is not type(None))
            ]
    return kind(**values)


@pytest.mark.parametrize("kind", typing.get_args(Record), ids=lambda k: k.__name__)
def test_every_kind_of_record_has_a_wire_form(kind: type[typing.Any]) -> None:
    record = _example(kind)
    wire = view_module.event(7, record)
    assert (wire.seq, wire.type, wire.seat) == (7, record.type, record.seat)


def test_a_fault_keeps_its_kind_and_detail_apart() -> None:
    s = new_game(Rules(), 2, random.Random(1))
    s.note_fault(0, "bad_json", "expected ':' at 1:7")
    s.note_fault(1, "timeout")
    assert s.events[-2:] == [Faulted(0, "bad_json", "expected ':' at 1:7"), Faulted(1, "timeout", None)]
    first, second = view(s, 0, len(s.events) - 2).events
    assert (first.kind, first.detail) == ("bad_json", "expected ':' at 1:7")
    assert (second.kind, second.detail) == ("timeout", None)


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
