"""Schedules (issue 13): round-robin as lazy blocks, balanced rounds, adaptive
tables; balance, determinism, stopping, bots taken in and retired."""

from __future__ import annotations

import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.tournament.league import Ratings
from referee.tournament.ratings import Outcome, Standing, Table
from referee.tournament.schedule import (
    RETEST_SHARE,
    AdaptiveScheduler,
    BalancedScheduler,
    GameSpec,
    RoundRobinScheduler,
    Scheduler,
    deal_seed,
    make_schedule,
    schedule_size,
)


def names(n: int) -> list[str]:
    return [f"b{i:02d}" for i in range(n)]


def all_blocks(s: Scheduler, standings: Sequence[Standing] | None = None) -> list[list[GameSpec]]:
    blocks = []
    for k in itertools.count():
        b = s.block(k, standings if k >= 2 else None)
        if not b:
            return blocks
        blocks.append(b)
    raise AssertionError  # pragma: no cover


# ------------------------------------------------------------- round-robin


def old_make_schedule(
    bots: list[str], table_size: int, rounds: int, duplicate: bool, seed: int
) -> list[GameSpec]:
    """The round-robin as it was before issue 13 (every combination built)."""
    meetings = list(itertools.combinations(bots, table_size))
    keys = [(r, k, m) for r in range(rounds) for k in range(table_size) for m in range(len(meetings))]
    if len(meetings) == 1:
        keys.sort(key=lambda rkm: (rkm[1], rkm[0]))
    return [
        GameSpec(
            index=i,
            round=r,
            meeting=m,
            rotation=k,
            deal_seed=deal_seed(seed, r, m, 0 if duplicate else k),
            seats=tuple(meetings[m][(s + k) % table_size] for s in range(table_size)),
        )
        for i, (r, k, m) in enumerate(keys)
    ]


@pytest.mark.parametrize(
    "bots, size, rounds, duplicate",
    [
        (5, 4, 2, True),
        (4, 2, 1, True),
        (3, 3, 3, True),
        (6, 3, 1, False),
        (4, 4, 1, True),
        (9, 3, 2, True),
        (7, 2, 3, False),
    ],
)
def test_round_robin_blocks_are_todays_schedule(bots: int, size: int, rounds: int, duplicate: bool) -> None:
    want = old_make_schedule(names(bots), size, rounds, duplicate, 7)
    assert make_schedule(names(bots), size, rounds, duplicate, 7) == want
    for chunk in (1, 5, 64, 4096):
        rr = RoundRobinScheduler(names(bots), size, rounds, duplicate, 7, chunk=chunk)
        assert rr.total == len(want) == schedule_size(bots, size, rounds)
        assert [g for b in all_blocks(rr) for g in b] == want
        assert rr.stopped == "done"


def test_round_robin_of_a_huge_league_is_lazy() -> None:
    """1,000 bots at 6 seats is 8e15 games: any block is there at once,
    found from the combination's rank, never from a list of combinations."""
    rr = RoundRobinScheduler(names(1000), 6, 1, True, 1)
    assert rr.total == math.comb(1000, 6) * 6
    t0 = time.perf_counter()
    first = rr.block(0, None)
    far = rr.games(rr.size - 3, rr.size + 5)
    assert time.perf_counter() - t0 < 2
    assert len(first) == 4096 and first[1].seats == ("b00", "b01", "b02", "b03", "b04", "b06")
    assert len(far) == 3 and far[-1].seats == ("b999", "b994", "b995", "b996", "b997", "b998")
    assert far[-1].index == rr.size - 1 and far[-1].rotation == 5
    assert set(far[-1].seats) == {f"b{i}" for i in range(994, 1000)}


def test_round_robin_ranks_every_combination() -> None:
    rr = RoundRobinScheduler(names(12), 4, 1, True, 3, chunk=37)
    combos = list(itertools.combinations(names(12), 4))
    rng = random.Random(5)
    for start in rng.sample(range(rr.size), 40):
        g = rr.games(start, start + 1)[0]
        assert tuple(sorted(g.seats)) == combos[g.meeting]
        assert g.seats[0] == combos[g.meeting][g.rotation]


def test_round_robin_refuses_new_bots() -> None:
    rr = RoundRobinScheduler(names(4), 2, 1, True, 1)
    with pytest.raises(ValueError, match='use schedule = "balanced" or "adaptive"'):
        rr.add_bot("new")
    with pytest.raises(ValueError, match="round-robin"):
        rr.retire_bot("b00")


