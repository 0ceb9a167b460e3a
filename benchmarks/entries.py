"""The 40-entry league in process: how many games the strict order by entry needs (issue 13).

tests/tournament/test_adaptive_run.py plays 14 tactician, 13 greedy and 13
random entries of the sample bots over HTTP, adaptive, 4-seat tables, and
asserts that every tactician entry ranks above every greedy entry above every
random one. One real run takes minutes; this plays the same league with the
sample bots' own code called in process (no HTTP, the tournament rules: V1,
play for places), driven as the runner drives it (block k planned from the
standings after the blocks before k-1, every game rated in schedule order by
:class:`referee.tournament.ratings.Table`), over many league seeds, so that
the rate at which the strict order comes out right can be measured against
the game budget. The random bot is seeded with the league seed, as the test
seeds it (``--seed``: per seat, from the cards it was dealt), so a league
seed gives the same league every time, and for the test's seed the very
league the test plays over HTTP.

For each budget it prints how many league seeds had the strict order right,
whether any two entries of one bot were reported separated, the spread of
the μ of one bot's identical entries against their σ, and the margin (the
weakest tactician entry's μ minus the strongest greedy entry's).

    python benchmarks/entries.py [--games 2000,3000,4000] [--seeds 20] [--json]

About 5 s of CPU per 1,000 games on this machine's cores (compiled engine);
``--jobs`` leagues run in parallel (default: the CPU count).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from strength import make_bot, play_game  # noqa: E402

from protocol import Rules  # noqa: E402
from referee import engine_status  # noqa: E402
from referee.tournament.league import Ratings  # noqa: E402
from referee.tournament.ratings import Outcome, Standing, Table  # noqa: E402
from referee.tournament.schedule import AdaptiveScheduler, GameSpec  # noqa: E402

COUNTS = {"tactician": 14, "greedy": 13, "random": 13}
RULES = Rules(play_for_places=True)  # what a league file plays unless it says otherwise [D11]


class Bots:
    """One tactician, one greedy and one random bot serving every entry, as
    the three sample-bot processes of the real league do; a game is played
    by the strength harness's :func:`benchmarks.strength.play_game`."""

    def __init__(self, seed: int) -> None:
        self.players = {bot: make_bot(bot, seed) for bot in COUNTS}
        self.ids = itertools.count()

    def play(self, g: GameSpec, kind: dict[str, str]) -> Outcome:
        record = play_game(
            [self.players[kind[e]] for e in g.seats],
            g.deal_seed,
            RULES,
            deadline_ms=2000,
            game_id=f"g{next(self.ids)}",
            wire=False,
        )
        return Outcome(index=g.index, seats=list(g.seats), places=record.places, deal=g.deal_seed)


def league(seed: int, max_games: int) -> dict[str, Any]:
    """One adaptive league of the 40 entries, to its stop: what the standings say."""
    kind = {f"{bot}-{i:02d}": bot for bot, n in COUNTS.items() for i in range(n)}
    scheduler = AdaptiveScheduler(list(kind), 4, 1, True, seed, max_games=max_games)
    table = Table(list(kind), Ratings())
    bots = Bots(seed)
    blocks: list[list[GameSpec]] = []
    applied = 0
    begun = time.perf_counter()
    while True:
        k = len(blocks)
        standings: list[Standing] | None = None
        if k >= 2:
            while applied < k - 1:
                for g in blocks[applied]:
                    table.add(bots.play(g, kind))
                applied += 1
            standings = table.standings(scheduler.confidence)
        block = scheduler.block(k, standings)
        if not block:
            break
        blocks.append(block)
    for b in blocks[applied:]:
        for g in b:
            table.add(bots.play(g, kind))
    rows = table.standings(scheduler.confidence)
    order = [kind[r.bot] for r in rows]
    mus = {bot: [r.mu for r in rows if kind[r.bot] == bot] for bot in COUNTS}
    sigmas = [r.sigma for r in rows]
    return {
        "seed": seed,
        "games": sum(len(b) for b in blocks),
        "stopped": scheduler.stopped,
        "strict_order": order == [bot for bot, n in COUNTS.items() for _ in range(n)],
        "order": "".join(bot[0] for bot in order),
        "same_bot_separated": sum(
            1 for a, b in zip(rows, rows[1:]) if kind[a.bot] == kind[b.bot] and a.separated_below
        ),
        "mu_sd": {bot: round(statistics.pstdev(v), 3) for bot, v in mus.items()},
        "sigma": round(statistics.mean(sigmas), 3),
        "margin": round(min(mus["tactician"]) - max(mus["greedy"]), 3),
        "seconds": round(time.perf_counter() - begun, 1),
    }


def _league(args: tuple[int, int]) -> dict[str, Any]:
    return league(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="2000,3000,4000", help="game budgets (max_games), comma-separated")
    parser.add_argument("--seeds", type=int, default=20, help="league seeds per budget")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = parser.parse_args(argv)
    budgets = [int(x) for x in args.games.split(",") if x]
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    print(engine_status())
    print(
        f"40 entries ({', '.join(f'{n} {b}' for b, n in COUNTS.items())}), adaptive, 4 seats, "
        f"in process; {len(seeds)} league seeds per budget"
    )
    print(
        f"{'games':>6}  {'strict order':>12}  {'same bot sep.':>13}  {'mu sd (t/g/r)':>17}  "
        f"{'sigma':>5}  {'margin min/median':>17}"
    )
    figures: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for budget in budgets:
            runs = list(pool.map(_league, [(s, budget) for s in seeds]))
            right = sum(r["strict_order"] for r in runs)
            separated = sum(1 for r in runs if r["same_bot_separated"])
            sd = {bot: statistics.mean(r["mu_sd"][bot] for r in runs) for bot in COUNTS}
            margins = [r["margin"] for r in runs]
            print(
                f"{budget:>6}  {f'{right} of {len(runs)}':>12}  {f'{separated} of {len(runs)}':>13}  "
                f"{'/'.join(f'{sd[b]:.2f}' for b in COUNTS):>17}  {statistics.mean(r['sigma'] for r in runs):>5.2f}  "
                f"{f'{min(margins):+.2f} / {statistics.median(margins):+.2f}':>17}"
            )
            figures.append(
                {
                    "games": budget,
                    "strict_order": right,
                    "leagues": len(runs),
                    "same_bot_separated": separated,
                    "runs": runs,
                }
            )
    if args.json:
        print(
            json.dumps({"benchmark": "40 entries in process", "engine": engine_status(), "budgets": figures})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
