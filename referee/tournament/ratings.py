"""TrueSkill ratings, standings and the head-to-head matrix.

Ratings are updated game by game in schedule order, never in the order games
happened to finish, so standings do not depend on concurrency. Tied places
are draws. An explicit ``trueskill.TrueSkill`` environment is used (never the
module's global one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec
import trueskill

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
        mu=cfg.mu, sigma=cfg.sigma, beta=cfg.beta, tau=cfg.tau,
        draw_probability=cfg.draw_probability, backend=None,
    )


class Table:
    """Ratings and counts, fed outcomes in schedule order.

    `series`: the league plays V4 (scoring) [D14], so the lowest total of
    penalty points ranks first (the series' winner), TrueSkill breaking ties;
    otherwise the table is ranked by TrueSkill's conservative μ − 3σ.
    """

    def __init__(self, bots: Sequence[str], cfg: Ratings, *, series: bool = False) -> None:
        self.series = series
        self.points = dict.fromkeys(bots, 0)
        self.env = environment(cfg)
        self.ratings: dict[str, trueskill.Rating] = {b: self.env.create_rating() for b in bots}
        self.games = dict.fromkeys(bots, 0)
        self.wins = dict.fromkeys(bots, 0)
        self.place_sum = dict.fromkeys(bots, 0)
        self.faults: dict[str, dict[str, int]] = {b: {} for b in bots}
        self.latencies: dict[str, list[float]] = {b: [] for b in bots}
        self.history: list[tuple[int, str, float, float]] = []
        self.applied = -1

    def add(self, o: Outcome) -> None:
        if o.index <= self.applied:
            raise ValueError(f"game {o.index} applied out of order (after {self.applied})")
        self.applied = o.index
        groups = [(self.ratings[b],) for b in o.seats]
        rated = self.env.rate(groups, ranks=o.places)
        for seat, bot in enumerate(o.seats):
            r = rated[seat][0]
            self.ratings[bot] = r
            self.history.append((o.index, bot, r.mu, r.sigma))
            self.games[bot] += 1
            self.place_sum[bot] += o.places[seat]
            if o.places[seat] == 1:
                self.wins[bot] += 1
            for kind in o.faults[seat] if seat < len(o.faults) else ():
                self.faults[bot][kind] = self.faults[bot].get(kind, 0) + 1
            if seat < len(o.latencies):
                self.latencies[bot] += o.latencies[seat]
            if seat < len(o.points):
                self.points[bot] += o.points[seat]

    def standings(self) -> list[Standing]:
        rows = []
        for bot, r in self.ratings.items():
            lat = sorted(self.latencies[bot])
            rows.append(
                Standing(
                    bot=bot,
                    mu=round(r.mu, 4),
                    sigma=round(r.sigma, 4),
                    score=round(r.mu - 3 * r.sigma, 4),
                    games=self.games[bot],
                    wins=self.wins[bot],
                    avg_place=round(self.place_sum[bot] / self.games[bot], 4) if self.games[bot] else 0.0,
                    faults=dict(sorted(self.faults[bot].items())),
                    latency_p50_ms=round(percentile(lat, 50), 3) if lat else None,
                    latency_p95_ms=round(percentile(lat, 95), 3) if lat else None,
                    points=self.points[bot] if self.series else None,
                )
            )
        if self.series:
            rows.sort(key=lambda s: (s.points, -s.score, -s.mu, s.bot))
        else:
            rows.sort(key=lambda s: (-s.score, -s.mu, s.bot))
        for i, s in enumerate(rows):
            s.rank = i + 1
        return rows


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])


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
            wins, losses, draws = w[(a, b)]
            n = wins + losses + draws
            score = wins + draws / 2
            low, high = wilson(score, n)
            out.append(HeadToHead(bot=a, opponent=b, games=n, wins=wins, losses=losses, draws=draws,
                                  rate=round(score / n, 4), low=round(low, 4), high=round(high, 4)))
    return out
