"""TrueSkill ratings, standings and the head-to-head matrix.

Ratings are updated game by game in schedule order, never in the order games
happened to finish, so standings do not depend on concurrency. Tied places
are draws. An explicit ``trueskill.TrueSkill`` environment is used (never the
module's global one).

Each standing also says how settled it is (issue 13, :mod:`.settle`): the
probability that the bot truly ranks above the next one, an interval of its
rank and whether it is separated from its neighbours, with TrueSkill's
variances corrected by the dispersion φ measured from the data (clustered by
duplicate deal).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec
import trueskill

from . import settle
from .league import Ratings


class Outcome(msgspec.Struct, kw_only=True):
    """What the standings need of one finished game."""

    index: int
    seats: list[str]
    places: list[int]
    disqualified: list[int] = msgspec.field(default_factory=list)
    #: Fault kinds by seat.
    faults: list[list[str]] = msgspec.field(default_factory=list)
    #: Per-request latencies in ms by seat.
    latencies: list[list[float]] = msgspec.field(default_factory=list)
    adjudicated: bool = False
    #: Penalty points by seat: the cards still held at the end [D14].
    points: list[int] = msgspec.field(default_factory=list)
    #: The duplicate deal: games with the same value are the seat rotations
    #: of one deal (the store puts the deal seed here). -1: unknown, an
    #: independent game.
    deal: int = -1


class BotState(msgspec.Struct, array_like=True):
    """One bot's row of a :class:`Table`, as a checkpoint keeps it: its
    rating as TrueSkill holds it (precision π and τ = π·μ, so that it comes
    back bit for bit: μ and σ recomputed from them would not) and its counts."""

    pi: float
    tau: float
    mu0: float
    sigma0: float
    points: int
    games: int
    wins: int
    place_sum: int
    faults: dict[str, int]
    #: The latency histogram's buckets (:class:`LatencyHistogram`).
    latencies: dict[int, int]
    retired: bool


class TableState(msgspec.Struct, array_like=True):
    """What a :class:`Table` holds besides its bots' rows: the last game
    applied and the design effect's sums, with its deals in progress."""

    applied: int
    design: settle.DesignState


class Standing(msgspec.Struct, kw_only=True):
    bot: str
    mu: float
    sigma: float
    #: The conservative rating μ − 3σ the table is sorted by.
    score: float
    games: int
    wins: int
    avg_place: float
    faults: dict[str, int]
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    rank: int = 0
    #: With V4 scoring [D14]: penalty points over all the bot's games (fewer is better).
    points: int | None = None
    #: Settledness (issue 13). The probability that this bot's true strength
    #: is above that of the bot ranked right below it (None for the last).
    p_above_next: float | None = None
    #: The interval of its rank at the standings' confidence (1-based; it
    #: always contains `rank`).
    rank_low: int = 0
    rank_high: int = 0
    #: Separated from the bot above / below at the standings' confidence:
    #: p_above_next clears the Benjamini–Hochberg threshold over the table's
    #: adjacent pairs (:func:`~referee.tournament.settle.separations`), so at
    #: most about 1 − confidence of the separations shown are wrong. By
    #: convention the first bot is separated above and the last below.
    separated_above: bool = False
    separated_below: bool = False
    #: Retired from the league: kept in the standings, never proposed for more games.
    retired: bool = False

    def games_to_separate(self, below: Standing, confidence: float) -> int | None:
        """About how many more games this bot and `below` (the bot ranked
        right below it) each need to be separated at `confidence`; None when
        they look equal or one has no games (:func:`settle.games_to_separate`,
        from :attr:`p_above_next`, 1/2 when unknown)."""
        p = self.p_above_next if self.p_above_next is not None else 0.5
        return settle.games_to_separate(p, min(self.games, below.games), confidence)


class HeadToHead(msgspec.Struct, kw_only=True):
    """Row bot against column bot over the games both played."""

    bot: str
    opponent: str
    games: int
    wins: int
    losses: int
    draws: int
    #: (wins + draws/2) / games, with its 95% Wilson interval.
    rate: float
    low: float
    high: float


def environment(cfg: Ratings) -> trueskill.TrueSkill:
    return trueskill.TrueSkill(
        mu=cfg.mu,
        sigma=cfg.sigma,
        beta=cfg.beta,
        tau=cfg.tau,
        draw_probability=cfg.draw_probability,
        backend=None,
    )