# ---------------------------------------------------------------- balanced


def pair_counts(games: Sequence[GameSpec], bots: Sequence[str]) -> list[int]:
    met: Counter[tuple[str, str]] = Counter()
    for g in games:
        if g.rotation == 0:
            met.update(itertools.combinations(sorted(g.seats), 2))
    return [met[p] for p in itertools.combinations(sorted(bots), 2)]


def check_balanced(n: int, size: int, rounds: int, spread: int) -> None:
    """Every property of a balanced schedule of `n` bots, round by round."""
    bots = names(n)
    s = BalancedScheduler(bots, size, rounds, True, 11)
    assert s.total == rounds * (n // size) * size
    blocks = all_blocks(s)
    games = [g for b in blocks for g in b]
    assert [g.index for g in games] == list(range(len(games))) and len(games) == s.total
    by_round: dict[int, list[GameSpec]] = {}
    for g in games:
        by_round.setdefault(g.round, []).append(g)
    assert sorted(by_round) == list(range(rounds))
    played: Counter[str] = Counter()
    so_far: list[GameSpec] = []
    for r in range(rounds):
        tables: dict[int, list[GameSpec]] = {}
        for g in by_round[r]:
            tables.setdefault(g.meeting, []).append(g)
        assert len(tables) == n // size
        seated = [b for t in tables.values() for b in t[0].seats]
        assert len(seated) == len(set(seated))  # every bot at one table at most
        for t in tables.values():
            # each table: every rotation once, one deal, every bot in every seat once
            assert sorted(g.rotation for g in t) == list(range(size))
            assert len({g.deal_seed for g in t}) == 1
            for seat in range(size):
                assert len({g.seats[seat] for g in t}) == size
        for g in by_round[r]:
            played.update(g.seats)
        counts = [played[b] for b in bots]
        assert max(counts) - min(counts) <= (0 if n % size == 0 else size)
        so_far += by_round[r]
        pairs = pair_counts(so_far, bots)
        assert max(pairs) - min(pairs) <= spread, (n, size, r, max(pairs), min(pairs))
    assert len({g.deal_seed for g in games}) == len(games) // size  # a new deal every table
    # a deal's rotations are spread apart: the other tables of its block in between
    for b in blocks:
        per_rotation = len(b) // size
        seen: dict[int, int] = {}
        for g in b:
            if g.deal_seed in seen and per_rotation > 1:
                assert g.index - seen[g.deal_seed] >= per_rotation
            seen[g.deal_seed] = g.index


#: The most any two pairs' meetings differ after any round, for up to 60 bots
#: and 20 rounds (measured: 4 at most; 2 or 3 for most leagues).
SPREAD = 4


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 6).flatmap(lambda size: st.tuples(st.just(size), st.integers(size, 60))), st.integers(1, 8)
)
def test_balanced_is_balanced(size_n: tuple[int, int], rounds: int) -> None:
    size, n = size_n
    check_balanced(n, size, rounds, SPREAD)


@pytest.mark.slow
@pytest.mark.parametrize("size", [2, 3, 4, 5, 6])
def test_balanced_is_balanced_for_every_league_up_to_60_bots(size: int) -> None:
    for n in range(size, 61):
        check_balanced(n, size, 12, SPREAD)


@pytest.mark.parametrize("n, size, rounds", [(60, 6, 4), (40, 4, 6), (30, 2, 25), (48, 3, 12)])
def test_balanced_pairs_meet_once_before_any_meets_twice(n: int, size: int, rounds: int) -> None:
    """While the numbers allow it, no pair meets twice."""
    s = BalancedScheduler(names(n), size, rounds, True, 3)
    pairs = pair_counts([g for b in all_blocks(s) for g in b], names(n))
    assert max(pairs) == 1


def test_balanced_single_table_rounds_go_two_by_two() -> None:
    """5 bots at 4 seats: one table a round, one bot out (each in turn); a
    block holds two rounds so a deal's rotations are not back to back."""
    s = BalancedScheduler(names(5), 4, 5, True, 1)
    blocks = all_blocks(s)
    assert [len(b) for b in blocks] == [8, 8, 4]
    assert [g.round for g in blocks[0]] == [0, 1] * 4
    assert pair_counts([g for b in blocks for g in b], names(5)) == [3] * 10
    assert sorted(Counter(x for b in blocks for g in b for x in g.seats).values()) == [16] * 5


