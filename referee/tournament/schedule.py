"""Which games a league plays, block by block: round-robin, balanced, adaptive.

Every schedule seats ``table_size`` bots at a table (a *meeting*) and plays
it once per seat rotation, so every bot of the table starts ([D3]: seat 0
starts) equally often; with ``duplicate``, all rotations of a meeting use the
same deal, so every bot holds every seat's cards of it and luck cancels out.
Each game's deal seed is a hash of (seed, round, meeting, rotation), so it does
not depend on the order games are played in. The games of one deal are spread
apart: rotation k of every table of a block comes before rotation k+1.

A :class:`Scheduler` hands out the games in *blocks*, k = 0, 1, 2, ...; block k
may look at the standings after every game of the blocks before k-1, so the
workers play block k-1 while block k is decided (one block of look-ahead).

``round-robin`` (:class:`RoundRobinScheduler`)
    Every combination of ``table_size`` bots, every rotation, every round, in
    the order of :func:`make_schedule`; blocks are fixed chunks of that order,
    each produced on demand (a combination is found from its rank), so no
    list of all combinations is ever built.
``balanced`` (:class:`BalancedScheduler`)
    ``rounds`` rounds; in a round every bot sits at one table (when the bot
    count is not a multiple of ``table_size``, the bots with the most games
    sit the round out). Tables are formed so that pairs meet as evenly as the
    numbers allow: each pair seated together costs sinh of how far its
    meetings would be above the mean after the round (a gain below it); a
    greedy seating, then swaps between tables (and with bots sitting out that
    have as many games) while a swap lowers the cost; up to 64 bots the best
    of four such seatings. Nothing of size C(n, k) is built: a round costs
    O(n x 64 x k) plus the swaps. One block per round (two rounds when a
    round has a single table, so that a deal's rotations are spread apart).
``adaptive`` (:class:`AdaptiveScheduler`)
    Balanced rounds first (``rounds`` of them, and at least the first two
    blocks, which have no standings to go by), then each block seats the
    neighbours of the standings whose order is not settled (not separated at
    ``[stop] confidence``: see :func:`~referee.tournament.settle.separations`):
    windows of ``table_size`` consecutive places around the pairs that
    need them most (:meth:`AdaptiveScheduler.weights`: of the pairs that
    the games left can settle, the one needing the most games first; then
    the others, the one needing the fewest first), a pair's weight halving
    with each table that seats it, at most about one round's worth of tables
    per block and two tables per bot. Pairs that look equal, which no budget
    may settle, come last: spending the games on them first (the least
    settled first, as this schedule did before) starved the bots next to a
    nearly settled boundary (24 games against 150 for others, issue 13),
    kept groups of equal bots playing among themselves, and ordered the
    entries of two close bots worse than a balanced schedule did.
    One table in :data:`RETEST_SHARE` of a block seats a pair that is
    separated already, the one whose two bots have met least (two places
    above and below its boundary): a separation made by the luck of the
    first games is tested again with fresh games rather than kept for ever
    (issue 13: entries of one bot sorted into two groups by that luck, each
    group then playing among itself, looked ever surer apart).
    With ``top = N`` only the pairs of the first N places count, and a bot
    below them whose rank interval (``rank_low``) still reaches into them gets
    a table with the bots around place N. The league ends when nothing is
    left to settle, or at ``max_games`` (whole tables only; default 20 x bots
    x table_size). A league that stopped at its budget may be extended
    (``[stop] extended_from`` lists the budgets it stopped at, ``max_games``
    is the new one): each earlier budget rules until the schedule reaches
    it, so the games played are planned again exactly as they were and the
    next ones follow on the same seed (the service's *extend the final*).

``[stop] max_games`` caps the other schedules too: a round-robin plays its
first ``max_games`` games in its order, a balanced one its whole tables
within them.

Balanced and adaptive schedules take in a new bot or retire one between
blocks. A new bot is seated first until its games catch up with the median:
balanced seats it every round (those with the most games sit out), adaptive
gives it the first tables of each block, around its place in the standings
(in the middle while the standings do not list it yet).
Everything is deterministic from the seed, the standings given and the calls
made, so a scheduler re-created and asked for blocks 0..k again (``--resume``)
gives the same games.
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec

from .settle import LOOKS_EQUAL_Z, more_games, normal_cdf, separations, z_of

if TYPE_CHECKING:
    from .league import League
    from .ratings import Standing


class GameSpec(msgspec.Struct, frozen=True, kw_only=True):
    #: Position in the schedule; ratings are applied in this order.
    index: int
    round: int
    #: Which table: the index of the combination of bots (round-robin) or the
    #: table's number within its round (balanced, adaptive).
    meeting: int
    #: Seat rotation: seat s holds the meeting's bot (s + rotation) % size.
    rotation: int
    #: The deal: same seed, same cards by seat.
    deal_seed: int
    #: Bot names by seat.
    seats: tuple[str, ...]


def deal_seed(seed: int, round_: int, meeting: int, rotation: int) -> int:
    """A 63-bit seed derived from the league seed by hashing, so each game's
    deal does not depend on the order games are played in."""
    digest = hashlib.sha256(f"3up3down:{seed}:{round_}:{meeting}:{rotation}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def schedule_size(bots: int, table_size: int, rounds: int) -> int:
    """How many games :func:`make_schedule` lists: every meeting of
    `table_size` of the `bots`, in every seat rotation, every round."""
    return math.comb(bots, table_size) * table_size * rounds


def make_schedule(
    bots: list[str], table_size: int, rounds: int, duplicate: bool, seed: int
) -> list[GameSpec]:
    """The whole round-robin at once (small leagues; see :class:`RoundRobinScheduler`)."""
    rr = RoundRobinScheduler(bots, table_size, rounds, duplicate, seed)
    return rr.games(0, rr.size)


class Scheduler(Protocol):
    """What the runner plays: the games, block by block."""

    @property
    def total(self) -> int | None:
        """The games in all when known in advance (None for adaptive)."""

    @property
    def limit(self) -> int | None:
        """The most games the league can play (adaptive: ``max_games``)."""

    @property
    def stopped(self) -> str | None:
        """Why the last block was empty: "done" (the schedule is over),
        "confidence" (adaptive: the order is settled), "max_games", or "bots"
        (fewer active bots than seats); None while games remain."""

    def block(self, k: int, standings: Sequence[Standing] | None) -> list[GameSpec]:
        """Block k's games (k = 0, 1, 2, ... in order, once each): indexes go
        on from the previous block's. `standings`: the table after every game
        of the blocks before k-1, applied in index order (None for k < 2).
        An empty list: the league is over."""

    def add_bot(self, name: str) -> None:
        """Take in a new bot (or bring a retired one back) from the next block."""

    def retire_bot(self, name: str) -> None:
        """Seat this bot at no more tables from the next block."""


def make_scheduler(league: League) -> Scheduler:
    """The scheduler of `league`'s ``[tournament] schedule``."""
    t = league.tournament
    names = [b.name for b in league.bots]
    stop = league.stop
    if t.schedule == "round-robin":
        return RoundRobinScheduler(
            names, t.table_size, t.rounds, t.duplicate, t.seed, max_games=stop.max_games
        )
    if t.schedule == "balanced":
        return BalancedScheduler(names, t.table_size, t.rounds, t.duplicate, t.seed, max_games=stop.max_games)
    if t.schedule == "adaptive":
        return AdaptiveScheduler(
            names,
            t.table_size,
            t.rounds,
            t.duplicate,
            t.seed,
            confidence=stop.confidence,
            top=stop.top,
            max_games=stop.max_games,
            extended_from=stop.extended_from,
        )
    raise ValueError(f"unknown schedule {t.schedule!r}")


