"""The referee against the peer a user would pick: kaggle-environments' URL agents (issue 27).

A competition of bots over HTTP, run with kaggle-environments, gives each bot
as a URL: its ``UrlAgent`` POSTs every observation with ``requests.post``
(a new connection per call) from the environment's process pool (two worker
processes, one for each agent). Both sides here play instant bots on
loopback, each in a process of its own, in one run:

* **baseline, kaggle-environments**: ``make("connectx").run([URL, URL])``,
  ConnectX 7x6 against an aiohttp agent that answers the first open column at
  once (a game of 19 decisions).
* **the referee**: a 3UP 3DOWN game of ``--players`` seats through
  :class:`referee.match.Match` and :class:`referee.bots.HttpBot` over one
  kept-alive session, against ``benchmarks/overhead.py``'s instant bot
  (``index 0``).

A decision is one bot's answer to one request: an ``/act`` of the referee,
an agent's act in a ConnectX step. A game's time per decision is its wall
time (deal or reset, every request, the record) over its decisions. Each
round plays ``--games`` games of each, kaggle-environments first in even
rounds and the referee first in odd ones, so a drift of the shared machine
falls on both. The figure is kaggle / referee: per round, each side's time
over its decisions, the median over rounds. Beside it, each side's round
trip a request as it timed it itself (``Agent.act``'s ``duration``; the
referee's ``latency_ms``).

    python benchmarks/peers_http.py [--rounds 9] [--games 4] [--players 2] [--quick] [--json]

kaggle-environments is no dependency of the project: its declared ones are
heavy (jax, transformers, ...), and what this script uses of it needs only
``requests``, ``jsonschema`` and ``numpy`` (see :data:`INSTALL`). Without it
the script says how to install it and exits 2. ``--json`` prints the
figures as one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import io
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead

from protocol import Rules, Timeouts
from referee import engine_status
from referee.bots import HttpBot, free_port, make_session
from referee.match import Match

INSTALL = (
    "kaggle-environments is not installed. Its declared dependencies are heavy (jax, transformers, ...); "
    "this benchmark needs only requests, jsonschema and numpy beside it:\n"
    "  pip install --no-deps kaggle-environments && pip install requests jsonschema numpy"
)
#: ConnectX's first-open-column games all take this many decisions
CONNECTX_DECISIONS = 19


# ------------------------------------------------------- the URL agent


class _Board(msgspec.Struct):
    board: list[int]


class _State(msgspec.Struct):
    observation: _Board


class _Columns(msgspec.Struct):
    columns: int


class _Act(msgspec.Struct):
    """What of UrlAgent's POST the agent reads."""

    configuration: _Columns
    state: _State


def serve_agent(port: int) -> None:
    """kaggle-environments' instant URL agent: the first open column (runs in its own process)."""
    from aiohttp import web

    decoder = msgspec.json.Decoder(_Act)

    async def act(request: web.Request) -> web.Response:
        post = decoder.decode(await request.read())
        board = post.state.observation.board
        column = next(c for c in range(post.configuration.columns) if board[c] == 0)
        return web.Response(body=b'{"action": %d}' % column, content_type="application/json")

    app = web.Application()
    app.router.add_post("/", act)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until `process` accepts connections on `port`."""
    for _ in range(200):
        if process.poll() is not None:
            raise RuntimeError(f"the benchmark's bot on port {port} exited {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the benchmark's bot on port {port} did not start")


# ------------------------------------------------------------ the games


class Game(msgspec.Struct):
    """One game: its wall time, its decisions, and each request's round trip as the side timed it."""

    seconds: float
    decisions: int
    round_trips_ms: list[float]


def kaggle_game(env: Any, url: str) -> Game:
    """One ConnectX episode between two URL agents at `url`, as ``env.run`` plays it."""
    logged = len(env.logs)  # the env adds to its logs, never clears them
    begun = time.perf_counter()
    steps = env.run([url, url])
    seconds = time.perf_counter() - begun
    # the agents' states before each step: the ACTIVE ones were asked
    decisions = sum(agent.status == "ACTIVE" for state in steps[:-1] for agent in state)
    statuses = [agent.status for agent in steps[-1]]
    if statuses != ["DONE", "DONE"] or decisions != CONNECTX_DECISIONS:
        raise RuntimeError(
            f"a ConnectX game ended {statuses} after {decisions} decisions: a URL agent failed"
        )
    trips = [log["duration"] * 1000 for logs in env.logs[logged:] for log in logs if log]
    return Game(seconds=seconds, decisions=decisions, round_trips_ms=trips)


async def referee_game(bot: HttpBot, seed: int, players: int) -> Game:
    """One game of the referee's, every seat `bot`."""
    match = Match([bot] * players, seed, rules=Rules(), timeouts=Timeouts(move_ms=5000))
    begun = time.perf_counter()
    result = await match.play()
    seconds = time.perf_counter() - begun
    if any(result.faults):
        raise RuntimeError(f"the referee's game {seed} had faults: {result.faults}")
    trips = [ms for seat in result.latencies_ms for ms in seat]
    return Game(seconds=seconds, decisions=len(trips), round_trips_ms=trips)