def test_1000_bots_at_6_seats_start_at_once() -> None:
    t0 = time.perf_counter()
    s = BalancedScheduler(names(1000), 6, 100, True, 1)
    first = s.block(0, None)
    assert time.perf_counter() - t0 < 1.0
    assert len(first) == 996 and len({b for g in first for b in g.seats}) == 996


def test_balanced_and_round_robin_are_deterministic() -> None:
    for make in (
        lambda seed: BalancedScheduler(names(23), 4, 6, True, seed),
        lambda seed: RoundRobinScheduler(names(9), 3, 2, True, seed, chunk=50),
    ):
        a, b, c = all_blocks(make(1)), all_blocks(make(1)), all_blocks(make(2))
        assert a == b and a != c


def test_blocks_come_in_order() -> None:
    s = BalancedScheduler(names(8), 2, 3, True, 1)
    s.block(0, None)
    with pytest.raises(ValueError, match="expected block 1"):
        s.block(2, None)


def test_balanced_takes_in_and_retires_bots_between_blocks() -> None:
    s = BalancedScheduler(names(9), 3, 8, True, 1)
    before = s.block(0, None) + s.block(1, None)
    s.add_bot("new")
    s.retire_bot("b00")
    with pytest.raises(ValueError, match="already"):
        s.add_bot("b01")
    with pytest.raises(ValueError, match="not in the league"):
        s.retire_bot("b00")
    assert s.total == len(before) + 6 * 9
    after = [g for b in all_blocks_from(s, 2) for g in b]
    assert len(after) == 6 * 9
    assert all("b00" not in g.seats for g in after)
    assert "b00" in {x for g in before for x in g.seats}
    # the newcomer plays every round it can (it has the fewest games: never out)
    assert Counter(x for g in after for x in g.seats)["new"] == 6 * 3
    assert [g.index for g in before + after] == list(range(len(before) + len(after)))


def all_blocks_from(
    s: Scheduler, k0: int, standings: Sequence[Standing] | None = None
) -> list[list[GameSpec]]:
    out = []
    for k in itertools.count(k0):
        b = s.block(k, standings)
        if not b:
            return out
        out.append(b)
    raise AssertionError  # pragma: no cover


# ---------------------------------------------------------------- adaptive


def play(g: GameSpec, strength: dict[str, float], noise: float = 4.0) -> Outcome:
    """A simulated game: performance = strength + noise, best finishes first."""
    rng = random.Random(g.deal_seed * 7 + g.rotation)
    perf = [strength[b] + rng.gauss(0, noise) for b in g.seats]
    order = sorted(range(len(g.seats)), key=lambda s: -perf[s])
    places = [0] * len(g.seats)
    for place, seat in enumerate(order, 1):
        places[seat] = place
    return Outcome(index=g.index, seats=list(g.seats), places=places, deal=g.deal_seed)


class League:
    """A scheduler driven like the runner drives it: block k planned from the
    standings after the blocks before k-1."""

    def __init__(
        self,
        s: AdaptiveScheduler,
        strength: dict[str, float],
        tau: float = 0.0,
        game: Callable[[GameSpec, dict[str, float]], Outcome] | None = None,
    ) -> None:
        self.s = s
        self.strength = strength
        self.game = game or play
        self.table = Table(list(strength), Ratings(tau=tau))
        self.blocks: list[list[GameSpec]] = []
        self.seen: list[list[Standing] | None] = []
        self.applied = 0

    def step(self) -> bool:
        k = len(self.blocks)
        standings = None
        if k >= 2:
            while self.applied < k - 1:
                for g in self.blocks[self.applied]:
                    self.table.add(self.game(g, self.strength))
                self.applied += 1
            standings = self.table.standings(self.s.confidence)
        self.seen.append(standings)
        b = self.s.block(k, standings)
        if b:
            self.blocks.append(b)
        return bool(b)

    def run(self, steps: int = 10_000) -> None:
        for _ in range(steps):
            if not self.step():
                return

    @property
    def games(self) -> list[GameSpec]:
        return [g for b in self.blocks for g in b]


def spaced(n: int, gap: float) -> dict[str, float]:
    return {b: 25 + gap * (n / 2 - i) for i, b in enumerate(names(n))}


