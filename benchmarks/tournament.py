"""Tournament throughput and the referee's memory, with sample bots on loopback.

Games/s at concurrency 1, 2, 4, 8 and 16 (greedy sample bots as command bots,
4-player tables; the time counts from the first game to the last, bots
already started), then the referee's peak RSS while 64 games run at once
(target: <= 150 MB). Ratios are against concurrency 1 in the same run.

    python benchmarks/tournament.py [--games N] [--executor local|ray|both] [--json]

With ``--executor ray`` (or ``both``) the same league also runs on a local Ray
cluster (``pip install -e .[ray]``) at concurrency 8, side by side with the
local executor: target overhead <= 1.2x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
from pathlib import Path

from protocol import Timeouts
from referee.bots.factory import BotSpec
from referee.tournament.league import League, TournamentTable
from referee.tournament.runner import Tournament

ROOT = Path(__file__).resolve().parents[1]


def league(games_wanted: int, concurrency: int) -> League:
    bots = [
        BotSpec(name=f"greedy{i}", command=[sys.executable, "-m", "sample_bots.greedy", "--port", "{port}"])
        for i in range(4)
    ]
    rounds = max(1, -(-games_wanted // 4))  # one meeting x 4 rotations per round
    lg = League(
        tournament=TournamentTable(
            name="bench", seed=5, table_size=4, rounds=rounds, concurrency=concurrency
        ),
        timeouts=Timeouts(move_ms=5000),
        bots=bots,
    )
    lg.path = str(ROOT / "bench.toml")
    return lg


def run(games: int, concurrency: int, executor: str = "local") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:

        async def go() -> Tournament:
            from referee.tournament.executors import Executor, LocalExecutor, RayExecutor

            ex: Executor = RayExecutor(workers=2) if executor == "ray" else LocalExecutor()
            t = Tournament(
                league(games, concurrency), Path(tmp) / "out", progress=False, replays=True, executor=ex
            )
            try:
                await t.run()
            finally:
                await ex.close()
            return t

        t = asyncio.run(go())
        return {
            "concurrency": concurrency,
            "games": t.played,
            "seconds": round(t.play_seconds, 3),
            "games_per_s": round(t.played / t.play_seconds, 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=48, help="games per concurrency level")
    ap.add_argument("--executor", choices=["local", "ray", "both"], default="local")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args()

    ray_report = None
    if args.executor in ("ray", "both"):
        pairs = []
        for _ in range(3):  # alternate to spread the machine's noise over both
            loc = run(args.games, 8, "local")
            ray_ = run(args.games, 8, "ray")
            pairs.append(loc["games_per_s"] / ray_["games_per_s"])
            print(f"concurrency 8: local {loc['games_per_s']} games/s, ray {ray_['games_per_s']} games/s")
        pairs.sort()
        ray_report = {
            "ray_overhead_median": round(pairs[1], 3),
            "pairs": [round(p, 3) for p in pairs],
            "target_met": pairs[1] <= 1.2,
        }
        print(f"ray overhead (local games/s / ray games/s, median of 3): {pairs[1]:.2f}x (target <= 1.2)")
        if args.executor == "ray":
            if args.json:
                print(json.dumps(ray_report, sort_keys=True))
            return

    rows = [run(args.games, c) for c in (1, 2, 4, 8, 16)]
    base = rows[0]["games_per_s"]
    print(f"{'concurrency':>11} {'games':>6} {'seconds':>8} {'games/s':>8} {'x c=1':>6}")
    for r in rows:
        r["ratio_vs_c1"] = round(r["games_per_s"] / base, 2)
        print(
            f"{r['concurrency']:>11} {r['games']:>6} {r['seconds']:>8.2f} {r['games_per_s']:>8.2f} {r['ratio_vs_c1']:>6}"
        )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    big = run(128, 64)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"64 concurrent games: {big['games']} games, {big['games_per_s']} games/s; "
        f"referee peak RSS {peak:.0f} MB (before: {before:.0f} MB; target <= 150 MB)"
    )
    report = {
        "ray": ray_report,
        "levels": rows,
        "rss_64_concurrent_mb": round(peak, 1),
        "rss_target_met": peak <= 150,
        "games_per_s_64": big["games_per_s"],
    }
    if args.json:
        print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
