"""Calibration of the standings' settledness (issue 13), in simulated leagues.

Every bot has a known true strength; games are sampled (no HTTP, no engine)
from a Thurstone model (Gaussian performance noise) or a Plackett–Luce one
(Gumbel noise) in which a duplicate deal adds two shared terms, so that a
deal's rotations are correlated as real ones are:

* seat luck: each seat's cards are good or bad, the same in every rotation
  (the duplicate design cancels it: a bot holds every seat once);
* deal affinity: a deal suits some bots' styles, the same in every rotation
  (nothing cancels it: a bot's results in one deal move together).

Each method reports, for each pair of neighbours in the standings, the
probability that the upper one is truly stronger; a pair is "separated at
95%" when that is at least 0.95 (``settle``: when the table says so). The table prints, per scenario and method,
how many such reports were in the wrong true order (at most about 5% is
honest; "expected" is Σ(1 − p) over them, the number the method itself
predicts), how many neighbour pairs were separated (power), "obs/claim":
over every report, the pairs in the order the method leans against divided
by the number it predicts (1 is calibrated, above 1 overconfident), and for
the table's own method how often the rank interval held the true rank. Reports
are taken half-way through each league and at its end. Methods:

* ``naive``: TrueSkill's posteriors as they are, Φ(Δμ / √(σa² + σb²));
* ``deal-as-game``: TrueSkill rating each completed deal once, its rotations
  merged into one game ranked by total place;
* ``bt-bootstrap``: Bradley–Terry on the pairwise results, 95% from a
  bootstrap over deals (slow: a reference, not something to run every block);
* ``per-pair``: ``settle``'s probabilities, each pair separated on its own
  when p ≥ 0.95 (what the table did before it held the false discovery rate);
* ``settle``: what ``Table.standings()`` reports (``referee/tournament/settle.py``):
  TrueSkill's posteriors with the games' share of the precision divided by
  the design effect measured from the data (clustered by deal), and an
  empirical-Bayes prior in place of the league's wide σ₀, a pair separated
  when it clears the Benjamini–Hochberg rung over the table's pairs;
* its variants, to show what each part does: ``dispersion`` (scaled by
  Σ(cluster sum)²/Σ Fisher information, which also counts TrueSkill's misfit
  of single games), ``design-only`` (no empirical prior), ``prior-only`` (no
  design effect), ``de-floor-1`` (never credits the rotations' cancelling
  luck), ``de-no-floor``, ``de-no-prior`` (the design effect unshrunk).

Then the cost of one ``standings()`` and one ``uncertain_pairs()`` call at
100 and 1,000 bots (after 10,000 and 100,000 games), and the cost of
``add()`` early and late in a league.

    python benchmarks/calibration.py                 # 200 leagues per scenario
    python benchmarks/calibration.py --leagues 300 --bootstrap 0 --json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trueskill  # noqa: E402

from referee.tournament import settle  # noqa: E402
from referee.tournament.league import Ratings  # noqa: E402
from referee.tournament.ratings import Outcome, Standing, Table, environment, wilson  # noqa: E402
from referee.tournament.schedule import make_schedule  # noqa: E402
from referee.tournament.settle import normal_cdf  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    duplicate: bool
    #: Shared per seat of a deal (cancelled by the rotations).
    seat_luck: float
    #: Shared per bot over a deal's rotations (not cancelled).
    affinity: float
    #: Gumbel noise (Plackett–Luce) instead of Gaussian (Thurstone).
    gumbel: bool = False


SCENARIOS = [
    Scenario("independent games", duplicate=False, seat_luck=1.0, affinity=0.0),
    Scenario("duplicate, seat luck", duplicate=True, seat_luck=1.5, affinity=0.0),
    Scenario("duplicate, heavy seat luck", duplicate=True, seat_luck=4.0, affinity=0.0),
    Scenario("duplicate, deal affinity", duplicate=True, seat_luck=0.5, affinity=1.0),
    Scenario("duplicate, both, Plackett-Luce", duplicate=True, seat_luck=1.0, affinity=0.7, gumbel=True),
]


@dataclass(frozen=True)
class Config:
    bots: int
    size: int
    #: Random meetings (each played in every rotation); 0: the league's round-robin.
    deals: int = 0
    rounds: int = 1
    #: Standard deviation of the true strengths (the per-game noise is ~1).
    spread: float = 0.5


#: The league shapes the benchmark cycles through: 2 to 6 players, 8 to 32 bots.
CONFIGS = [
    Config(8, 2, rounds=6, spread=1.0),
    Config(8, 4, spread=0.8),
    Config(8, 6, spread=1.0),
    Config(16, 4, deals=80, spread=1.2),
    Config(32, 2, deals=400, spread=1.5),
    Config(12, 6, deals=30, spread=1.0),
    Config(16, 3, deals=100, spread=0.8),
]

#: Small leagues for the test (fast; still 2 to 6 players).
SMALL_CONFIGS = [
    Config(8, 2, deals=50, spread=1.2),
    Config(8, 4, deals=12, spread=1.0),
    Config(6, 2, deals=40, spread=0.8),
    Config(6, 3, deals=16, spread=1.2),
    Config(8, 2, deals=50, spread=1.5),
    Config(8, 6, deals=5, spread=1.5),
]


@dataclass
class League:
    outcomes: list[Outcome]
    strength: dict[str, float]
    size: int


def simulate(scn: Scenario, cfg: Config, rng: random.Random) -> League:
    """One league: true strengths, a schedule, and sampled places."""
    bots = [f"bot{i:02d}" for i in range(cfg.bots)]
    strength = {b: rng.gauss(0.0, cfg.spread) for b in bots}
    tables: list[tuple[int, tuple[str, ...]]] = []  # (deal key, seats)
    if cfg.deals == 0:
        for spec in make_schedule(bots, cfg.size, cfg.rounds, scn.duplicate, rng.randrange(1 << 30)):
            tables.append((spec.deal_seed, spec.seats))
    else:
        games = dict.fromkeys(bots, 0)
        block: list[list[str]] = []
        key = 0
        for d in range(cfg.deals):
            pool = sorted(bots, key=lambda b: (games[b], rng.random()))
            members = pool[: cfg.size]
            rng.shuffle(members)
            for b in members:
                games[b] += cfg.size
            block.append(members)
            if len(block) == 8 or d == cfg.deals - 1:
                # A deal's rotations are spread apart, as the schedule does.
                for k in range(cfg.size):
                    for j, m in enumerate(block):
                        deal = key + j if scn.duplicate else rng.randrange(1 << 62)
                        tables.append((deal, tuple(m[(s + k) % cfg.size] for s in range(cfg.size))))
                key += len(block)
                block = []
    luck: dict[tuple[int, int], float] = {}
    taste: dict[tuple[int, str], float] = {}
    outcomes = []
    for index, (deal, seats) in enumerate(tables):
        perf = []
        for s, b in enumerate(seats):
            lk = luck.setdefault((deal, s), rng.gauss(0.0, 1.0))
            tk = taste.setdefault((deal, b), rng.gauss(0.0, 1.0))
            if scn.gumbel:
                noise = -math.log(-math.log(rng.random() or 1e-300)) * math.sqrt(6) / math.pi
            else:
                noise = rng.gauss(0.0, 1.0)
            perf.append(strength[b] + scn.seat_luck * lk + scn.affinity * tk + noise)
        places = [0] * len(seats)
        for p, i in enumerate(sorted(range(len(seats)), key=lambda i: -perf[i])):
            places[i] = p + 1
        outcomes.append(
            Outcome(index=index, seats=list(seats), places=places, deal=deal if scn.duplicate else -1)
        )
    return League(outcomes, strength, cfg.size)


# ----------------------------------------------------------------- other methods


def naive_p(a: Standing, b: Standing) -> float:
    return normal_cdf((a.mu - b.mu) / math.sqrt(a.sigma**2 + b.sigma**2))


def scaled_p(table: Table, a: Standing, b: Standing, factor: float, shrink: bool) -> float:
    """TrueSkill's posteriors with the games' share of the variance scaled by
    `factor`, and with `shrink` the empirical prior of ``settle.posteriors``."""
    if shrink:
        bots = list(table.ratings)
        i, j = bots.index(a.bot), bots.index(b.bot)
        mus, var = settle.posteriors(
            [table.ratings[x].mu for x in bots],
            [table.ratings[x].sigma for x in bots],
            [table.mu0[x] for x in bots],
            [table.sigma0[x] for x in bots],
            factor,
        )
        return settle.p_above(mus[i], var[i], mus[j], var[j])
    va = settle.effective_variance(a.sigma, table.sigma0[a.bot], factor)
    vb = settle.effective_variance(b.sigma, table.sigma0[b.bot], factor)
    return settle.p_above(a.mu, va, b.mu, vb)


#: Variants of the table's method: the factor they scale the games' variance
#: by, and whether they use the empirical prior.
VARIANTS: dict[str, tuple[Callable[[settle.DesignEffect], float], bool]] = {
    "dispersion": (lambda d: min(25.0, max(0.25, d.dispersion())), False),
    "design-only": (lambda d: d.factor(), False),
    "prior-only": (lambda d: 1.0, True),
    "de-floor-1": (lambda d: max(1.0, d.factor()), True),
    "de-no-floor": (lambda d: min(25.0, max(0.02, d._shrunk(d.sum_sq, d.sum_sq_games))), True),
    "de-no-prior": (lambda d: min(25.0, max(0.5, d.raw())), True),
}


class DealAsGame:
    """TrueSkill over deals: a completed deal is one game, ranked by each
    bot's total place over the rotations (equal totals are draws)."""

    def __init__(self, bots: Sequence[str], cfg: Ratings) -> None:
        self.env = environment(cfg)
        self.ratings: dict[str, trueskill.Rating] = {b: self.env.create_rating() for b in bots}
        self.open: dict[int, tuple[int, dict[str, int]]] = {}

    def add(self, o: Outcome) -> None:
        if o.deal == -1:
            self._rate(dict(zip(o.seats, o.places)))
            return
        n, totals = self.open.get(o.deal, (0, {}))
        for b, p in zip(o.seats, o.places):
            totals[b] = totals.get(b, 0) + p
        if n + 1 >= len(o.seats):
            del self.open[o.deal]
            self._rate(totals)
        else:
            self.open[o.deal] = (n + 1, totals)

    def _rate(self, totals: dict[str, int]) -> None:
        bots = list(totals)
        rated = self.env.rate([(self.ratings[b],) for b in bots], ranks=[totals[b] for b in bots])
        for b, r in zip(bots, rated):
            self.ratings[b] = r[0]

    def p(self, a: str, b: str) -> float:
        ra, rb = self.ratings[a], self.ratings[b]
        return normal_cdf((ra.mu - rb.mu) / math.sqrt(ra.sigma**2 + rb.sigma**2))