def test_adaptive_stops_once_the_order_is_settled() -> None:
    lg = League(AdaptiveScheduler(names(6), 2, 1, True, 5, confidence=0.95, max_games=5000), spaced(6, 3))
    lg.run()
    assert lg.s.stopped == "confidence" and lg.s.total is None and lg.s.limit == 5000
    last = lg.seen[-1]
    assert last is not None
    assert all(r.p_above_next is not None and r.p_above_next >= 0.95 for r in last[:-1])
    before = lg.seen[-2]
    assert before is not None
    assert any(r.p_above_next is not None and r.p_above_next < 0.95 for r in before[:-1])
    assert [r.bot for r in last] == names(6)  # the true order
    assert [g.index for g in lg.games] == list(range(len(lg.games)))
    # the first two blocks are balanced rounds (no standings yet): everyone plays
    assert {x for g in lg.blocks[0] for x in g.seats} == set(names(6))


def test_adaptive_top_settles_fewer_pairs_sooner() -> None:
    full = League(AdaptiveScheduler(names(10), 2, 1, True, 5, max_games=20000), spaced(10, 2.5))
    full.run()
    top = League(AdaptiveScheduler(names(10), 2, 1, True, 5, top=2, max_games=20000), spaced(10, 2.5))
    top.run()
    assert full.s.stopped == top.s.stopped == "confidence"
    assert len(top.games) < len(full.games)
    last = top.seen[-1]
    assert last is not None and [r.bot for r in last[:2]] == names(2)
    assert all(r.rank_low > 2 for r in last[2:])  # nobody below can still be in the top 2
    assert all(r.p_above_next is not None and r.p_above_next >= 0.95 for r in last[:2])


def test_adaptive_stops_at_max_games() -> None:
    equal = dict.fromkeys(names(8), 25.0)  # never separated
    lg = League(AdaptiveScheduler(names(8), 4, 1, True, 5, max_games=302), equal)
    lg.run()
    assert lg.s.stopped == "max_games"
    assert 302 - 4 < len(lg.games) <= 302
    assert all(len(g.seats) == 4 for g in lg.games)
    # whole tables only: every deal of the league has all its rotations
    assert set(Counter(g.deal_seed for g in lg.games).values()) == {4}


def entries_of(bots: dict[str, int]) -> dict[str, str]:
    """League entries by bot: {"t": 2} gives entries t-00 and t-01."""
    return {f"{bot}-{i:02d}": bot for bot, n in bots.items() for i in range(n)}


def deterministic(
    kind: dict[str, str], level: dict[str, float]
) -> Callable[[GameSpec, dict[str, float]], Outcome]:
    """Games between deterministic bots, several entries each: the places are
    a function of the deal and of which bot holds each seat, never of the
    entry, so the entries of one bot are truly equal (only the seat and the
    bots around it tell them apart) and a deal's rotations cancel out."""

    def game(g: GameSpec, _: dict[str, float]) -> Outcome:
        bots = tuple(kind[e] for e in g.seats)
        perf = [level[b] + random.Random(f"{g.deal_seed}:{s}:{bots}").gauss(0, 1) for s, b in enumerate(bots)]
        order = sorted(range(len(bots)), key=lambda s: -perf[s])
        places = [0] * len(bots)
        for place, seat in enumerate(order, 1):
            places[seat] = place
        return Outcome(index=g.index, seats=list(g.seats), places=places, deal=g.deal_seed)

    return game


def entries_league(
    counts: dict[str, int], level: dict[str, float], seed: int, max_games: int
) -> tuple[dict[str, str], list[Standing]]:
    """An adaptive league of several entries of each bot, 4-seat tables,
    played to `max_games` (entries of one bot never settle): each entry's bot
    and the final standings."""
    kind = entries_of(counts)
    lg = League(
        AdaptiveScheduler(list(kind), 4, 1, True, seed, max_games=max_games),
        dict.fromkeys(kind, 0.0),
        tau=Ratings().tau,
        game=deterministic(kind, level),
    )
    lg.run()
    assert lg.s.stopped == "max_games"
    return kind, lg.table.standings()


def same_bot_separated(kind: dict[str, str], rows: Sequence[Standing]) -> list[tuple[str, str, float | None]]:
    """Neighbours of the standings, entries of one bot, reported separated."""
    return [
        (a.bot, b.bot, a.p_above_next)
        for a, b in zip(rows, rows[1:])
        if kind[a.bot] == kind[b.bot] and a.separated_below
    ]