class Table:
    """Ratings and counts, fed outcomes in schedule order.

    `series`: the league plays V4 (scoring) [D14], so the lowest total of
    penalty points ranks first (the series' winner), TrueSkill breaking ties;
    otherwise the table is ranked by TrueSkill's conservative μ − 3σ.

    Applying a game costs O(players) at any point of the league: the ratings,
    the counts and the design effect of :mod:`.settle` are all incremental.
    """

    def __init__(self, bots: Sequence[str], cfg: Ratings, *, series: bool = False) -> None:
        self.series = series
        self.env = environment(cfg)
        self.points: dict[str, int] = {}
        self.ratings: dict[str, trueskill.Rating] = {}
        #: Each bot's starting μ and σ (its prior, which the settledness separates from its games).
        self.mu0: dict[str, float] = {}
        self.sigma0: dict[str, float] = {}
        self.games: dict[str, int] = {}
        self.wins: dict[str, int] = {}
        self.place_sum: dict[str, int] = {}
        self.faults: dict[str, dict[str, int]] = {}
        #: Each bot's request latencies, as a bounded histogram (a list of
        #: every one would grow with the games played).
        self.latencies: dict[str, LatencyHistogram] = {}
        self.retired: set[str] = set()
        self.design = settle.DesignEffect()
        self.history: list[tuple[int, str, float, float]] = []
        #: The index of the last game applied (-1: none yet); games are
        #: applied in index order, so every game before it is in the table.
        self.applied = -1
        for b in bots:
            self.add_bot(b)

    def add_bot(self, name: str, *, mu: float | None = None, sigma: float | None = None) -> None:
        """A new bot, with the league's fresh rating or the given μ and σ. A
        retired bot (μ and σ not given) comes back with its rating and counts."""
        if name in self.retired and mu is None and sigma is None:
            self.retired.discard(name)
            return
        if name in self.ratings:
            raise ValueError(f"bot {name!r} is in the table already")
        rating = self.env.create_rating(
            mu=self.env.mu if mu is None else mu, sigma=self.env.sigma if sigma is None else sigma
        )
        if not rating.sigma > 0:
            raise ValueError(f"bot {name!r}: sigma must be positive, got {rating.sigma}")
        self.ratings[name] = rating
        self.mu0[name] = float(rating.mu)
        self.sigma0[name] = float(rating.sigma)
        self.points[name] = 0
        self.games[name] = 0
        self.wins[name] = 0
        self.place_sum[name] = 0
        self.faults[name] = {}
        self.latencies[name] = LatencyHistogram()

    def retire(self, name: str) -> None:
        """Keep the bot in the standings, flagged, but out of :meth:`uncertain_pairs`."""
        if name not in self.ratings:
            raise KeyError(name)
        self.retired.add(name)

    def add(self, o: Outcome) -> None:
        if o.index <= self.applied:
            raise ValueError(f"game {o.index} applied out of order (after {self.applied})")
        self.applied = o.index
        before = [self.ratings[b] for b in o.seats]
        rated = self.env.rate([(r,) for r in before], ranks=o.places)
        tau2 = self.env.tau * self.env.tau
        scores: list[float] = []
        infos: list[float] = []
        for seat, bot in enumerate(o.seats):
            r = rated[seat][0]
            v = before[seat].sigma ** 2 + tau2
            scores.append((r.mu - before[seat].mu) / v)
            infos.append(max(0.0, v - r.sigma**2) / (v * v))
            self.ratings[bot] = r
            self.history.append((o.index, bot, r.mu, r.sigma))
            self.games[bot] += 1
            self.place_sum[bot] += o.places[seat]
            if o.places[seat] == 1:
                self.wins[bot] += 1
            for kind in o.faults[seat] if seat < len(o.faults) else ():
                self.faults[bot][kind] = self.faults[bot].get(kind, 0) + 1
            if seat < len(o.latencies):
                self.latencies[bot].extend(o.latencies[seat])
            if seat < len(o.points):
                self.points[bot] += o.points[seat]
        self.design.add(o.deal, o.seats, scores, infos)

    # -- checkpoints (the service's :class:`~referee.tournament.results.RunRatings`)

    def state(self) -> TableState:
        return TableState(applied=self.applied, design=self.design.state())

    def bot_state(self, name: str) -> BotState:
        r = self.ratings[name]
        return BotState(
            pi=r.pi,
            tau=r.tau,
            mu0=self.mu0[name],
            sigma0=self.sigma0[name],
            points=self.points[name],
            games=self.games[name],
            wins=self.wins[name],
            place_sum=self.place_sum[name],
            faults=dict(self.faults[name]),
            latencies=dict(self.latencies[name].counts),
            retired=name in self.retired,
        )

    def restore(self, state: TableState, bots: dict[str, BotState]) -> None:
        """Put the table back in the state :meth:`state` and :meth:`bot_state`
        gave (every bot of it): applying the games after it then gives what
        applying every game from the first would, bit for bit."""
        self.applied = state.applied
        self.design = settle.DesignEffect.restore(state.design)
        self.retired = set()
        self.ratings.clear()
        self.mu0.clear()
        self.sigma0.clear()
        self.points.clear()
        self.games.clear()
        self.wins.clear()
        self.place_sum.clear()
        self.faults.clear()
        self.latencies.clear()
        for name, b in bots.items():
            self.add_bot(name, mu=b.mu0, sigma=b.sigma0)
            r = self.ratings[name]
            r.pi, r.tau = b.pi, b.tau
            self.mu0[name], self.sigma0[name] = b.mu0, b.sigma0
            self.points[name], self.games[name], self.wins[name] = b.points, b.games, b.wins
            self.place_sum[name] = b.place_sum
            self.faults[name] = dict(b.faults)
            self.latencies[name].counts = dict(b.latencies)
            self.latencies[name].count = sum(b.latencies.values())
            if b.retired:
                self.retired.add(name)

    def _order(self) -> list[str]:
        """The bots in standings order (on the rounded values the standings show)."""

        def key(bot: str) -> tuple[float, float, float, str]:
            r = self.ratings[bot]
            score, mu = round(r.mu - 3 * r.sigma, 4), round(r.mu, 4)
            return (self.points[bot] if self.series else 0, -score, -mu, bot)

        return sorted(self.ratings, key=key)

    def _posterior(self, bots: Sequence[str]) -> tuple[list[float], list[float]]:
        """The honest posterior mean and variance of each bot's strength (:func:`settle.posteriors`)."""
        return settle.posteriors(
            [float(self.ratings[b].mu) for b in bots],
            [float(self.ratings[b].sigma) for b in bots],
            [self.mu0[b] for b in bots],
            [self.sigma0[b] for b in bots],
            self.design.factor(),
        )

    def standings(self, confidence: float = 0.95, *, retired: bool = True) -> list[Standing]:
        """The table, best first, with its settledness at `confidence`
        (without the retired bots when not `retired`: a ladder's live table)."""
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
        order = self._order()
        if not retired:
            order = [b for b in order if b not in self.retired]
        mus, var = self._posterior(order)
        intervals = settle.rank_intervals(mus, var, confidence)
        probs = [settle.p_above(mus[i], var[i], mus[i + 1], var[i + 1]) for i in range(len(order) - 1)]
        separated = settle.separations(probs, confidence)
        rows: list[Standing] = []
        for i, bot in enumerate(order):
            p = probs[i] if i < len(probs) else None
            low, high = intervals[i]
            row = self._row(bot, i + 1)
            row.p_above_next = None if p is None else round(p, 4)
            row.rank_low, row.rank_high = min(low, i + 1), max(high, i + 1)
            row.separated_below = p is None or separated[i]
            row.separated_above = i == 0 or rows[i - 1].separated_below
            rows.append(row)
        return rows

    def retired_rows(self) -> list[Standing]:
        """The retired bots' rows, in the order of the whole table (their
        rank is their place in it), without settledness: a retired bot is
        compared with no one (the p and the interval are left empty). Costs
        O(n log n), against :meth:`standings`' sampled rank intervals."""
        return [self._row(bot, i + 1) for i, bot in enumerate(self._order()) if bot in self.retired]

    def _row(self, bot: str, rank: int) -> Standing:
        """A bot's row at `rank`, its settledness left to the caller."""
        r = self.ratings[bot]
        p50, p95 = self.latencies[bot].percentiles((50, 95))
        games = self.games[bot]
        return Standing(
            bot=bot,
            mu=round(r.mu, 4),
            sigma=round(r.sigma, 4),
            score=round(r.mu - 3 * r.sigma, 4),
            games=games,
            wins=self.wins[bot],
            avg_place=round(self.place_sum[bot] / games, 4) if games else 0.0,
            faults=dict(sorted(self.faults[bot].items())),
            latency_p50_ms=None if math.isnan(p50) else round(p50, 3),
            latency_p95_ms=None if math.isnan(p95) else round(p95, 3),
            rank=rank,
            points=self.points[bot] if self.series else None,
            retired=bot in self.retired,
        )

    def uncertain_pairs(self, confidence: float = 0.95) -> list[tuple[str, str, float]]:
        """Neighbours in the standings order, retired bots left out, that are
        not separated at `confidence`: (upper bot, lower bot, P(upper truly
        above lower)), from the top of the table down. Cheap: O(n log n), no
        rank intervals."""
        order = self._order()
        mus, var = self._posterior(order)
        active = [i for i, b in enumerate(order) if b not in self.retired]
        pairs = list(zip(active, active[1:]))
        probs = [settle.p_above(mus[i], var[i], mus[j], var[j]) for i, j in pairs]
        separated = settle.separations(probs, confidence)
        return [
            (order[i], order[j], round(p, 4)) for (i, j), p, sep in zip(pairs, probs, separated) if not sep
        ]