def bt_bootstrap(
    outcomes: Sequence[Outcome], bots: Sequence[str], replicates: int, rng: random.Random
) -> Callable[[str, str], float]:
    """Bradley–Terry (MM, one win and one loss against a ghost of strength 1
    as the prior) on the pairwise results of the games, resampling deals."""
    index = {b: i for i, b in enumerate(bots)}
    deals: dict[int, dict[tuple[int, int], float]] = {}
    for o in outcomes:
        key = o.deal if o.deal != -1 else -2 - o.index
        cell = deals.setdefault(key, {})
        for i, a in enumerate(o.seats):
            for j, b in enumerate(o.seats):
                if o.places[i] < o.places[j]:
                    pair = (index[a], index[b])
                    cell[pair] = cell.get(pair, 0.0) + 1.0
                elif i < j and o.places[i] == o.places[j]:
                    for pair in ((index[a], index[b]), (index[b], index[a])):
                        cell[pair] = cell.get(pair, 0.0) + 0.5
    cells = list(deals.values())
    n = len(bots)

    def fit(weights: Sequence[float], start: list[float], iterations: int) -> list[float]:
        wins = [1.0] * n
        games: dict[tuple[int, int], float] = {}
        for w, cell in zip(weights, cells):
            if w:
                for (i, j), c in cell.items():
                    wins[i] += w * c
                    key = (i, j) if i < j else (j, i)
                    games[key] = games.get(key, 0.0) + w * c
        pairs = list(games.items())
        theta = list(start)
        for _ in range(iterations):
            den = [2.0 / (t + 1.0) for t in theta]
            for (i, j), g in pairs:
                x = g / (theta[i] + theta[j])
                den[i] += x
                den[j] += x
            theta = [w / d for w, d in zip(wins, den)]
        return theta

    full = fit([1.0] * len(cells), [1.0] * n, 200)
    samples = []
    for _ in range(replicates):
        weights = [0.0] * len(cells)
        for _ in range(len(cells)):
            weights[rng.randrange(len(cells))] += 1.0
        samples.append(fit(weights, full, 25))

    def p(a: str, b: str) -> float:
        i, j = index[a], index[b]
        above = sum(1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0 for s in samples)
        return above / len(samples)

    return p


