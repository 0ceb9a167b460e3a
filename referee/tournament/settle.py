"""Settledness: how sure the standings are of their order (issue 13).

TrueSkill's posteriors N(μ, σ²) are the starting point, corrected twice, both
corrections measured from the league's own data and both cheap enough to
recompute after every block of games:

* The design effect (:class:`DesignEffect`). TrueSkill treats every game as
  independent. A duplicate deal's seat rotations are not: a deal that suits
  a bot suits it in every rotation (its results move together), while the
  luck of the cards cancels between rotations (they offset each other). A
  bot's TrueSkill scores summed over a deal have, relative to the sum of
  their squares, the ratio DE (1 for independent games, up to k for k
  perfectly correlated rotations, below 1 when they cancel): the games'
  share of each posterior precision is divided by it.
* The prior (:func:`posteriors`). The league's σ₀ (8.3 by default) is far
  wider than the real spread of bots, which makes TrueSkill overconfident
  about differences early in a league. The spread is estimated from the
  data (empirical Bayes) and used as the prior instead.

Then P(a truly above b) = Φ((ma − mb) / √(va + vb)) and the rank intervals
come from joint draws of the strengths. ``benchmarks/calibration.py``
measures this against naive TrueSkill, TrueSkill over whole deals and a
Bradley–Terry bootstrap over deals, in simulated leagues with known
strengths: see its output for the figures.

Known limit: TrueSkill's estimates depend on the order of the games. When the
seat alone decides every game, the rotations cancel exactly and yet identical
bots end with μ's apart (whoever won the last rotations is ahead); no
variance correction removes that bias, so such a league can show separations
that are not real. Real games, where skill matters, are what the benchmark
measures.

How far a pair is from settled (:func:`games_to_separate`, which
``referee tournament``'s summary prints and the adaptive schedule weighs
pairs by): the evidence for an order grows with the square root of the
games, as it does for a fixed difference in strength.

Everything here is deterministic: the rank intervals' Monte Carlo uses fixed
normal draws (one fixed column per place in the table), never global
randomness.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from statistics import NormalDist

import msgspec

#: How many joint draws of the strengths the rank intervals use.
SAMPLES = 200

#: The design effect's prior weight, in clusters (a bot's games in one deal).
#: The prior is (1 + k)/2 for clusters of k games (the mean design effect
#: of rotations whose correlation is anything between 0 and 1), 1 without
#: duplicate deals: with little data the correction is conservative.
PRIOR_CLUSTERS = 20.0

#: The design effect is kept within these bounds, however extreme the data.
#: Below 1 the duplicate design is credited with cancelling luck, but never
#: below DE_MIN: TrueSkill's sequential estimates carry noise of their own
#: (the order of the games) that no cancellation removes.
DE_MIN, DE_MAX = 0.5, 25.0


#: The smallest spread of the bots' strengths the empirical prior assumes.
S2_MIN = 1e-4


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


class DesignState(msgspec.Struct, array_like=True):
    """A :class:`DesignEffect`'s sums and its deals in progress (deal ->
    (games so far, each bot's summed score)), as a checkpoint keeps them."""

    sum_sq: float
    sum_sq_games: float
    info: float
    clusters: int
    items: int
    open: dict[int, tuple[int, dict[str, float]]]


class DesignEffect:
    """How much a deal's rotations are worth, measured from the data.

    Fed, for each game, each seat's TrueSkill score ``g = Δμ / v`` (``v`` =
    σ² + τ², the variance before the game) and its expected square ``i = (v
    − σ'²) / v²`` (σ' after the game). A bot's scores in the games of one deal
    are summed (a cluster). The design effect is

        DE = Σ (cluster sum)² / Σ g²,

    the variance of a bot's total over a deal against the variance it would
    have if the rotations were independent games: 1 without duplicate deals,
    above 1 when a bot's results in a deal move together, below 1 when the
    rotations cancel each other's luck. (``dispersion()``, Σ (cluster sum)² /
    Σ i, would also count TrueSkill's misfit of single games, its draw margin
    for instance; the benchmark measured it as needlessly conservative.)

    A deal's cluster is closed (forgotten) once it has had as many games as
    seats, its number of rotations, so the memory held is that of the deals in
    progress; games of an unknown deal (-1) are clusters of their own. Each
    game costs O(players).
    """

    __slots__ = ("sum_sq", "sum_sq_games", "info", "clusters", "items", "_open")

    def __init__(self) -> None:
        #: Σ over clusters of (Σ g)².
        self.sum_sq = 0.0
        #: Σ over games and seats of g².
        self.sum_sq_games = 0.0
        #: Σ over games and seats of i.
        self.info = 0.0
        self.clusters = 0
        #: (game, seat) pairs seen: items / clusters is the mean cluster size.
        self.items = 0
        #: deal -> ([games so far], {bot: summed score})
        self._open: dict[int, tuple[list[int], dict[str, float]]] = {}

    def add(self, deal: int, seats: Sequence[str], scores: Sequence[float], infos: Sequence[float]) -> None:
        self.info += math.fsum(infos)
        squares = math.fsum(g * g for g in scores)
        self.sum_sq_games += squares
        self.items += len(seats)
        if deal == -1:
            self.sum_sq += squares
            self.clusters += len(seats)
            return
        entry = self._open.get(deal)
        if entry is None:
            entry = ([0], {})
            self._open[deal] = entry
        count, sums = entry
        for bot, g in zip(seats, scores):
            old = sums.get(bot)
            if old is None:
                self.clusters += 1
                old = 0.0
            new = old + g
            sums[bot] = new
            self.sum_sq += new * new - old * old
        count[0] += 1
        if count[0] >= len(seats):
            del self._open[deal]

    def state(self) -> DesignState:
        return DesignState(
            sum_sq=self.sum_sq,
            sum_sq_games=self.sum_sq_games,
            info=self.info,
            clusters=self.clusters,
            items=self.items,
            open={d: (c[0], dict(sums)) for d, (c, sums) in self._open.items()},
        )

    @classmethod
    def restore(cls, state: DesignState) -> DesignEffect:
        """The design effect :meth:`state` described, bit for bit."""
        out = cls()
        out.sum_sq, out.sum_sq_games, out.info = state.sum_sq, state.sum_sq_games, state.info
        out.clusters, out.items = state.clusters, state.items
        out._open = {d: ([c], dict(sums)) for d, (c, sums) in state.open.items()}
        return out

    @property
    def open_deals(self) -> int:
        """How many deals are in progress: seen, but not yet in all their
        rotations (the clusters held in memory)."""
        return len(self._open)

    def _shrunk(self, num: float, den: float) -> float:
        if self.clusters == 0 or den <= 0.0:
            return 1.0
        prior = PRIOR_CLUSTERS * den / self.clusters
        prior_value = (1.0 + self.items / self.clusters) / 2.0
        return (num + prior * prior_value) / (den + prior)

    def raw(self) -> float:
        """Σ (cluster sum)² / Σ g², unshrunk and unbounded (1 with no data)."""
        return self.sum_sq / self.sum_sq_games if self.sum_sq_games > 0.0 else 1.0

    def factor(self) -> float:
        """The design effect, shrunk towards its prior by :data:`PRIOR_CLUSTERS`
        clusters and kept within [DE_MIN, DE_MAX]."""
        return min(DE_MAX, max(DE_MIN, self._shrunk(self.sum_sq, self.sum_sq_games)))

    def dispersion(self) -> float:
        """Σ (cluster sum)² / Σ i, shrunk the same way (not bounded)."""
        return self._shrunk(self.sum_sq, self.info)


def effective_variance(sigma: float, sigma0: float, factor: float) -> float:
    """A posterior variance with the games' share of its precision divided by `factor`."""
    prior = 1.0 / (sigma0 * sigma0)
    data = max(0.0, 1.0 / (sigma * sigma) - prior)
    return 1.0 / (prior + data / factor)


def posteriors(
    mus: Sequence[float],
    sigmas: Sequence[float],
    mu0s: Sequence[float],
    sigma0s: Sequence[float],
    factor: float,
) -> tuple[list[float], list[float]]:
    """Honest posterior means and variances of the bots' strengths.

    TrueSkill's posterior N(μ, σ²) of each bot is split into its starting
    prior N(μ₀, σ₀²) and what the games say, N(m, 1/λ) (Gaussian algebra:
    λ = 1/σ² − 1/σ₀²). The games' precision λ is divided by the design
    effect. The league's prior, σ₀ = 8.3 by default, is much wider than the
    spread of real bots, which makes the posteriors of a short league
    overconfident about differences; so the population's spread s² is
    estimated from the m's (DerSimonian–Laird, empirical Bayes) and a bot
    that has played is shrunk towards the population's mean with it, when s²
    is narrower than its own prior. A bot that has not played keeps its own.
    """
    n = len(mus)
    lam = [0.0] * n
    m = list(mus)
    for i in range(n):
        p0 = 1.0 / (sigma0s[i] * sigma0s[i])
        d = 1.0 / (sigmas[i] * sigmas[i]) - p0
        if d > 1e-9 * p0:
            m[i] = (mus[i] / (sigmas[i] * sigmas[i]) - mu0s[i] * p0) / d
            lam[i] = d / factor
    played = [i for i in range(n) if lam[i] > 0.0]
    s2 = math.inf
    centre = 0.0
    if len(played) >= 3:
        w = math.fsum(lam[i] for i in played)
        fixed = math.fsum(lam[i] * m[i] for i in played) / w
        q = math.fsum(lam[i] * (m[i] - fixed) ** 2 for i in played)
        den = w - math.fsum(lam[i] * lam[i] for i in played) / w
        s2 = max(S2_MIN, (q - (len(played) - 1)) / den) if den > 0.0 else math.inf
        if math.isfinite(s2):
            wr = [1.0 / (s2 + 1.0 / lam[i]) for i in played]
            centre = math.fsum(wi * m[i] for wi, i in zip(wr, played)) / math.fsum(wr)
    means, variances = [], []
    for i in range(n):
        if lam[i] == 0.0:
            means.append(float(mus[i]))
            variances.append(float(sigmas[i]) ** 2)
            continue
        prior_mean, prior_var = (centre, s2) if s2 < sigma0s[i] ** 2 else (mu0s[i], sigma0s[i] ** 2)
        prec = 1.0 / prior_var + lam[i]
        means.append((prior_mean / prior_var + lam[i] * m[i]) / prec)
        variances.append(1.0 / prec)
    return means, variances


def separations(probs: Sequence[float], confidence: float) -> list[bool]:
    """Which adjacent pairs of a table are separated at `confidence`, given
    each pair's P(upper truly above lower), with the false discovery rate
    held at 1 − `confidence` over the whole table (Benjamini–Hochberg).

    Testing each pair alone at 95% would, in a table of many equal bots
    (a class where half the teams submit the same starter bot, the 40
    identical entries of the adaptive test), separate a few of them by
    chance however honest each probability is: 36 equal pairs tested at 5%
    each give about two false separations. The step-up rule asks the k-th
    most certain of m pairs for an error below k·α/m: when most neighbours
    truly differ it is close to the per-pair test; when few do, it guards
    the equal ones. The separations shown are then wrong in at most about
    α of the reports, which is what ``benchmarks/calibration.py`` measures.
    """
    alpha = 1.0 - confidence
    m = len(probs)
    errors = sorted(range(m), key=lambda i: (1.0 - probs[i], i))
    passed = 0
    for k, i in enumerate(errors, 1):
        if 1.0 - probs[i] <= alpha * k / m + 1e-12:
            passed = k
    out = [False] * m
    for i in errors[:passed]:
        out[i] = True
    return out


def p_above(mu_a: float, var_a: float, mu_b: float, var_b: float) -> float:
    """P(strength a > strength b) for independent Gaussian posteriors."""
    sd = math.sqrt(var_a + var_b)
    if sd == 0.0:
        return 0.5 if mu_a == mu_b else float(mu_a > mu_b)
    return normal_cdf((mu_a - mu_b) / sd)


#: Below this |z| (p within about 0.08 of 1/2) a pair looks equal: more
#: games may never separate it (:func:`games_to_separate` says so, and
#: :func:`referee.report.format_settled` with it; the adaptive schedule
#: weighs such a pair as if at this |z|).
LOOKS_EQUAL_Z = 0.2

_NORMAL = NormalDist()


def z_of(p: float) -> float:
    """The standard normal quantile of `p`, clamped to (1e-9, 1 - 1e-9)."""
    return _NORMAL.inv_cdf(min(max(p, 1e-9), 1.0 - 1e-9))


def more_games(games: float, z: float, target: float) -> float:
    """About how many more games a bot of a pair at |z| = `z`, after `games`,
    needs to reach |z| = `target`: the evidence for an order grows with the
    square root of the games, as it does for a fixed difference in strength
    (:func:`games_to_separate`'s estimate, and the adaptive schedule's weight
    of a pair)."""
    return games * max(0.0, (target / z) ** 2 - 1.0)


def games_to_separate(p: float, games: float, confidence: float) -> int | None:
    """About how many more games a bot of an adjacent pair at P(upper
    truly above lower) = `p`, after `games` each, needs for the pair to be
    separated at `confidence`: (z(confidence)/z(p))² times the games it has,
    less those. None when the pair looks equal (|z(p)| below
    :data:`LOOKS_EQUAL_Z`: more games may never separate it) or has played
    no game."""
    z = abs(z_of(p))
    if z < LOOKS_EQUAL_Z or games == 0:
        return None
    return math.ceil(more_games(games, z, z_of(confidence)))


class _Draws:
    """Fixed standard normal draws, one row per joint draw: row s is the
    stream of ``random.Random("referee-settle:s")``, so its first n values
    are the same in every process whatever was asked before (the k-th
    value goes to the k-th place of the table)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rngs = [random.Random(f"referee-settle:{s}") for s in range(SAMPLES)]
        self._rows: list[list[float]] = [[] for _ in range(SAMPLES)]

    def rows(self, n: int) -> list[list[float]]:
        with self._lock:
            if len(self._rows[0]) < n:
                for rng, row in zip(self._rngs, self._rows):
                    gauss = rng.gauss
                    row.extend([gauss(0.0, 1.0) for _ in range(n - len(row))])
            return self._rows


_draws = _Draws()


def rank_intervals(
    mus: Sequence[float], variances: Sequence[float], level: float = 0.95
) -> list[tuple[int, int]]:
    """The central `level` interval of each bot's rank (1 = the strongest)
    under independent Gaussian posteriors, by :data:`SAMPLES` joint draws.
    Bots are given in table order; the draws are fixed for each place, so the
    result is a function of the inputs alone."""
    n = len(mus)
    if n == 0:
        return []
    rows = _draws.rows(n)
    sds = [math.sqrt(v) for v in variances]
    idx = range(n)
    ranked: list[list[int]] = []
    for row in rows:
        draw = [m + sd * z for m, sd, z in zip(mus, sds, row)]
        order = sorted(idx, key=draw.__getitem__, reverse=True)
        rank = [0] * n
        for r, i in enumerate(order, 1):
            rank[i] = r
        ranked.append(rank)
    tail = (1.0 - level) / 2.0
    lo_k = max(0, min(SAMPLES - 1, math.floor(tail * SAMPLES)))
    hi_k = max(0, min(SAMPLES - 1, math.ceil((1.0 - tail) * SAMPLES) - 1))
    out = []
    for rs in zip(*ranked):
        srt = sorted(rs)
        out.append((srt[lo_k], srt[hi_k]))
    return out
