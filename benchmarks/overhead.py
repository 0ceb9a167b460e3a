"""The referee's cost per move over HTTP, against a bare aiohttp round trip.

A bot that answers instantly (``index 0``) runs in a process of its own. Each
pair plays the same game twice over the same client session (so the same
kept-alive connections):

* **A, the referee**: :func:`referee.match.play_match` — deal, view, legal
  actions, encode, sign-free POST through :class:`referee.bots.HttpBot`
  (deadline, capped read, strict decode), check and apply, replay record.
* **B, bare aiohttp**: the very same request bodies, captured from a referee
  run of that game, POSTed with ``session.post(...)`` and ``await
  resp.read()``, with the same concurrency (the set-up requests, ``/start``
  and ``/end`` go out together, as the referee sends them).

A pair is one game (about 140 requests with 3 players); the games' seeds
cycle over ``--games`` deals for ``--pairs`` pairs, A first in even pairs and
B first in odd ones. This machine's speed drifts by ±15% over tenths of a
second (it shares its CPUs), so the pairs are kept short: A and B of one
pair run within ~0.1 s of each other, and the drift falls out of their
ratio. The figure is the median over pairs of A's time per request over
B's. Target: ≤ 1.10. ``median_ratio`` is the full loop's; ``sum_ratio`` is
all A time over all B time. Beside it, ``serial_us_median``: the referee's
own serial time per move in the real loop, caches cold, which an in-process
timing of the same code does not show. That is A's game time less its round
trips (each ``/act`` batch's longest latency as the transport timed it, the
``/start`` and ``/end`` batches as B timed them), over its moves.

The same pairs also time the transport alone (``transport``): the game's
``/act`` requests sent through ``HttpBot.act`` (encoding the Struct, the
deadline, the capped read, the strict decode) against the bare POST of their
bytes, one at a time on one kept-alive connection.

    python benchmarks/overhead.py [--pairs 41] [--players 3] [--games 8] [--json]

``--json`` prints the figures as one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from yarl import URL

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol import ActRequest, Rules, Timeouts, decode_act_request  # noqa: E402
from referee import engine_status  # noqa: E402
from referee.bots import HttpBot, free_port, make_session  # noqa: E402
from referee.match import Match, play_match  # noqa: E402
from referee.record import RequestLine  # noqa: E402

TARGET = 1.10
JSON = {"Content-Type": "application/json"}


# --------------------------------------------------------------- the bot


class _Id(msgspec.Struct):
    request_id: str


def serve(port: int) -> None:
    """The instant bot: ``index 0`` for every /act (runs in its own process)."""
    from aiohttp import web

    decoder = msgspec.json.Decoder(_Id)
    encoder = msgspec.json.Encoder()
    info = b'{"apiversion": "1", "name": "instant", "author": "bench", "version": "1"}'

    async def root(request: web.Request) -> web.Response:
        return web.Response(body=info, content_type="application/json")

    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"{}", content_type="application/json")

    async def act(request: web.Request) -> web.Response:
        rid = decoder.decode(await request.read()).request_id
        return web.Response(
            body=encoder.encode({"request_id": rid, "index": 0}), content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/", root)
    app.router.add_post("/start", ok)
    app.router.add_post("/end", ok)
    app.router.add_post("/act", act)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# ------------------------------------------------------------ A and B


class _Recorder(HttpBot):
    """An HttpBot that keeps every request it sends (used once, to capture B's payloads)."""

    log: list[tuple[str, URL, bytes | None]]

    async def _exchange(self, method: str, url: URL, body: bytes | None, cap: int) -> tuple[int, str, bytes]:
        self.log.append((method, url, body))
        return await super()._exchange(method, url, body, cap)


Group = list[tuple[URL, bytes]]


def _groups(log: list[tuple[str, URL, bytes | None]], players: int) -> list[Group]:
    """The requests of one game as the referee sends them: /start together, the
    set-up /act requests together, then one at a time, /end together."""
    posts = [(url, body or b"") for method, url, body in log if method == "POST"]
    groups: list[Group] = []
    starts = [p for p in posts if p[0].path.endswith("/start")]
    ends = [p for p in posts if p[0].path.endswith("/end")]
    acts = [p for p in posts if p[0].path.endswith("/act")]
    groups.append(starts)
    groups.append(acts[:players])
    groups.extend([a] for a in acts[players:])
    groups.append(ends)
    return groups


async def capture(
    url: str,
    session: aiohttp.ClientSession,
    seed: int,
    players: int,
    rules: Rules,
    timeouts: Timeouts,
) -> list[Group]:
    """The requests of one game, as the referee sends them."""
    recorder = _Recorder(url, session=session)
    recorder.log = []
    await play_match([recorder] * players, seed, rules=rules, timeouts=timeouts)
    return _groups(recorder.log, players)


async def run_a(
    bot: HttpBot,
    seed: int,
    players: int,
    rules: Rules,
    timeouts: Timeouts,
) -> tuple[float, float, int]:
    """The game's time (:func:`play_match` is this :class:`Match` played), the
    wall time of its ``/act`` round trips (a batch's requests go out together:
    its longest), and its moves (batches)."""
    match = Match([bot] * players, seed, rules=rules, timeouts=timeouts)
    begun = time.perf_counter()
    await match.play()
    elapsed = time.perf_counter() - begun
    longest: dict[int, float] = {}
    for line in match.record.lines:
        if isinstance(line, RequestLine):
            longest[line.batch] = max(longest.get(line.batch, 0.0), line.latency_ms)
    return elapsed, sum(longest.values()) / 1000, len(longest)


async def _post(session: aiohttp.ClientSession, url: URL, body: bytes) -> bytes:
    async with session.post(url, data=body, headers=JSON) as response:
        return await response.read()


async def run_b(session: aiohttp.ClientSession, groups: list[Group]) -> tuple[float, float]:
    """The game's requests replayed: the time, and the part of it the first and
    last groups (``/start`` and ``/end``) took."""
    begun = time.perf_counter()
    ends = 0.0
    for i, group in enumerate(groups):
        if len(group) == 1:
            await _post(session, *group[0])
        else:
            started = time.perf_counter()
            await asyncio.gather(*(_post(session, url, body) for url, body in group))
            if i == 0 or i == len(groups) - 1:
                ends += time.perf_counter() - started
    return time.perf_counter() - begun, ends


async def run_transport(bot: HttpBot, acts: list[ActRequest]) -> float:
    """The transport alone: HttpBot.act on each request.

    That is: encode the Struct, the deadline, the capped read, the strict decode.
    """
    begun = time.perf_counter()
    for request in acts:
        await bot.act(request, 5.0)
    return time.perf_counter() - begun


async def run_bare(session: aiohttp.ClientSession, url: URL, bodies: list[bytes]) -> float:
    begun = time.perf_counter()
    for body in bodies:
        await _post(session, url, body)
    return time.perf_counter() - begun


def _pairs(results: list[tuple[float, float, int]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per pair (A seconds, B seconds, requests): the rows and the summary."""
    rows: list[dict[str, Any]] = []
    for i, (a, b, requests) in enumerate(results):
        a_us = a / requests * 1e6
        b_us = b / requests * 1e6
        rows.append(
            {
                "pair": i + 1,
                "first": "A" if i % 2 == 0 else "B",
                "requests": requests,
                "referee_us": round(a_us, 1),
                "bare_us": round(b_us, 1),
                "ratio": round(a_us / b_us, 4),
            }
        )
    ratios = [r["ratio"] for r in rows]
    a_med = statistics.median(r["referee_us"] for r in rows)
    b_med = statistics.median(r["bare_us"] for r in rows)
    median = statistics.median(ratios)
    quartiles = statistics.quantiles(ratios, n=4)
    summary = {
        "requests": sum(r[2] for r in results),
        "median_ratio": round(median, 4),
        "q1_ratio": round(quartiles[0], 4),
        "q3_ratio": round(quartiles[2], 4),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "sum_ratio": round(sum(r[0] for r in results) / sum(r[1] for r in results), 4),
        "referee_us_median": round(a_med, 1),
        "bare_us_median": round(b_med, 1),
        "overhead_us_median": round(a_med - b_med, 1),
        "meets_target": median <= TARGET,
    }
    return rows, summary


# --------------------------------------------------------------- driver


async def bench(url: str, pairs: int, players: int, games: int) -> dict[str, Any]:
    rules = Rules()
    timeouts = Timeouts(move_ms=5000)
    seeds = list(range(1, games + 1))
    session = make_session()
    try:
        captured = {seed: await capture(url, session, seed, players, rules, timeouts) for seed in seeds}
        act_url = URL(url + "/act")
        bodies = {
            seed: [body for group in groups for u, body in group if u.path == "/act"]
            for seed, groups in captured.items()
        }
        acts = {seed: [decode_act_request(b) for b in bs] for seed, bs in bodies.items()}
        bot = HttpBot(url, session=session)
        # warm-up: every game once each way
        for seed in seeds:
            await run_a(bot, seed, players, rules, timeouts)
            await run_b(session, captured[seed])
            await run_transport(bot, acts[seed])
            await run_bare(session, act_url, bodies[seed])
        full: list[tuple[float, float, int]] = []
        transport: list[tuple[float, float, int]] = []
        outside: list[float] = []
        for i in range(pairs):
            seed = seeds[i % len(seeds)]
            groups = captured[seed]
            if i % 2 == 0:
                a, acts_s, moves = await run_a(bot, seed, players, rules, timeouts)
                b, ends_s = await run_b(session, groups)
                ta = await run_transport(bot, acts[seed])
                tb = await run_bare(session, act_url, bodies[seed])
            else:
                b, ends_s = await run_b(session, groups)
                a, acts_s, moves = await run_a(bot, seed, players, rules, timeouts)
                tb = await run_bare(session, act_url, bodies[seed])
                ta = await run_transport(bot, acts[seed])
            full.append((a, b, sum(len(g) for g in groups)))
            # the referee's own serial time per move: A's game less its round
            # trips (the /act batches as timed in A, /start and /end as in B)
            outside.append((a - acts_s - ends_s) / moves * 1e6)
            transport.append((ta, tb, len(bodies[seed])))
    finally:
        await session.close()
    full_rows, full_summary = _pairs(full)
    full_summary["serial_us_median"] = round(statistics.median(outside), 1)
    transport_rows, transport_summary = _pairs(transport)
    return {
        "benchmark": "referee cost per move over HTTP vs a bare aiohttp round trip",
        "players": players,
        "games": games,
        "pairs": pairs,
        "target": TARGET,
        "median_ratio": full_summary["median_ratio"],
        "meets_target": full_summary["meets_target"],
        "full_loop": {**full_summary, "pairs": full_rows},
        "transport": {**transport_summary, "pairs": transport_rows},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=41, help="A/B pairs, a game each (at least 9)")
    parser.add_argument("--players", type=int, default=3)
    parser.add_argument("--games", type=int, default=8, help="distinct deals the pairs cycle over")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.pairs < 9:
        parser.error("--pairs must be at least 9")
    port = free_port()
    bot = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        asyncio.run(_wait(url))
        figures = asyncio.run(bench(url, args.pairs, args.players, args.games))
    finally:
        bot.terminate()
        bot.wait(5)
    figures["engine"] = engine_status()
    print(figures["engine"])
    figures["cpus"] = os.cpu_count()
    figures["loadavg_1min"] = round(os.getloadavg()[0], 2)  # other work on the machine skews both
    print(
        f"{figures['players']} players; {figures['pairs']} pairs, one game each, over "
        f"{figures['games']} deals; A = referee, B = bare aiohttp, same payloads, same "
        "session; us per request"
    )
    for key, title in (
        (
            "full_loop",
            "full loop: play_match (engine view, legal, encode, HTTP, check, apply, record)",
        ),
        ("transport", "transport only: HttpBot.act (encode, deadline, capped read, strict decode)"),
    ):
        part = figures[key]
        print(f"\n{title}, {part['requests']} requests each way")
        print(f"{'pair':>4}  {'first':>5}  {'requests':>8}  {'referee':>8}  {'bare':>8}  {'ratio':>6}")
        for row in part["pairs"]:
            print(
                f"{row['pair']:>4}  {row['first']:>5}  {row['requests']:>8}  "
                f"{row['referee_us']:>8.1f}  {row['bare_us']:>8.1f}  {row['ratio']:>6.3f}"
            )
        print(
            f"median ratio {part['median_ratio']:.3f} [quartiles {part['q1_ratio']:.3f}, "
            f"{part['q3_ratio']:.3f}] (target <= {TARGET:.2f}: "
            f"{'met' if part['meets_target'] else 'NOT met'}); all A / all B "
            f"{part['sum_ratio']:.3f}; referee {part['referee_us_median']:.1f} us vs bare "
            f"{part['bare_us_median']:.1f} us, overhead {part['overhead_us_median']:.1f} us"
        )
        if key == "full_loop":
            print(
                "the referee's own serial time per move (the game's time less its round trips): "
                f"{part['serial_us_median']:.1f} us (median over pairs)"
            )
    if args.json:
        print(json.dumps(figures))
    return 0


async def _wait(url: str) -> None:
    bot = HttpBot(url)
    try:
        for _ in range(200):
            try:
                await bot.handshake(1.0)
                return
            except Exception:
                await asyncio.sleep(0.05)
        raise RuntimeError(f"the benchmark bot at {url} did not start")
    finally:
        await bot.close()


if __name__ == "__main__":
    sys.exit(main())