# ----------------------------------------------------------------- tallies


@dataclass
class Tally:
    reports: int = 0
    separated: int = 0
    wrong: int = 0
    #: Σ (1 − p) over the separated reports: the wrong ones the method expects.
    expected: float = 0.0
    #: Over every report, whichever way it leans (q = max(p, 1 − p)): the
    #: pairs in the other order, and Σ (1 − q), how many the method expected.
    lean_wrong: float = 0.0
    lean_expected: float = 0.0
    #: Rank intervals (the table's method only).
    intervals: int = 0
    covered: int = 0
    width: float = 0.0

    def row(self) -> dict[str, float]:
        low, high = wilson(self.wrong, self.separated) if self.separated else (0.0, 1.0)
        return {
            "pairs": self.reports,
            "separated": self.separated,
            "power": self.separated / self.reports if self.reports else 0.0,
            "wrong": self.wrong,
            "expected_wrong": self.expected,
            "wrong_rate": self.wrong / self.separated if self.separated else 0.0,
            "wrong_low": low,
            "wrong_high": high,
            "overconfidence": self.lean_wrong / self.lean_expected if self.lean_expected else math.nan,
            "coverage": self.covered / self.intervals if self.intervals else math.nan,
            "mean_width": self.width / self.intervals if self.intervals else math.nan,
        }