@pytest.mark.parametrize("seed", [1, 5])
def test_adaptive_does_not_separate_the_entries_of_one_bot(seed: int) -> None:
    """Issue 13 (tests/tournament/test_adaptive_run.py, 40 entries of 3 sample
    bots, without HTTP): the windows stopped seating a pair once it looked
    separated, so a gap between two groups of one bot's entries, made by
    chance early (the entries sorted by their first games' luck), was never
    tested again, and the games of each group among themselves made it look
    surer with every block (a batch Bradley–Terry fit of those games sees the
    gap too: it is in the games the schedule chose). Before separated pairs
    were seated again, 5 of these leagues in 10 (seeds 0-9) separated two
    entries of one bot, seeds 1 and 5 among them; now none of the 10 do."""
    counts = {"tactician": 8, "greedy": 8, "random": 8}
    kind, rows = entries_league(counts, {"tactician": 3.0, "greedy": 1.5, "random": 0.0}, seed, 600)
    assert [kind[r.bot] for r in rows] == [bot for bot, n in counts.items() for _ in range(n)]
    assert not same_bot_separated(kind, rows)


@pytest.mark.parametrize("seed", [2, 3])
def test_adaptive_orders_the_entries_of_two_close_bots(seed: int) -> None:
    """Issue 13, the shape of tests/tournament/test_adaptive_run.py: 14, 13
    and 13 entries of three bots, the first two close (a "tactician" beats a
    "greedy" in about 64% of their meetings here, 60% in the real league),
    1,500 games. The order by bot needs many games at the boundary between
    the two groups. Seating the least settled pairs first spent them on the
    pairs of equal entries (p near 1/2 for ever) and starved the entries next
    to a nearly settled boundary (as few as 16 games, others 250): 7
    leagues in 10 (seeds 0-9) ordered some greedy entry above a tactician,
    seeds 2 and 3 among them. Nearest to settling first (within the games
    left), 1 in 10 does."""
    counts = {"tactician": 14, "greedy": 13, "random": 13}
    kind, rows = entries_league(counts, {"tactician": 2.0, "greedy": 1.5, "random": 0.0}, seed, 1500)
    assert [kind[r.bot] for r in rows] == [bot for bot, n in counts.items() for _ in range(n)]
    assert not same_bot_separated(kind, rows)


def test_adaptive_weights_nearest_to_settling_first_within_the_games_left() -> None:
    """A pair the games left can settle comes before one they cannot (one
    that looks equal, above all); among the first, the one needing the most
    games first, so that they settle together; among the others, the one
    needing the fewest."""
    s = AdaptiveScheduler(names(8), 2, 1, True, 1, max_games=10**6)
    s.block(0, None)
    s.block(1, None)
    order = list(range(8))
    probs = [0.5, 0.9, 0.97, 0.55, 0.7, 0.999, 0.6]  # 0.999 alone is separated
    open_pairs = [0, 1, 2, 3, 4, 6]
    w = s.weights(order, probs, open_pairs)
    assert w[0] == w[3] > w[6] > w[4] > w[1] > w[2] > 1.0  # |z| < LOOKS_EQUAL_Z: as if at LOOKS_EQUAL_Z
    s.max_games = s.next_index + 8 * 8 // 2  # 8 more games a bot
    w = s.weights(order, probs, open_pairs)
    assert w[1] > w[2] > 1.0 > w[4] > w[6] > w[3] == w[0] > 0


