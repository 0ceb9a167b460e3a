"""Schedules against each other, and the scheduler at scale (issue 13).

1. **Games to settle.** Simulated bots of known strength (evenly spaced,
   ``--gap`` apart; a game's places are strength + Gaussian noise of sd β,
   TrueSkill's own model) play leagues of 8, 32 and 100 bots at 2, 4 and 6
   seats. Each schedule is driven as the runner drives it (block k planned
   from the standings after the blocks before k-1; every game rated in index
   order by :class:`referee.tournament.ratings.Table`), and we count the games
   played until the whole order is settled (every adjacent pair at
   ``--confidence``, 95%) and until the top 3 are: ``adaptive`` (one run with
   no ``top``, one with ``top = 3``), ``balanced`` and ``round-robin`` (in its
   lexicographic order, chunks of one balanced round's size). A run gives up
   at ``--cap`` games per bot (shown ``>N``). ``wrong`` counts the bots not in
   their true place when the whole order (/ the top 3) is declared settled.

   TrueSkill's τ (``--tau``, 0 by default) puts a floor under σ (about 0.7 with
   the league default of 0.083): pairs closer than that floor allows are never
   settled by any schedule, and which schedule gets there first becomes a
   matter of luck. With τ = 0 the figures measure information alone.

2. **Scale.** 1,000 bots at 6 seats over 100,000 games (``--scale-games``):
   the time to plan every block (balanced; adaptive from standings each
   block) and to rate every game in order, the memory (the scheduler's own
   state; the process's peak RSS after planning and at the end), and how often
   pairs met.

    python benchmarks/schedule.py [--sizes 8,32,100] [--seats 2,4,6] [--cap 1500]
                                  [--gap 2.0] [--tau 0] [--skip-settle] [--skip-scale] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from referee.tournament.league import Ratings
from referee.tournament.ratings import Outcome, Standing, Table
from referee.tournament.schedule import (
    AdaptiveScheduler,
    BalancedScheduler,
    GameSpec,
    RoundRobinScheduler,
    Scheduler,
)

BETA = 25.0 / 6


def play(g: GameSpec, strength: dict[str, float]) -> Outcome:
    rng = random.Random(g.deal_seed * 7 + g.rotation)
    perf = [strength[b] + rng.gauss(0.0, BETA) for b in g.seats]
    order = sorted(range(len(g.seats)), key=lambda s: -perf[s])
    places = [0] * len(g.seats)
    for place, seat in enumerate(order, 1):
        places[seat] = place
    return Outcome(index=g.index, seats=list(g.seats), places=places, deal=g.deal_seed)


def settled(rows: list[Standing], confidence: float, top: int | None = None) -> bool:
    """The standings say the order (or the first `top` ranks) is settled: the
    pairs are separated as the table reports it (the false-discovery rule
    over every adjacent pair, as the adaptive stop uses)."""
    links = rows[:-1] if top is None else rows[: min(top, len(rows) - 1)]
    return all(r.separated_below for r in links)


def drive(
    s: Scheduler,
    strength: dict[str, float],
    *,
    confidence: float,
    tau: float,
    cap: int,
    stop_when: Callable[[list[Standing]], bool] | None = None,
) -> dict[str, Any]:
    """Play `s` like the runner: the games until the whole order and the top
    3 were first settled (None: not within `cap` games)."""
    table = Table(list(strength), Ratings(tau=tau))
    truth = sorted(strength, key=lambda b: -strength[b])
    blocks: list[list[GameSpec]] = []
    applied = played = 0
    first_all: int | None = None
    first_top: int | None = None
    wrong: int | None = None
    top_wrong: int | None = None
    t0 = time.perf_counter()

    def look(upto: int) -> list[Standing]:
        """Rate the blocks before `upto`, then note when the order (and the top 3) first settled."""
        nonlocal applied, played, first_all, first_top, wrong, top_wrong
        while applied < upto:
            for g in blocks[applied]:
                table.add(play(g, strength))
            played = blocks[applied][-1].index + 1
            applied += 1
        rows = table.standings(confidence)
        if first_top is None and settled(rows, confidence, 3):
            first_top = played
            top_wrong = sum(1 for r, b in zip(rows[:3], truth) if r.bot != b)
        if first_all is None and settled(rows, confidence):
            first_all = played
            wrong = sum(1 for r, b in zip(rows, truth) if r.bot != b)
        return rows

    for k in range(10**9):
        rows = None
        if k >= 2:
            rows = look(k - 1)
            if (first_all is not None and first_top is not None) or played >= cap:
                break
            if stop_when is not None and stop_when(rows):
                break
        block = s.block(k, rows)
        if not block:
            look(len(blocks))  # the league is over: rate what is left
            break
        blocks.append(block)
    return {
        "all": first_all,
        "top3": first_top,
        "wrong": wrong,
        "top3_wrong": top_wrong,
        "played": played,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def strengths(n: int, gap: float) -> dict[str, float]:
    """Bot i's strength, the names shuffled so that no schedule's order of
    names favours the strong ones."""
    names = [f"b{i:03d}" for i in range(n)]
    ranks = list(range(n))
    random.Random(n).shuffle(ranks)
    return {name: 25.0 + gap * ((n - 1) / 2 - r) for name, r in zip(names, ranks)}


def settle_table(sizes: list[int], seats: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        for t in seats:
            strength = strengths(n, args.gap)
            names = list(strength)
            cap = args.cap * n // t
            rr_chunk = max(t, n // t * t)
            limit = 10**9
            runs: dict[str, Scheduler] = {
                "adaptive": AdaptiveScheduler(
                    names, t, 1, True, 1, confidence=args.confidence, max_games=limit
                ),
                "adaptive top=3": AdaptiveScheduler(
                    names, t, 1, True, 1, confidence=args.confidence, top=3, max_games=limit
                ),
                "balanced": BalancedScheduler(names, t, 10**9, True, 1),
                "round-robin": RoundRobinScheduler(names, t, 10**6, True, 1, chunk=rr_chunk),
            }
            row: dict[str, Any] = {"bots": n, "seats": t, "cap": cap}
            for name, s in runs.items():
                r = drive(s, strength, confidence=args.confidence, tau=args.tau, cap=cap)
                row[name] = r
                print(
                    f"  {n:>3} bots {t} seats {name:<15} all {fmt(r['all'], r['played'], cap):>8}  top3 "
                    f"{fmt(r['top3'], r['played'], cap):>8}  wrong {r['wrong']}/{r['top3_wrong']}  ({r['seconds']} s)",
                    file=sys.stderr,
                    flush=True,
                )
            rows.append(row)
    return rows


def fmt(x: int | None, played: int, cap: int) -> str:
    """Games, ">cap" when the run gave up, "-" when it ended before (adaptive top=3)."""
    if x is not None:
        return str(x)
    return f">{cap}" if played >= cap else "-"


def state_bytes(s: BalancedScheduler) -> int:
    """The scheduler's own memory: its pair counts and per-bot lists."""
    size = sum(sys.getsizeof(d) for d in s.met) + sys.getsizeof(s.met)
    for part in (s.names, s.ids, s.active, s.games):
        size += sys.getsizeof(part)
    return size