@dataclass
class Calibration:
    scenario: str
    leagues: int
    tallies: dict[str, Tally] = field(default_factory=dict)


def _count(t: Tally, p: float, upper_truly_above: bool, separated: bool) -> None:
    t.reports += 1
    t.lean_expected += 1.0 - max(p, 1.0 - p)
    if p == 0.5:
        t.lean_wrong += 0.5
    elif (p > 0.5) != upper_truly_above:
        t.lean_wrong += 1.0
    if separated:
        t.separated += 1
        t.wrong += not upper_truly_above
        t.expected += 1.0 - p


def calibrate(
    scn: Scenario,
    leagues: int,
    seed: int,
    *,
    configs: Sequence[Config] = CONFIGS,
    methods: Sequence[str] = ("settle",),
    bootstrap: int = 100,
    bootstrap_leagues: int | None = None,
    confidence: float = 0.95,
) -> Calibration:
    """Simulate `leagues` leagues (cycling over `configs`) and tally each
    method's reports at half-way and at the end of each league."""
    rng = random.Random(f"{seed}:{scn.name}")
    cal = Calibration(scn.name, leagues, {m: Tally() for m in methods})
    for n in range(leagues):
        cfg = configs[n % len(configs)]
        league = simulate(scn, cfg, rng)
        bots = list(league.strength)
        table = Table(bots, Ratings())
        merged = DealAsGame(bots, Ratings()) if "deal-as-game" in methods else None
        checkpoints = {len(league.outcomes) // 2 - 1, len(league.outcomes) - 1}
        for k, o in enumerate(league.outcomes):
            table.add(o)
            if merged is not None:
                merged.add(o)
            if k not in checkpoints:
                continue
            rows = table.standings(confidence)
            truth = sorted(bots, key=lambda b: -league.strength[b])
            true_rank = {b: i + 1 for i, b in enumerate(truth)}
            slow = "bt-bootstrap" in methods and (bootstrap_leagues is None or n < bootstrap_leagues)
            boot = bt_bootstrap(league.outcomes[: k + 1], bots, bootstrap, rng) if slow else None
            for a, b in zip(rows, rows[1:]):
                above = league.strength[a.bot] > league.strength[b.bot]
                for m in methods:
                    if m == "bt-bootstrap" and boot is None:
                        continue
                    separated: bool | None = None
                    if m == "settle":
                        assert a.p_above_next is not None
                        p, separated = a.p_above_next, a.separated_below
                    elif m == "per-pair":
                        assert a.p_above_next is not None
                        p = a.p_above_next
                    elif m == "naive":
                        p = naive_p(a, b)
                    elif m == "deal-as-game":
                        assert merged is not None
                        p = merged.p(a.bot, b.bot)
                    elif m in VARIANTS:
                        fn, shrink = VARIANTS[m]
                        p = scaled_p(table, a, b, fn(table.design), shrink)
                    elif m == "bt-bootstrap":
                        assert boot is not None
                        p = boot(a.bot, b.bot)
                    else:
                        raise ValueError(m)
                    _count(cal.tallies[m], p, above, p >= confidence if separated is None else separated)
            if "settle" in methods:
                t = cal.tallies["settle"]
                for r in rows:
                    t.intervals += 1
                    t.covered += r.rank_low <= true_rank[r.bot] <= r.rank_high
                    t.width += r.rank_high - r.rank_low + 1
    return cal


# ----------------------------------------------------------------- cost


def _big_table(bots: int, games: int, size: int, seed: int) -> tuple[Table, float, float]:
    """A table after `games` random games; the µs per add() over the first
    and the last 1,000 games."""
    rng = random.Random(seed)
    names = [f"bot{i:04d}" for i in range(bots)]
    strength = {b: rng.gauss(0.0, 1.0) for b in names}
    table = Table(names, Ratings())
    early = late = 0.0
    deal = 0
    index = 0
    while index < games:
        members = rng.sample(names, size)
        luck = [rng.gauss(0.0, 1.0) for _ in range(size)]
        for k in range(size):
            seats = [members[(s + k) % size] for s in range(size)]
            perf = [strength[b] + luck[s] + rng.gauss(0.0, 1.0) for s, b in enumerate(seats)]
            places = [0] * size
            for p, i in enumerate(sorted(range(size), key=lambda i: -perf[i])):
                places[i] = p + 1
            o = Outcome(index=index, seats=seats, places=places, deal=deal)
            t0 = time.perf_counter()
            table.add(o)
            dt = time.perf_counter() - t0
            if index < 1000:
                early += dt
            elif index >= games - 1000:
                late += dt
            index += 1
        deal += 1
    return table, early / 1000 * 1e6, late / 1000 * 1e6


def cost(
    shapes: Sequence[tuple[int, int]] = ((100, 10_000), (1000, 100_000)), size: int = 2
) -> list[dict[str, float]]:
    out = []
    for bots, games in shapes:
        table, early, late = _big_table(bots, games, size, seed=bots)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            table.standings()
            times.append(time.perf_counter() - t0)
        pair_times = []
        for _ in range(20):
            t0 = time.perf_counter()
            table.uncertain_pairs()
            pair_times.append(time.perf_counter() - t0)
        out.append(
            {
                "bots": bots,
                "games": games,
                "standings_ms": sorted(times)[len(times) // 2] * 1e3,
                "uncertain_pairs_ms": sorted(pair_times)[len(pair_times) // 2] * 1e3,
                "add_us_first_1000": early,
                "add_us_last_1000": late,
                "design_effect": table.design.factor(),
            }
        )
    return out


# ----------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--leagues", type=int, default=200, help="leagues per scenario (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bootstrap", type=int, default=50, help="replicates of the BT bootstrap (0: skip it)")
    ap.add_argument(
        "--bootstrap-leagues",
        type=int,
        default=50,
        help="the BT bootstrap (slow) runs on the first N leagues of each scenario (default 50)",
    )
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    methods = (
        ["naive", "deal-as-game"]
        + (["bt-bootstrap"] if args.bootstrap else [])
        + list(VARIANTS)
        + ["per-pair", "settle"]
    )
    results = []
    t0 = time.perf_counter()
    for scn in SCENARIOS:
        cal = calibrate(
            scn,
            args.leagues,
            args.seed,
            methods=methods,
            bootstrap=args.bootstrap,
            bootstrap_leagues=args.bootstrap_leagues,
        )
        results.append(cal)
        if not args.json:
            print(
                f"\n{scn.name}: {cal.leagues} leagues ({time.perf_counter() - t0:.0f} s so far)", flush=True
            )
            print(
                f"  {'method':<14} {'pairs':>6} {'separated':>9} {'power':>6} {'wrong':>6} "
                f"{'expected':>8} {'wrong %':>8} {'95% interval':>14} {'obs/claim':>9} {'rank cover':>10} {'width':>6}"
            )
            for m, t in cal.tallies.items():
                r = t.row()
                cover = "" if math.isnan(r["coverage"]) else f"{100 * r['coverage']:.1f}%"
                width = "" if math.isnan(r["mean_width"]) else f"{r['mean_width']:.2f}"
                print(
                    f"  {m:<14} {t.reports:>6} {t.separated:>9} {100 * r['power']:>5.1f}% {t.wrong:>6} {t.expected:>8.1f} "
                    f"{100 * r['wrong_rate']:>7.2f}% [{100 * r['wrong_low']:>4.1f}, {100 * r['wrong_high']:>4.1f}]"
                    f" {r['overconfidence']:>9.2f}"
                    f" {cover:>10} {width:>6}"
                )
    costs = [] if args.no_cost else cost()
    if not args.json:
        for c in costs:
            print(
                f"\n{c['bots']} bots, {c['games']} games: standings() {c['standings_ms']:.1f} ms, "
                f"uncertain_pairs() {c['uncertain_pairs_ms']:.2f} ms; add() {c['add_us_first_1000']:.0f} µs "
                f"over the first 1,000 games, {c['add_us_last_1000']:.0f} µs over the last; design effect {c['design_effect']:.3f}"
            )
    else:
        print(
            json.dumps(
                {
                    "calibration": [
                        {
                            "scenario": c.scenario,
                            "leagues": c.leagues,
                            "methods": {m: {**asdict(t), **t.row()} for m, t in c.tallies.items()},
                        }
                        for c in results
                    ],
                    "cost": costs,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