# ------------------------------------------------------------- round-robin


#: Games per block of a round-robin.
ROUND_ROBIN_BLOCK = 4096


class RoundRobinScheduler:
    """Every combination, every rotation, every round: game ``i`` is round
    ``i // (size * M)``, rotation ``(i // M) % size``, combination ``i % M``
    (``M`` combinations, in lexicographic order); with a single combination
    the rounds are interleaved instead (round ``i % rounds``, rotation
    ``i // rounds``). Blocks are chunks of `chunk` games in that order."""

    def __init__(
        self,
        bots: Sequence[str],
        table_size: int,
        rounds: int,
        duplicate: bool,
        seed: int,
        *,
        chunk: int = ROUND_ROBIN_BLOCK,
        max_games: int | None = None,
    ) -> None:
        self.bots = list(bots)
        self.table_size = table_size
        self.rounds = rounds
        self.duplicate = duplicate
        self.seed = seed
        self.chunk = chunk
        self.meetings = math.comb(len(self.bots), table_size) if len(self.bots) >= table_size else 0
        self.size = self.meetings * table_size * rounds
        #: ``[stop] max_games``: the schedule's first games only, in its order.
        self.max_games = max_games
        if max_games is not None:
            self.size = min(self.size, max_games)
        self._stopped: str | None = None

    @property
    def total(self) -> int | None:
        return self.size

    @property
    def limit(self) -> int | None:
        return self.size

    @property
    def stopped(self) -> str | None:
        return self._stopped

    def block(self, k: int, standings: Sequence[Standing] | None) -> list[GameSpec]:
        start = k * self.chunk
        if start >= self.size:
            full = self.max_games is None or self.size < self.max_games
            self._stopped = "done" if full else "max_games"
            return []
        return self.games(start, min(self.size, start + self.chunk))

    def add_bot(self, name: str) -> None:
        raise ValueError(
            f"cannot take in bot {name!r}: a round-robin plays the combinations of the "
            'bots it started with; use schedule = "balanced" or "adaptive"'
        )

    def retire_bot(self, name: str) -> None:
        raise ValueError(
            f"cannot retire bot {name!r}: a round-robin plays the combinations of the "
            'bots it started with; use schedule = "balanced" or "adaptive"'
        )

    def games(self, start: int, stop: int) -> list[GameSpec]:
        """Games `start` to `stop` (excluded) of the schedule."""
        size, m_count, n = self.table_size, self.meetings, len(self.bots)
        out: list[GameSpec] = []
        comb: list[int] = []
        last_m = -2
        for i in range(start, min(stop, self.size)):
            if m_count == 1:
                k, r, m = i // self.rounds, i % self.rounds, 0
            else:
                r, rest = divmod(i, size * m_count)
                k, m = divmod(rest, m_count)
            if m == last_m + 1 and comb:
                _next_combination(comb, n)
            elif m != last_m:
                comb = _unrank_combination(m, n, size)
            last_m = m
            seats = tuple(self.bots[comb[(s + k) % size]] for s in range(size))
            out.append(
                GameSpec(
                    index=i,
                    round=r,
                    meeting=m,
                    rotation=k,
                    deal_seed=deal_seed(self.seed, r, m, 0 if self.duplicate else k),
                    seats=seats,
                )
            )
        return out