class LatencyHistogram:
    """Latencies (ms) counted in logarithmic buckets 1% wide, so that a
    percentile is within 0.5% of the exact one, at a size bounded by the
    range of the values (about 230 buckets a decade), never by their number.
    Values of 1 µs or less share one bucket."""

    #: The ratio of a bucket's upper bound to its lower bound.
    BASE = 1.01
    FLOOR_MS = 0.001

    _LOG_BASE = math.log(BASE)
    _LOG_FLOOR = math.log(FLOOR_MS)

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0

    def add(self, ms: float) -> None:
        b = int((math.log(ms) - self._LOG_FLOOR) / self._LOG_BASE) if ms > self.FLOOR_MS else -1
        self.counts[b] = self.counts.get(b, 0) + 1
        self.count += 1

    def extend(self, values: Iterable[float]) -> None:
        for ms in values:
            self.add(ms)

    def percentile(self, p: float) -> float:
        """The nearest-rank percentile: the geometric middle of its bucket
        (the floor for the values at or below it); NaN when empty."""
        return self.percentiles((p,))[0]

    def percentiles(self, ps: Sequence[float]) -> list[float]:
        """:meth:`percentile` of each of ``ps``, in one pass over the buckets."""
        if not self.count:
            return [math.nan for _ in ps]
        ranks = [max(1, min(self.count, math.ceil(p / 100 * self.count))) for p in ps]
        out: dict[int, float] = {}
        todo = sorted(set(ranks))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            while todo and seen >= todo[0]:
                out[todo.pop(0)] = (
                    self.FLOOR_MS if b < 0 else math.exp(self._LOG_FLOOR + (b + 0.5) * self._LOG_BASE)
                )
            if not todo:
                break
        return [out[k] for k in ranks]


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def head_to_head(bots: Sequence[str], outcomes: Iterable[Outcome]) -> list[HeadToHead]:
    """Pairwise results: a bot beats another when it finishes in a better
    place in the same game; equal places are draws."""
    w: dict[tuple[str, str], list[int]] = {}
    for o in outcomes:
        for i, a in enumerate(o.seats):
            for j, b in enumerate(o.seats):
                if i == j:
                    continue
                cell = w.setdefault((a, b), [0, 0, 0])
                if o.places[i] < o.places[j]:
                    cell[0] += 1
                elif o.places[i] > o.places[j]:
                    cell[1] += 1
                else:
                    cell[2] += 1
    out = []
    for a in bots:
        for b in bots:
            if a == b or (a, b) not in w:
                continue
            out.append(head_to_head_record(a, b, *w[(a, b)]))
    return out


def head_to_head_record(bot: str, opponent: str, wins: int, losses: int, draws: int) -> HeadToHead:
    """`bot` against `opponent`: its win rate, a draw counting half a win, with its 95% Wilson interval."""
    n = wins + losses + draws
    score = wins + draws / 2
    low, high = wilson(score, n)
    return HeadToHead(
        bot=bot,
        opponent=opponent,
        games=n,
        wins=wins,
        losses=losses,
        draws=draws,
        rate=round(score / n, 4) if n else 0.0,
        low=round(low, 4),
        high=round(high, 4),
    )