def scale(games: int, n: int = 1000, t: int = 6) -> dict[str, Any]:
    names = [f"bot{i:04d}" for i in range(n)]
    out: dict[str, Any] = {"bots": n, "seats": t, "games": games}
    # planning alone, balanced: every block
    per_round = n // t * t
    rounds = -(-games // per_round)
    t0 = time.perf_counter()
    s = BalancedScheduler(names, t, rounds, True, 1)
    first = s.block(0, None)
    out["balanced_first_block_s"] = round(time.perf_counter() - t0, 3)
    blocks = [first]
    k = 1
    while blocks[-1]:
        blocks.append(s.block(k, None))
        k += 1
    out["balanced_plan_s"] = round(time.perf_counter() - t0, 2)
    out["balanced_state_mb"] = round(state_bytes(s) / 2**20, 1)
    out["rss_after_plan_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    pairs = [c for met in s.met for c in met.values()]
    out["pair_meetings"] = {str(c): pairs.count(c) // 2 for c in sorted(set(pairs))}
    specs = [g for b in blocks for g in b][:games]
    # rating every game in order
    strength = {b: 25.0 + random.Random(i).gauss(0, 4) for i, b in enumerate(names)}
    table = Table(names, Ratings())
    t0 = time.perf_counter()
    for g in specs:
        table.add(play(g, strength))
    out["rate_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    table.standings()
    out["standings_s"] = round(time.perf_counter() - t0, 2)
    # adaptive: planning from standings each block (those of the table above)
    rows = table.standings()
    a = AdaptiveScheduler(names, t, 1, True, 1, max_games=games)
    t0 = time.perf_counter()
    planned = 0
    for k in range(10**9):
        b = a.block(k, rows if k >= 2 else None)
        if not b:
            break
        planned += len(b)
    out["adaptive_plan_s"] = round(time.perf_counter() - t0, 2)
    out["adaptive_planned"] = planned
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="8,32,100")
    ap.add_argument("--seats", default="2,4,6")
    ap.add_argument("--cap", type=int, default=1500, help="games per bot before a run gives up")
    ap.add_argument("--gap", type=float, default=2.0, help="strength between neighbours (β = 4.17)")
    ap.add_argument("--tau", type=float, default=0.0)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--scale-games", type=int, default=100_000)
    ap.add_argument("--skip-settle", action="store_true")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result: dict[str, Any] = {}
    if not args.skip_settle:
        print("games until settled at", args.confidence, file=sys.stderr)
        result["settle"] = settle_table(
            [int(x) for x in args.sizes.split(",")], [int(x) for x in args.seats.split(",")], args
        )
    if not args.skip_scale:
        print(f"scale: 1000 bots, 6 seats, {args.scale_games} games", file=sys.stderr, flush=True)
        result["scale"] = scale(args.scale_games)
        if not args.json:
            for k, v in result["scale"].items():
                print(f"  {k}: {v}")
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