def _unrank_combination(rank: int, n: int, k: int) -> list[int]:
    """The `rank`-th k-subset of range(n) in lexicographic order."""
    out: list[int] = []
    c = 0
    for j in range(k):
        while True:
            count = math.comb(n - c - 1, k - j - 1)
            if rank < count:
                break
            rank -= count
            c += 1
        out.append(c)
        c += 1
    return out


def _next_combination(comb: list[int], n: int) -> None:
    """The next k-subset in lexicographic order, in place."""
    k = len(comb)
    j = k - 1
    while j >= 0 and comb[j] == n - k + j:
        j -= 1
    if j < 0:
        comb[:] = range(k)
        return
    comb[j] += 1
    for x in range(j + 1, k):
        comb[x] = comb[x - 1] + 1


# ---------------------------------------------------------------- balanced


#: Candidates the greedy seating looks at for each seat.
CANDIDATES = 64
#: Up to this many bots, the swap search tries every bot, not only those in a
#: pair that meets too often.
FULL_SEARCH = 160
#: Seatings tried per round (the cheapest is kept), up to FULL_SEARCH bots.
RESTARTS = 4
#: ... for leagues of up to this many bots.
RESTART_UP_TO = 64
#: Above FULL_SEARCH bots, the tables a bot is tried against (drawn at random).
SWAP_TABLES = 48
#: Passes of the swap search per round.
PASSES = 8
#: The steepness of a pair's cost in its distance to the mean (see BalancedScheduler._w).
ALPHA = 1.0


