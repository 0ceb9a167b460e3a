"""A container bot's cost per move under gVisor (``runsc``) against ``runc``, in the same run.

The same sample bot image (``random``: it answers at once, so the figure is the
transport's and the sandbox's, not the bot's thinking) runs twice, as two
:class:`referee.bots.sandbox.container.ContainerBot` with every limit of a league
(memory, pids, read-only root, no network, the guarded unix socket), one
under each runtime. Each pair plays the same deal once with each (the order
alternates: ``runc`` first in even pairs), through
:func:`referee.match.play_match`, all seats one container; the figure is the
median over pairs of the time per request under ``runsc`` over the time per
request under ``runc`` (the machine's drift falls out of the pair's ratio, as
in ``benchmarks/overhead.py``).

Beside it, the time from creating a container to its first answer to ``GET /``
(:attr:`ContainerBot.ready_seconds`) under each runtime, over ``--starts``
starts each, alternated.

Needs a Docker daemon with ``runsc`` registered (``docker info`` lists it; see
docs/containers.md on how); the images are built or reused (``referee.bots.images.baseimage``).

    python benchmarks/runtimes.py [--pairs 15] [--players 3] [--games 5] [--starts 5]
                                  [--runtime runsc] [--baseline runc] [--json]

``--json`` prints the figures as one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol import Rules, Timeouts  # noqa: E402
from referee import engine_status  # noqa: E402
from referee.bots.sandbox.container import ContainerBot  # noqa: E402
from referee.bots.sandbox.container_limits import ContainerLimits  # noqa: E402
from referee.bots.sandbox.docker_daemon import check_runtime, docker_client, set_runtime  # noqa: E402
from referee.match import Match  # noqa: E402
from referee.record import RequestLine  # noqa: E402

BOT = "random"


def _quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], q[2]


async def _timed_game(bot: ContainerBot, seed: int, players: int) -> tuple[float, int]:
    """One game: (seconds, requests); a fault stops the benchmark (the figure would be wrong)."""
    match = Match([bot] * players, seed, rules=Rules(), timeouts=Timeouts(move_ms=5000))
    began = time.perf_counter()
    result = await match.play()
    elapsed = time.perf_counter() - began
    requests = sum(1 for line in match.record.lines if isinstance(line, RequestLine))
    faults = [f for seat in result.faults for f in seat]
    if faults:
        raise RuntimeError(f"the bot faulted under {bot.runtime or 'the default runtime'}: {faults[:3]}")
    return elapsed, requests


async def bench(
    image: str, runtimes: tuple[str, str], pairs: int, players: int, games: int, starts: int, out: Path
) -> dict[str, Any]:
    base, other = runtimes
    bots = {
        rt: ContainerBot(
            image, out_dir=out, name=f"bench-{rt}", key=f"bench-{rt}", limits=ContainerLimits(runtime=rt)
        )
        for rt in runtimes
    }
    ready: dict[str, list[float]] = {rt: [] for rt in runtimes}
    try:
        # container starts, alternated (each handshake after a stop starts a new one)
        for i in range(starts):
            for rt in runtimes if i % 2 == 0 else runtimes[::-1]:
                bot = bots[rt]
                await bot.stop()
                await bot.handshake()
                assert bot.ready_seconds is not None
                ready[rt].append(bot.ready_seconds)
        seeds = list(range(1, games + 1))
        for seed in seeds:  # warm-up: every deal once each
            for rt in runtimes:
                await _timed_game(bots[rt], seed, players)
        rows: list[dict[str, Any]] = []
        for i in range(pairs):
            seed = seeds[i % len(seeds)]
            order = runtimes if i % 2 == 0 else runtimes[::-1]
            took: dict[str, tuple[float, int]] = {}
            for rt in order:
                took[rt] = await _timed_game(bots[rt], seed, players)
            us = {rt: took[rt][0] / took[rt][1] * 1e6 for rt in runtimes}
            rows.append(
                {
                    "pair": i + 1,
                    "first": order[0],
                    "requests": took[base][1],
                    f"{base}_us": round(us[base], 1),
                    f"{other}_us": round(us[other], 1),
                    "ratio": round(us[other] / us[base], 4),
                }
            )
    finally:
        for each in bots.values():
            await each.close()
    ratios = [r["ratio"] for r in rows]
    q1, q3 = _quartiles(ratios)
    return {
        "benchmark": f"container bot cost per move under {other} vs {base}",
        "image": image,
        "players": players,
        "games": games,
        "pairs": pairs,
        "median_ratio": round(statistics.median(ratios), 4),
        "q1_ratio": round(q1, 4),
        "q3_ratio": round(q3, 4),
        f"{base}_us_median": round(statistics.median(r[f"{base}_us"] for r in rows), 1),
        f"{other}_us_median": round(statistics.median(r[f"{other}_us"] for r in rows), 1),
        "start_s_median": {rt: round(statistics.median(v), 3) for rt, v in ready.items()},
        "start_s": {rt: [round(x, 3) for x in v] for rt, v in ready.items()},
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=15, help="pairs, a game under each runtime (at least 3)")
    parser.add_argument("--players", type=int, default=3)
    parser.add_argument("--games", type=int, default=5, help="distinct deals the pairs cycle over")
    parser.add_argument("--starts", type=int, default=5, help="container starts timed under each runtime")
    parser.add_argument("--runtime", default="runsc", help="the runtime measured")
    parser.add_argument("--baseline", default="runc", help="the runtime it is measured against")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = parser.parse_args(argv)
    if args.pairs < 3:
        parser.error("--pairs must be at least 3")
    from referee.bots.images.baseimage import build_bot_image

    set_runtime(None)  # each bot under its own runtime, whatever $REFEREE_CONTAINER_RUNTIME says
    client = docker_client()
    for rt in (args.baseline, args.runtime):
        check_runtime(rt, client)
    image = build_bot_image(BOT, client)
    with tempfile.TemporaryDirectory(prefix="referee-bench-rt-") as tmp:
        figures = asyncio.run(
            bench(
                image,
                (args.baseline, args.runtime),
                args.pairs,
                args.players,
                args.games,
                max(1, args.starts),
                Path(tmp),
            )
        )
    figures["engine"] = engine_status()
    figures["cpus"] = os.cpu_count()
    figures["loadavg_1min"] = round(os.getloadavg()[0], 2)
    base, other = args.baseline, args.runtime
    print(figures["engine"])
    print(
        f"{figures['players']} players, one container for every seat ({image}); {figures['pairs']} "
        f"pairs, one game under each runtime, over {figures['games']} deals; us per request"
    )
    print(f"{'pair':>4}  {'first':>6}  {'requests':>8}  {base:>8}  {other:>8}  {'ratio':>6}")
    for row in figures["rows"]:
        print(
            f"{row['pair']:>4}  {row['first']:>6}  {row['requests']:>8}  {row[f'{base}_us']:>8.1f}  "
            f"{row[f'{other}_us']:>8.1f}  {row['ratio']:>6.3f}"
        )
    print(
        f"cost per move under {other} / under {base}: median {figures['median_ratio']:.3f} "
        f"[quartiles {figures['q1_ratio']:.3f}, {figures['q3_ratio']:.3f}]; "
        f"{figures[f'{base}_us_median']:.0f} us vs {figures[f'{other}_us_median']:.0f} us"
    )
    starts = figures["start_s_median"]
    print(
        f"container start to first GET / answer (median of {args.starts}): {base} {starts[base]:.2f} s, "
        f"{other} {starts[other]:.2f} s (x{starts[other] / starts[base]:.2f})"
    )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