def test_adaptive_seats_the_unsettled_neighbours() -> None:
    """Given standings where only ranks 3-4 are unsettled, every table of the
    block seats that pair, but for one in RETEST_SHARE that seats a separated
    pair again (the one whose bots have met least)."""
    s = AdaptiveScheduler(names(8), 2, 1, True, 1)
    s.block(0, None)
    s.block(1, None)
    rows = [
        Standing(
            bot=b,
            mu=40 - 3 * i,
            sigma=0.5,
            score=0,
            games=8,
            wins=0,
            avg_place=0,
            faults={},
            p_above_next=(0.6 if i == 3 else 0.99) if i < 7 else None,
            rank=i + 1,
        )
        for i, b in enumerate(names(8))
    ]
    block = s.block(2, rows)
    tables = Counter(frozenset(g.seats) for g in block)
    assert tables.pop(frozenset({"b03", "b04"})) == 2 * 2  # two tables a bot at most
    assert sum(tables.values()) == 2 * (4 // RETEST_SHARE)
    assert all(tuple(sorted(t)) in set(zip(names(8), names(8)[1:])) for t in tables)
    rows[3].p_above_next = 0.97
    assert s.block(3, rows) == [] and s.stopped == "confidence"


def test_adaptive_is_deterministic_and_replays_on_resume() -> None:
    """Same league, same results: the same blocks; a scheduler re-created and
    asked for blocks 0..k again with the same standings gives them again."""
    a = League(AdaptiveScheduler(names(12), 3, 1, True, 9, max_games=3000), spaced(12, 2))
    a.run()
    b = League(AdaptiveScheduler(names(12), 3, 1, True, 9, max_games=3000), spaced(12, 2))
    b.run()
    assert a.blocks == b.blocks and len(a.blocks) > 4
    again = AdaptiveScheduler(names(12), 3, 1, True, 9, max_games=3000)
    for k, standings in enumerate(a.seen[: len(a.blocks)]):
        assert again.block(k, standings) == a.blocks[k]
    other = League(AdaptiveScheduler(names(12), 3, 1, True, 10, max_games=3000), spaced(12, 2))
    other.run(4)
    assert other.blocks[0] != a.blocks[0]


def test_adaptive_takes_in_a_bot_and_seats_it_first_until_it_catches_up() -> None:
    strength = spaced(10, 2)
    s = AdaptiveScheduler(names(9), 2, 1, True, 2, max_games=20000)
    lg = League(s, {b: strength[b] for b in names(9)})
    for _ in range(6):
        assert lg.step()
    lg.table.add_bot("b09")
    lg.strength["b09"] = strength["b09"]
    s.add_bot("b09")
    median = sorted(s.games[s.ids[b]] for b in names(9))[4]
    assert lg.step()
    first = lg.blocks[-1]
    assert "b09" in first[0].seats  # its tables come first
    while s.newcomers:
        assert lg.step()
    assert s.games[s.ids["b09"]] >= median
    lg.run()
    assert s.stopped == "confidence"
    last = lg.seen[-1]
    assert last is not None and [r.bot for r in last] == names(10)


def test_adaptive_retires_a_bot() -> None:
    s = AdaptiveScheduler(names(8), 2, 1, True, 2, max_games=20000)
    lg = League(s, spaced(8, 2.5))
    for _ in range(4):
        assert lg.step()
    s.retire_bot("b03")
    lg.table.retire("b03")
    n = len(lg.blocks)
    lg.run()
    assert s.stopped == "confidence"
    assert all("b03" not in g.seats for b in lg.blocks[n:] for g in b)
    last = lg.seen[-1]
    assert last is not None
    rest = [r for r in last if r.bot != "b03"]
    assert [r.bot for r in rest] == [b for b in names(8) if b != "b03"]


def test_adaptive_needs_standings_after_the_first_two_blocks() -> None:
    s = AdaptiveScheduler(names(4), 2, 1, True, 1)
    s.block(0, None)
    s.block(1, None)
    with pytest.raises(ValueError, match="needs the standings"):
        s.block(2, None)


def test_adaptive_default_max_games() -> None:
    s = AdaptiveScheduler(names(10), 4, 1, True, 1)
    assert s.limit == 20 * 10 * 4
    s.add_bot("late")
    assert s.limit == 20 * 11 * 4


def test_adaptive_seats_a_new_bot_the_standings_do_not_show_yet() -> None:
    """The standings a block is planned from predate the new bot: it is
    placed in the middle, unsettled, and gets the first tables."""
    s = AdaptiveScheduler(names(8), 2, 1, True, 1)
    s.block(0, None)
    s.block(1, None)
    rows = [
        Standing(
            bot=b,
            mu=40 - 3 * i,
            sigma=0.5,
            score=0,
            games=8,
            wins=0,
            avg_place=0,
            faults={},
            p_above_next=0.99 if i < 7 else None,
            rank=i + 1,
        )
        for i, b in enumerate(names(8))
    ]
    s.add_bot("late")
    block = s.block(2, rows)
    assert block and "late" in block[0].seats
    assert {x for g in block for x in g.seats} >= {"late", "b03", "b04"}
    assert s.stopped is None


@pytest.mark.parametrize("make", [BalancedScheduler, AdaptiveScheduler])
def test_too_few_bots_for_a_table_end_the_league(make: type[BalancedScheduler]) -> None:
    s = make(["a"], 2, 3, True, 1)
    assert s.block(0, None) == [] and s.stopped == "bots"