class BalancedScheduler:
    """Rounds in which every bot sits at one table; pairs meet as evenly as
    the numbers allow (see the module's docstring)."""

    def __init__(
        self,
        bots: Sequence[str],
        table_size: int,
        rounds: int,
        duplicate: bool,
        seed: int,
        *,
        max_games: int | None = None,
    ) -> None:
        self.table_size = table_size
        #: ``[stop] max_games``: no table past it (whole tables only).
        self.max_games = max_games
        self.rounds = rounds
        self.duplicate = duplicate
        self.seed = seed
        #: Every bot ever taken in, by id.
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.active: list[bool] = []
        #: Pair meetings (tables shared), sparse: met[a][b].
        self.met: list[dict[int, int]] = []
        #: Games planned per bot.
        self.games: list[int] = []
        #: Bots taken in late that have not caught up yet.
        self.newcomers: set[int] = set()
        #: Σ of the meetings of the pairs of active bots.
        self.pair_total = 0
        self.round = 0
        self.next_index = 0
        self._next_block = 0
        self._stopped: str | None = None
        self._mean = 0.0
        self._weights: list[int] = []
        for name in bots:
            self._take_in(name)

    # ------------------------------------------------------------ protocol

    @property
    def total(self) -> int | None:
        left = max(0, self.rounds - self.round)
        total = self.next_index + left * (self.active_count() // self.table_size) * self.table_size
        if self.max_games is not None:
            total = min(total, self.max_games - self.max_games % self.table_size)
        return total

    @property
    def limit(self) -> int | None:
        return self.total

    @property
    def stopped(self) -> str | None:
        return self._stopped

    def block(self, k: int, standings: Sequence[Standing] | None) -> list[GameSpec]:
        self._check_block(k)
        if self.max_games is not None and self.next_index + self.table_size > self.max_games:
            self._stopped = "max_games"
            return []
        if self.round >= self.rounds:
            self._stopped = "done"
            return []
        return self._balanced_block(self.rounds, self.max_games)

    def add_bot(self, name: str) -> None:
        if name in self.ids and self.active[self.ids[name]]:
            raise ValueError(f"bot {name!r} is in the league already")
        b = self._take_in(name)
        if self.next_index:  # a bot of the start is no newcomer
            self.newcomers.add(b)

    def retire_bot(self, name: str) -> None:
        b = self.ids.get(name)
        if b is None or not self.active[b]:
            raise ValueError(f"bot {name!r} is not in the league")
        self.active[b] = False
        self.newcomers.discard(b)
        self.pair_total -= sum(c for a, c in self.met[b].items() if self.active[a])

    # ------------------------------------------------------------- helpers

    def active_count(self) -> int:
        return sum(self.active)

    def active_ids(self) -> list[int]:
        return [b for b, on in enumerate(self.active) if on]

    def _take_in(self, name: str) -> int:
        b = self.ids.get(name)
        if b is None:
            b = len(self.names)
            self.ids[name] = b
            self.names.append(name)
            self.active.append(True)
            self.met.append({})
            self.games.append(0)
        else:  # back from retirement
            self.active[b] = True
            self.pair_total += sum(c for a, c in self.met[b].items() if self.active[a])
        return b

    def _check_block(self, k: int) -> None:
        if k != self._next_block:
            raise ValueError(f"block {k} asked for, expected block {self._next_block} (blocks come in order)")
        self._next_block += 1

    def _w(self, c: int) -> int:
        """What seating a pair that met `c` times together once more costs,
        against the mean the pairs will have after the round: rising with
        the distance above it, falling (a gain) with the distance below, so
        the pairs that met most are kept apart and those that met least are
        brought together with the same weight. Whole numbers (sinh scaled by
        2**20), so that sums are exact and ties are broken the same way on
        every machine."""
        weights = self._weights
        if c >= len(weights):
            weights.extend(
                round(math.sinh(ALPHA * (x + 0.5 - self._mean)) * 2**20) for x in range(len(weights), c + 1)
            )
        return weights[c]

    def _set_mean(self, mean: float) -> None:
        self._mean = mean
        self._weights = []

    def _record(self, table: Sequence[int]) -> None:
        """Count a table's meetings and games."""
        for i, a in enumerate(table):
            self.games[a] += self.table_size
            met_a = self.met[a]
            for b in table[i + 1 :]:
                met_a[b] = met_a.get(b, 0) + 1
                met_b = self.met[b]
                met_b[a] = met_b.get(a, 0) + 1
        self.pair_total += len(table) * (len(table) - 1) // 2

    def _rng(self, what: str, n: int) -> random.Random:
        return random.Random(f"3up3down:{self.seed}:{what}:{n}")

    def _balanced_block(self, rounds: int, limit: int | None) -> list[GameSpec]:
        """The next balanced round (two when a round has one table), within
        `rounds` rounds and `limit` games."""
        t = self.table_size
        tables_per_round = self.active_count() // t
        if tables_per_round == 0:
            self._stopped = "bots"
            return []
        count = 2 if tables_per_round == 1 and self.round + 1 < rounds else 1
        entries: list[tuple[int, int, list[int]]] = []
        for _ in range(count):
            room = None if limit is None else (limit - self.next_index) // t - len(entries)
            if room is not None and room <= 0:
                break
            tables = self._seat_round(self.round)
            for j, table in enumerate(tables[:room]):
                self._record(table)
                entries.append((self.round, j, table))
            self.round += 1
        if not entries:
            self._stopped = "max_games"
        return self._emit(entries)

    def _emit(self, entries: Sequence[tuple[int, int, Sequence[int]]]) -> list[GameSpec]:
        """The games of these tables (round, number, bots by seat at rotation
        0): rotation k of every table before rotation k+1."""
        t = self.table_size
        out: list[GameSpec] = []
        for k in range(t):
            for r, m, members in entries:
                seats = tuple(self.names[members[(s + k) % t]] for s in range(t))
                out.append(
                    GameSpec(
                        index=self.next_index,
                        round=r,
                        meeting=m,
                        rotation=k,
                        deal_seed=deal_seed(self.seed, r, m, 0 if self.duplicate else k),
                        seats=seats,
                    )
                )
                self.next_index += 1
        return out

    # ------------------------------------------------------------- seating

    def _seat_round(self, round_: int) -> list[list[int]]:
        """The tables of a balanced round, each in seat order."""
        t = self.table_size
        rng = self._rng("balanced", round_)
        bots = self.active_ids()
        n = len(bots)
        tables_count = n // t
        rng.shuffle(bots)
        bots.sort(key=lambda b: -self.games[b])  # stable: ties stay shuffled
        byes = bots[: n - tables_count * t]
        seated = bots[n - tables_count * t :]
        pairs = n * (n - 1) // 2
        self._set_mean((self.pair_total + tables_count * t * (t - 1) // 2) / pairs if pairs else 0.0)
        best: tuple[int, list[list[int]], list[int]] | None = None
        tries = RESTARTS if n <= RESTART_UP_TO else 1
        for attempt in range(tries):
            if attempt:
                rng.shuffle(seated)
            tables, out = self._greedy(list(seated)), list(byes)
            self._improve(tables, out, math.ceil(self._mean - 1e-9), rng)
            cost = self._cost_of(tables)
            if best is None or cost < best[0]:
                best = (cost, tables, out)
        assert best is not None
        tables = best[1]
        for table in tables:
            rng.shuffle(table)
        return tables

    def _cost_of(self, tables: list[list[int]]) -> int:
        met, w = self.met, self._w
        return sum(
            w(met[a].get(b, 0)) for table in tables for i, a in enumerate(table) for b in table[i + 1 :]
        )

    def _greedy(self, pool: list[int]) -> list[list[int]]:
        """Tables filled one at a time, each seat with the candidate (of up
        to :data:`CANDIDATES` from the pool) that met the table least."""
        t = self.table_size
        met, w = self.met, self._w
        tables: list[list[int]] = []
        while pool:
            table = [pool.pop()]
            while len(table) < t:
                best_j, best_cost = -1, -1
                floor = len(table) * w(0)  # every pair new: the cheapest possible
                for j in range(len(pool) - 1, max(-1, len(pool) - 1 - CANDIDATES), -1):
                    x = pool[j]
                    cost = 0
                    for a in table:
                        cost += w(met[a].get(x, 0))
                    if best_j < 0 or cost < best_cost:
                        best_j, best_cost = j, cost
                        if cost <= floor:
                            break
                table.append(pool[best_j])
                pool[best_j] = pool[-1]
                pool.pop()
            tables.append(table)
        return tables

    def _improve(self, tables: list[list[int]], byes: list[int], most: int, rng: random.Random) -> None:
        """Swap bots between tables (or with a bot sitting out that has as
        many games) while a swap lowers the cost. Up to :data:`FULL_SEARCH`
        bots every bot is tried, in a dense matrix of the round's costs;
        above, only the bots of a pair that would meet more than `most` times
        (the ceiling of the mean), each against :data:`SWAP_TABLES` tables
        drawn with `rng`."""
        groups: list[list[int]] = [*tables, byes] if byes else list(tables)
        bye = len(tables) if byes else -1
        bots = [b for group in groups for b in group]
        local = {b: i for i, b in enumerate(bots)}
        members = [[local[b] for b in group] for group in groups]
        where = [0] * len(bots)
        for g, mem in enumerate(members):
            for i in mem:
                where[i] = g
        games = [self.games[b] for b in bots]
        if len(bots) <= FULL_SEARCH:
            self._improve_dense(bots, members, where, games, bye)
        else:
            self._improve_sparse(bots, members, where, games, bye, most, rng)
        for group, mem in zip(groups, members):
            group[:] = [bots[i] for i in mem]

    def _improve_dense(
        self, bots: list[int], members: list[list[int]], where: list[int], games: list[int], bye: int
    ) -> None:
        met, w = self.met, self._w
        n = len(bots)
        W = [[w(met[a].get(b, 0)) if a != b else 0 for b in bots] for a in bots]
        #: S[i][g]: what bot i costs at table g (0 at the byes).
        S = [[0 if g == bye else sum(Wi[j] for j in mem) for g, mem in enumerate(members)] for Wi in W]
        for _ in range(PASSES):
            moved = False
            for x in range(n):
                gx = where[x]
                Sx, Wx = S[x], W[x]
                own_x = Sx[gx]
                best, best_y = 0, -1
                for y in range(n):
                    gy = where[y]
                    if gy == gx:
                        continue
                    Sy = S[y]
                    if gx == bye or gy == bye:
                        if games[x] != games[y]:
                            continue
                        d = Sy[gx] + Sx[gy] - own_x - Sy[gy] - Wx[y]
                    else:
                        d = Sy[gx] + Sx[gy] - own_x - Sy[gy] - 2 * Wx[y]
                    if d < best:
                        best, best_y = d, y
                if best_y < 0:
                    continue
                y, gy = best_y, where[best_y]
                mx, my = members[gx], members[gy]
                mx[mx.index(x)] = y
                my[my.index(y)] = x
                where[x], where[y] = gy, gx
                for z in range(n):
                    Wz, Sz = W[z], S[z]
                    if gx != bye:
                        Sz[gx] += Wz[y] - Wz[x]
                    if gy != bye:
                        Sz[gy] += Wz[x] - Wz[y]
                moved = True
            if not moved:
                break

    def _improve_sparse(
        self,
        bots: list[int],
        members: list[list[int]],
        where: list[int],
        games: list[int],
        bye: int,
        most: int,
        rng: random.Random,
    ) -> None:
        met, w = self.met, self._w

        def cost(i: int, g: int, skip: int) -> int:
            if g == bye:
                return 0
            met_i = met[bots[i]]
            return sum(w(met_i.get(bots[j], 0)) for j in members[g] if j != skip and j != i)

        own = [cost(i, where[i], i) for i in range(len(bots))]
        for _ in range(PASSES):
            moved = False
            todo = [
                i
                for i in range(len(bots))
                if where[i] != bye
                and any(met[bots[i]].get(bots[j], 0) >= most for j in members[where[i]] if j != i)
            ]
            for x in todo:
                gx = where[x]
                met_x = met[bots[x]]
                best, best_y = 0, -1
                others: Sequence[int] = range(len(members))
                if len(members) > SWAP_TABLES:
                    tables = len(members) - (bye >= 0)
                    others = sorted(rng.sample(range(tables), SWAP_TABLES)) + ([bye] if bye >= 0 else [])
                for gy in others:
                    mem = members[gy]
                    if gy == gx:
                        continue
                    x_in = cost(x, gy, -1)
                    for y in mem:
                        wxy = w(met_x.get(bots[y], 0))
                        if gx == bye or gy == bye:
                            if games[x] != games[y]:
                                continue
                            d = cost(y, gx, x) + (0 if gy == bye else x_in - wxy) - own[x] - own[y]
                        else:
                            d = cost(y, gx, x) + x_in - wxy - own[x] - own[y]
                        if d < best:
                            best, best_y = d, y
                if best_y < 0:
                    continue
                y, gy = best_y, where[best_y]
                mx, my = members[gx], members[gy]
                mx[mx.index(x)] = y
                my[my.index(y)] = x
                where[x], where[y] = gy, gx
                for z in (*mx, *my):
                    own[z] = cost(z, where[z], z)
                moved = True
            if not moved:
                break


# ---------------------------------------------------------------- adaptive


#: One table in RETEST_SHARE of an adaptive block seats a separated pair
#: again (issue 13): a separation made by chance early is tested with fresh
#: games instead of being kept for ever.
RETEST_SHARE = 3


class AdaptiveScheduler(BalancedScheduler):
    """Balanced rounds, then tables that separate the ranks not yet settled,
    until the ``[stop]`` condition (see the module's docstring)."""

    def __init__(
        self,
        bots: Sequence[str],
        table_size: int,
        rounds: int,
        duplicate: bool,
        seed: int,
        *,
        confidence: float = 0.95,
        top: int | None = None,
        max_games: int | None = None,
        extended_from: Sequence[int] = (),
    ) -> None:
        super().__init__(bots, table_size, rounds, duplicate, seed)
        self.confidence = confidence
        self.top = top
        self.max_games = max_games
        #: The budgets in force one after the other (``[stop] extended_from``,
        #: then ``max_games``): each until the schedule reaches it, so a
        #: league extended after it stopped plans its first games exactly as
        #: it did (its resume replays them) and goes on from where it stopped.
        self.extended_from = list(extended_from)
        self._stage = 0

    @property
    def total(self) -> int | None:
        return None

    @property
    def limit(self) -> int | None:
        """The budget in force (`max_games`, or the earlier one of
        `extended_from` not reached yet), by default 20 x bots x table_size
        (every bot ever taken in)."""
        if self._stage < len(self.extended_from):
            return self.extended_from[self._stage]
        if self.max_games is not None:
            return self.max_games
        return 20 * len(self.names) * self.table_size

    def block(self, k: int, standings: Sequence[Standing] | None) -> list[GameSpec]:
        self._check_block(k)
        if self.active_count() < self.table_size:
            self._stopped = "bots"
            return []
        while (
            self._stage < len(self.extended_from)
            and self.next_index + self.table_size > self.extended_from[self._stage]
        ):
            self._stage += 1  # the budget it stopped at was extended: the next one rules from here
        limit = self.limit
        assert limit is not None
        if self.next_index + self.table_size > limit:
            self._stopped = "max_games"
            return []
        if k < 2 or self.round < self.rounds:
            return self._balanced_block(max(self.rounds, self.round + 2), limit)
        if standings is None:
            raise ValueError(f"adaptive block {k} needs the standings")
        tables = self._adaptive_tables(standings, k)
        if tables is None:
            return []
        room = (limit - self.next_index) // self.table_size
        entries = []
        for j, table in enumerate(tables[:room]):
            self._record(table)
            entries.append((self.round, j, table))
        self.round += 1
        return self._emit(entries)

    def order(self, standings: Sequence[Standing]) -> tuple[list[int], list[float]]:
        """The active bots in standings order (bots not in the standings yet
        in the middle) and, for each adjacent pair, the probability that the
        upper one is truly stronger."""
        rows = [
            (pos, s)
            for pos, s in enumerate(standings)
            if s.bot in self.ids and self.active[self.ids[s.bot]] and not s.retired
        ]
        probs: list[float] = []
        for (pa, a), (pb, b) in zip(rows, rows[1:]):
            given = a.p_above_next if pb == pa + 1 else None
            if given is None:
                sd = math.hypot(a.sigma, b.sigma)
                given = normal_cdf((a.mu - b.mu) / sd) if sd > 0 else 0.5
            probs.append(float(given))
        order = [self.ids[s.bot] for _, s in rows]
        listed = set(order)
        missing = [b for b in self.active_ids() if b not in listed]
        if missing:  # taken in since: in the middle, unsettled on both sides
            mid = len(order) // 2
            links = [0.5] * (len(missing) - 1 + (mid > 0) + (mid < len(order)))
            probs = probs[: max(0, mid - 1)] + links + probs[mid:]
            order = order[:mid] + missing + order[mid:]
        return order, probs

    def unsettled(self, probs: Sequence[float]) -> list[int]:
        """The adjacent pairs (by the upper one's position) that the stop
        condition needs and that are not settled yet."""
        last = len(probs) if self.top is None else min(self.top, len(probs))
        separated = separations(probs, self.confidence)
        return [i for i in range(last) if not separated[i]]

    def contenders(self, standings: Sequence[Standing], order: Sequence[int]) -> list[int]:
        """With `top`: the bots below the first `top` whose rank interval
        (the standings' ``rank_low``) still reaches into them."""
        if self.top is None or self.top >= len(order):
            return []
        rest = set(order[self.top :])
        out = []
        for row in standings:
            b = self.ids.get(row.bot)
            if b is not None and b in rest and 0 < row.rank_low <= self.top and not row.retired:
                out.append(b)
        return out

    def weights(
        self, order: Sequence[int], probs: Sequence[float], uncertain: Sequence[int]
    ) -> dict[int, float]:
        """Each unsettled pair's weight: the higher, the sooner it is seated.

        A pair at probability p, whose bots have played n games (their
        harmonic mean), needs about G = n·((z*/z(p))² − 1) more games a bot,
        the evidence growing with the square root of the games for a fixed
        difference (:func:`~referee.tournament.settle.games_to_separate`
        estimates the same); z* is the threshold of the next separation under the
        false-discovery rule (:func:`~referee.tournament.settle.separations`),
        and |z(p)| is taken as at least :data:`~referee.tournament.settle.LOOKS_EQUAL_Z`. With L games a bot left
        before ``max_games``, a pair with G ≤ L weighs 1 + G/L: the games left
        can settle it, and the one needing most goes first so that they all
        settle together (with no real limit, as in ``benchmarks/schedule.py``,
        every pair is of this kind). A pair with G > L weighs 1/(1 + G):
        after those, the one needing fewest first, and a pair that looks
        equal last. So a league of equal entries spends its games where they
        can change what the table reports (a boundary between two groups of
        entries, a gap that early luck made, a bot with few games) rather
        than on pairs no budget may settle."""
        m = len(probs)
        if not m:
            return {}
        settled = sum(separations(probs, self.confidence))
        target = z_of(1.0 - (1.0 - self.confidence) * min(m, settled + 1) / m)
        limit = self.limit
        assert limit is not None
        left = max(0, limit - self.next_index) * self.table_size / len(order)
        out: dict[int, float] = {}
        for i in uncertain:
            z = max(abs(z_of(probs[i])), LOOKS_EQUAL_Z)
            a, b = self.games[order[i]], self.games[order[i + 1]]
            n = 2.0 * a * b / (a + b) if a and b else 0.0
            more = more_games(n, z, target)
            out[i] = 1.0 + more / left if left > 0 and more <= left else 1.0 / (1.0 + more)
        return out

    def _adaptive_tables(self, standings: Sequence[Standing], k: int) -> list[list[int]] | None:
        t = self.table_size
        order, probs = self.order(standings)
        m = len(order)
        if m < t:
            self._stopped = "bots"
            return None
        others = [self.games[b] for b in order if b not in self.newcomers]
        median = statistics.median_low(others or [self.games[b] for b in order])
        for b in [b for b in self.newcomers if self.games[b] >= median]:
            self.newcomers.discard(b)
        behind = sorted((b for b in self.newcomers if self.active[b]), key=lambda b: (self.games[b], b))
        uncertain = self.unsettled(probs)
        contenders = self.contenders(standings, order)
        if not uncertain and not behind and not contenders:
            self._stopped = "confidence"
            return None
        most_tables = max(2, m // t)
        cap = max(2, math.ceil(2 * most_tables * t / m))
        uses = [0] * len(self.names)
        tables: list[list[int]] = []
        pos = {b: i for i, b in enumerate(order)}

        def seat(members: Sequence[int]) -> bool:
            if len(tables) >= most_tables or any(uses[b] >= cap for b in members):
                return False
            for b in members:
                uses[b] += 1
            tables.append(list(members))
            return True

        def take(start: int) -> bool:
            return seat(order[start : start + t])

        # A newcomer first: tables around its place until its games catch up.
        for b in behind:
            want = min(cap, math.ceil((median - self.games[b]) / t))
            p = pos[b]
            for j in range(want):
                if len(tables) >= most_tables:
                    break
                shift = (j + 1) // 2 * (1 if j % 2 else -1)
                take(min(max(0, p - (t - 1) // 2 + shift), m - t))
        # A bot below the first `top` that could still be among them: a
        # table with the bots around the last of them.
        if contenders and self.top is not None:
            edge = self.top - 1
            around = sorted(range(m), key=lambda i: (abs(i - edge + 0.25), i))
            for b in contenders:
                seat([b, *[order[i] for i in around if order[i] != b][: t - 1]])
        # Separated pairs tested again, those whose two bots have met least
        # first: a table across each one's boundary.
        last = m - 1 if self.top is None else min(self.top, m - 1)
        open_pairs = set(uncertain)
        separated = sorted(
            (i for i in range(last) if i not in open_pairs),
            key=lambda i: (self.met[order[i]].get(order[i + 1], 0), i),
        )
        for i in separated[: most_tables // RETEST_SHARE]:
            take(min(max(0, i - (t - 2) // 2), m - t))
        # Then the unsettled pairs, by their weights (see `weights`); a
        # pair's weight halves with each table that seats it.
        need = self.weights(order, probs, uncertain)
        while need and len(tables) < most_tables:
            i = max(need, key=lambda j: (need[j], -j))
            best: tuple[float, int, int] | None = None
            for s in range(max(0, i + 2 - t), min(i, m - t) + 1):
                if any(uses[b] >= cap for b in order[s : s + t]):
                    continue
                score = sum(need.get(j, 0.0) for j in range(s, s + t - 1))
                key = (score, -abs(2 * s + t - 2 - 2 * i), -s)
                if best is None or key > best:
                    best = key
            if best is None:
                del need[i]
                continue
            start = -best[2]
            take(start)
            for j in range(start, start + t - 1):
                if j in need:
                    need[j] /= 2
        if not tables:
            self._stopped = "confidence"
            return None
        rng = self._rng("adaptive", k)
        for table in tables:
            rng.shuffle(table)
        return tables