async def referee_games(bot: HttpBot, seeds: list[int], players: int) -> list[Game]:
    return [await referee_game(bot, seed, players) for seed in seeds]


# ------------------------------------------------------------- figures


def _per_decision_ms(games: list[Game]) -> float:
    return sum(g.seconds for g in games) / sum(g.decisions for g in games) * 1000


def _side(games: list[Game]) -> dict[str, Any]:
    """A side's figures: time per decision over its games, and its round trips."""
    per_game = [g.seconds / g.decisions * 1000 for g in games]
    trips = [ms for g in games for ms in g.round_trips_ms]
    return {
        "games": len(games),
        "decisions": sum(g.decisions for g in games),
        "decision_ms_median": round(statistics.median(per_game), 3),
        "decision_ms_mean": round(statistics.fmean(per_game), 3),
        "round_trip_ms_median": round(statistics.median(trips), 3),
        "round_trip_ms_mean": round(statistics.fmean(trips), 3),
    }


def bench(kaggle_url: str, referee_url: str, rounds: int, games: int, players: int) -> dict[str, Any]:
    with contextlib.redirect_stdout(io.StringIO()):  # it reports the environments it could not load
        from kaggle_environments import make

        env = make("connectx")
    seeds = list(range(1, games + 1))
    kaggle: list[list[Game]] = []
    referee: list[list[Game]] = []
    try:
        kaggle_game(env, kaggle_url)  # warm-up; starts the env's process pool before any event loop
        with asyncio.Runner() as runner:
            session = runner.run(_session())
            bot = HttpBot(referee_url, session=session)
            try:
                runner.run(referee_games(bot, seeds, players))  # warm-up
                for r in range(rounds):
                    if r % 2 == 0:
                        kaggle.append([kaggle_game(env, kaggle_url) for _ in seeds])
                        referee.append(runner.run(referee_games(bot, seeds, players)))
                    else:
                        referee.append(runner.run(referee_games(bot, seeds, players)))
                        kaggle.append([kaggle_game(env, kaggle_url) for _ in seeds])
            finally:
                runner.run(session.close())
    finally:
        if env.pool is not None:
            env.pool.terminate()
            env.pool.join()
    ratios = [_per_decision_ms(k) / _per_decision_ms(a) for k, a in zip(kaggle, referee)]
    return {
        "benchmark": "the referee against kaggle-environments' URL agents, instant bots on loopback",
        "rounds": rounds,
        "games": games,
        "players": players,
        "kaggle": _side([g for block in kaggle for g in block]),
        "referee": _side([g for block in referee for g in block]),
        "ratio_median": round(statistics.median(ratios), 2),
        "ratio_min": round(min(ratios), 2),
        "ratio_max": round(max(ratios), 2),
        "rounds_ratio": [round(x, 2) for x in ratios],
    }


async def _session() -> aiohttp.ClientSession:
    return make_session()


# --------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds, each side's games once a round")
    parser.add_argument("--games", type=int, default=4, help="games of each side a round")
    parser.add_argument("--players", type=int, default=2, help="the referee's seats (ConnectX has 2)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 1 game: a check, not a figure")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    parser.add_argument("--serve-agent", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_agent is not None:
        serve_agent(args.serve_agent)
        return 0
    if importlib.util.find_spec("kaggle_environments") is None:
        print(INSTALL, file=sys.stderr)
        return 2
    if args.quick:
        args.rounds, args.games = 3, 1
    if args.rounds < 1 or args.games < 1:
        parser.error("--rounds and --games must be at least 1")
    agent_port, bot_port = free_port(), free_port()
    servers = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve-agent", str(agent_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [sys.executable, overhead.__file__, "--serve", str(bot_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        for port, server in zip((agent_port, bot_port), servers):
            _listening(port, server)
        figures = bench(
            f"http://127.0.0.1:{agent_port}/",
            f"http://127.0.0.1:{bot_port}",
            args.rounds,
            args.games,
            args.players,
        )
    finally:
        for server in servers:
            server.terminate()
            server.wait(5)
    figures["engine"] = engine_status()
    print(figures["engine"])
    print(
        f"{figures['rounds']} rounds of {figures['games']} games a side; instant bots on loopback; "
        "ms per decision (a game's time over its decisions)"
    )
    print(f"{'':<54} {'decisions':>9} {'median':>7} {'mean':>7} {'round trip':>10}")
    for key, title in (
        ("kaggle", "baseline: kaggle-environments, ConnectX, 2 URL agents"),
        ("referee", f"the referee, 3UP 3DOWN, {figures['players']} HttpBots"),
    ):
        side = figures[key]
        print(
            f"{title:<54} {side['decisions']:>9} {side['decision_ms_median']:>7.3f} "
            f"{side['decision_ms_mean']:>7.3f} {side['round_trip_ms_median']:>10.3f}"
        )
    print(
        f"kaggle / referee, a decision: {figures['ratio_median']:.2f}x (median over rounds; "
        f"{figures['ratio_min']:.2f}-{figures['ratio_max']:.2f})"
    )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
