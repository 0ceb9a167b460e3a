"""The classroom service's ladder at scale (issue 15): 100 teams, 10,000 games.

Everything goes through the real service, on loopback:

* **Bots**: 4 sample-bot processes (greedy, random, tactician, greedy), each
  serving 25 of the 100 teams (team i's URL is process i mod 4's): one bot
  service plays many games at once, as a team's server would.
* **The service** (``make_app``, what ``referee serve`` runs) in a
  **subprocess** of its own, so that its CPU time is read honestly from
  ``/proc/<pid>/stat`` (every thread: the web loop, the ladder's thread, the
  database and ``to_thread`` workers), the bots' and this client's left out;
  ``/proc/<pid>/task/*`` splits it by thread (a route the benchmark adds,
  ``/_bench/threads``, names them). Its settings differ from the defaults in
  four places: ``bot_policy`` allows 127.0.0.0/8 (as ``referee serve
  --bot-networks 127.0.0.0/8``), ``validation_games`` =
  ``--validation-games`` (1) and ``admission_workers`` = 8 (admitting 100
  teams is not what is measured), and ``max_streams_per_client`` = viewers +
  16: every viewer comes from 127.0.0.1, and the default cap of 4 event
  streams per address would refuse all but 4 (429). The teams are made,
  submitted (a URL each) and admitted through the HTTP API, then the admin
  opens the competition (``POST /api/competitions/{cid}/open``,
  ``{"concurrency": N}``), the ladder plays, and it is frozen (``POST
  .../freeze``) once about ``--games`` games are recorded.
* **Windows**, by games recorded (read from the ladder's
  ``tournament.sqlite``): after 2% of ``--games`` (warm-up), *quiet* and
  *viewers* in turn, 14% and 7% of the games, four viewer windows between
  five quiet ones (a viewer window ends after ``--viewer-seconds``, 300, if
  its games are not played by then). The quiet windows are also cut every 5%
  of the games (*trend*): what the service costs as its games pile up.
  *Viewers*: ``--viewers`` (500) browser-like clients in another process,
  arriving over ``--ramp`` (5) seconds, doing what the page's script does:
  each loads ``/c/{cid}``, opens the event stream the page names
  (``/api/competitions/{cid}/events?view=live``, whose ``live`` events carry
  the page's live part) and shows each update; on a data-only stream it
  would fetch the ``data-fragment`` the page names, one fetch at a time. A
  viewer window starts once every stream has had its first update; the
  games played while viewers come and go are in no window. The viewers'
  process reports its own CPU (a browser's, elsewhere, in real life; here
  it shares the machine's two cores with the games).
* **Sampled latency.** All the time, a client in this process GETs
  ``/c/{cid}``, a bare aiohttp handler (a process of its own answering a body
  of the page's size) and ``/api/competitions/{cid}``, in turn,
  ``--sample-hz`` (0.5) times a second each, each request on its own
  schedule (a slow answer does not delay the next one): p50/p95 per window,
  and for 20 s after the freeze with nothing playing (*idle*). The page and
  the API are 2/3 of a period apart, more than the service's shared board
  cache keeps a board (``board_ttl_s``, 0.5 s): each finds the board to be
  computed again when games came since, as a visitor arriving then would.
* **Baseline, same run**: ``referee tournament``'s runner
  (:class:`referee.tournament.runner.Tournament`, in this process) on the same
  bot processes, the same 100 URL entries (pinned to 127.0.0.1, as the
  service pins them), table size, concurrency, timeouts and replays, a
  balanced schedule; half of ``--baseline-games`` before the ladder, half
  after, so that the machine's drift falls on both.

Figures: games/s of the ladder (its quiet windows) against the runner's; the
service's CPU per move (process CPU / moves, moves = ``SUM(games.turns)`` of
the games recorded in the window) against the runner's process CPU per
move, split into the web loop (main thread), the ladder's thread and the
other threads (the board computations run in ``to_thread`` workers), with
the bots' CPU per move beside it; each viewer window's games/s against the
mean of the quiet windows on either side of it, and the median of those
ratios (the claim "500 viewers do not slow the games" holds at >= 0.90); page and API latency against the bare handler's in
the same window (``xbare``: page p50 / bare p50).

    python benchmarks/ladder.py [--teams 100] [--games 10000] [--concurrency 16] [--table-size 4]
                                [--viewers 500] [--baseline-games 1000] [--sample-hz 0.5]
                                [--quick] [--profile-service FILE] [--json]

``--quick``: 20 teams, 1,000 games, 100 viewers, 200 baseline games (a smoke
run, ~8 minutes). ``--profile-service FILE`` runs the service's web loop
under cProfile (stats to FILE). ``--json`` prints the figures as one JSON
object on the last line.

Measured on a quiet 2-core machine (load average 1.6 at the start, 3-4
with the run's own processes; pure-Python engine, ``REFEREE_PURE=1``;
2026-12-01, at 04f8dbc). Full run (100 teams, 10,250 games, 500 viewers):
100 teams admitted in 38 s; the runner 9.17 games/s (halves 8.87 and
9.48), 387 us CPU per move. The ladder's quiet windows 8.03 games/s (0.88x
the runner's; the ladder seats near-rated entries together, so tables of
four tacticians all load the one tactician process), the service 389 us
CPU per move = 1.01x the runner's (ladder thread ~355, web loop ~8, other
threads ~23). With 500 viewers: 0.925x the quiet windows on either side
(median; each 0.907, 0.942, 0.900, 0.977), so the claim holds; the service
412 us CPU per move (+6%: its web loop 20-24 us per move, 7-9 without),
500 of 500 streams, none refused, ~5,000 updates of the 78.5 KB live part
per window (the byte budget); page p50/p95 51-61/129-144 ms quiet, 31-46/
83-120 ms with viewers (bare handler 1.3-1.6/3.5-4.4 ms), flat from 500 to
10,000 games; frozen in 2.8 s; 0 faults; the service's RSS 174 MB.

The same run at fb67229, just before a changed board was published at most
once per ``min_update_s``: 0.821x with viewers (0.981, 0.833, 0.809,
0.778), the service 501 us CPU per move with viewers against ~390 quiet
(web loop +35, ladder thread +50, board threads +15): the poller had
computed and rendered a board at every poll (4 a second) for streams that
could use one a second. The run below, on a machine loaded by other work,
had read 0.976x: within that run's noise, not a measurement of the claim.

Earlier, on this machine shared with other work (load average
5-8 during the run; pure-Python engine, ``REFEREE_PURE=1``; 2026-12-01, at
b48c2c1). The machine's speed drifted by 2x over the run (3.0 to 6.4 games/s
in the quiet stretches), so read the ratios of neighbouring windows.

Full run (100 teams, 10,105 games, 500 viewers): 100 teams admitted in
60 s; the runner 6.49 games/s (halves 6.46 and 6.52), 536 us CPU per move.
The ladder's quiet windows 3.99 games/s (0.62x the runner's: the two
halves of the runner ran while the machine was quieter, and the ladder
seats near-rated entries together, so tables of four tacticians all load
the one tactician process, where the runner's balanced schedule mixes the
kinds), the service 609 us CPU per move = 1.14x the runner's (its ladder
thread ~540, web loop ~20, other threads ~32). What a board costs no longer
grows with the games: by 5% of the games the page p50 stays at 64-101 ms
(75-97 with a 100-team table to render, bare handler 1-3 ms) and the
other threads at 29-37 us per move from 500 games to 10,000 (the run
before these changes: page 0.4-1.2 s and other threads 350 us per move
from 8,000 games on). With 500 viewers (four windows of 700 games, between
five quiet ones): 0.976x the quiet windows on either side (median; each
1.05, 0.62, 1.20, 0.90; the 0.62 window followed a quiet stretch that had
already fallen to 2.2 games/s, the machine's drift), so the claim holds;
the service 699 us CPU per move (+15%: its web loop 65-86 us per move, 19-32
without), the viewers' own process 0.04 core; 500 of 500 streams open,
none refused, each update (the page's live part, 78.5 KB) ~0.1 per stream
per second, as ``live_bytes_per_s`` (4 MiB/s) allows 500 streams; the page
p50 34-92 ms with viewers (the poller keeps the board fresh); the web loop
quiet 2 s after they left; frozen in 3.0 s; 0 faults; the service's RSS 177 MB at the end.

The run before the last two changes (the live part in the stream, once
per board, but no byte budget): the first 500-viewer window ran at 0.51x
the quiet one before it, the 500 streams got 0.77 updates a second each
(115,136 in 300 s, 31 MB/s of 80 KB updates), the service spent 924 us CPU
per move and the viewers' process 0.31 core. And before the live part was
rendered once per board (the earliest full run): 0.43x and 0.76x, page
p50 30 s with viewers, and the admin's freeze could not connect.

``--quick`` (20 teams, 1,000 games, 100 viewers) at 30e6535, with other
work on the machine: ladder 4.66 and 3.80 games/s in its quiet windows,
viewers 3.55 and 4.27 (its 20-team live part stays within the byte budget,
so the viewers get one update a second); too short to read a ratio from.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import html
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol import Timeouts  # noqa: E402
from referee import engine_status  # noqa: E402
from referee.bots import free_port  # noqa: E402
from referee.bots.factory import BotSpec  # noqa: E402
from referee.tournament.league import League, TournamentTable  # noqa: E402
from referee.tournament.runner import Tournament  # noqa: E402

#: The bot processes; team i plays on process i mod 4.
BOT_KINDS = ("greedy", "random", "tactician", "greedy")
MOVE_MS = 2000
#: The windows and their games, as shares of --games (after 2% to warm up; the games played
#: while viewers come and go are in no window): quiet and viewers in turn, so that each viewer
#: window has a quiet one on either side (the machine's drift falls out of their ratio).
PLAN = (("quiet", 0.14), ("viewers", 0.07)) * 4 + (("quiet", 0.14),)
#: Viewer windows at least this fraction of the quiet ones' games/s: the claim holds.
TARGET = 0.90
TICK = os.sysconf("SC_CLK_TCK")
#: ``--profile-service FILE``: the service's web loop runs under cProfile, its stats written there.
PROFILE_ENV = "LADDER_BENCH_PROFILE"

LEAGUE = """\
[tournament]
name = "ladder bench"
seed = 5
table_size = {table_size}
concurrency = {concurrency}

[timeouts]
move_ms = {move_ms}

[ladder]
concurrency = {concurrency}
"""


# ------------------------------------------------------------ CPU, /proc


def cpu_s(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (all its threads, the ended ones
    too) or of one of its threads, from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    """A process's resident memory now, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def thread_cpu(pid: int, names: dict[int, str]) -> dict[str, float]:
    """CPU seconds of the service's threads by group: the web loop (the main
    thread), the ladder's thread, the others (database, to_thread workers)."""
    out = {"web": 0.0, "ladder": 0.0}
    for entry in os.listdir(f"/proc/{pid}/task"):
        tid = int(entry)
        name = names.get(tid, "")
        with contextlib.suppress(OSError):
            if name == "MainThread":
                out["web"] += cpu_s(pid, tid)
            elif name.startswith("ladder-"):
                out["ladder"] += cpu_s(pid, tid)
    return out


# -------------------------------------------------- the processes it starts


def serve_service(port: int, db_path: str, settings_json: str) -> None:
    """The service, as ``referee serve --bot-networks 127.0.0.0/8`` makes it,
    with the benchmark's settings (run in its own process)."""
    from aiohttp import web

    from referee.bots.netpolicy import AddressPolicy, parse_networks
    from referee.web import Settings, make_app

    policy = AddressPolicy.for_service(parse_networks("127.0.0.0/8"), listen=[("127.0.0.1", port)])
    app = make_app(db_path, Settings(bot_policy=policy, **json.loads(settings_json)))

    async def threads(request: web.Request) -> web.Response:
        # the benchmark's own route: which OS thread is which (for the CPU split)
        return web.json_response({str(t.native_id): t.name for t in threading.enumerate()})

    app.router.add_get("/_bench/threads", threads)
    profile = os.environ.get(PROFILE_ENV)
    if not profile:
        web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
        return
    import cProfile

    prof = cProfile.Profile()  # the web loop's thread only
    prof.enable()
    try:
        web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
    finally:
        prof.disable()
        prof.dump_stats(profile)


def serve_bare(port: int, size: int) -> None:
    """The bare aiohttp handler: a fixed HTML body of the page's size (own process)."""
    from aiohttp import web

    body = b"<!doctype html>" + b"x" * max(0, size - 15)

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


class ViewerStats:
    def __init__(self) -> None:
        self.streams = 0
        self.refused: collections.Counter[int] = collections.Counter()
        self.errors = 0
        self.updates = 0
        #: Updates that carried the live part (``?view=live``): nothing to fetch.
        self.in_stream = 0
        self.in_stream_chars = 0
        self.fetches: list[float] = []
        self.fetch_errors = 0
        self.pages: list[float] = []
        #: Pages that failed, by status (0: a page naming no event stream).
        self.page_errors: collections.Counter[int] = collections.Counter()


async def viewers_main(base: str, cid: int, n: int, ramp: float) -> None:
    """``n`` browser-like viewers of competition ``cid`` (own process), doing
    what the page's script does: load the page, open the event stream its
    ``data-events`` names, and on each update show the live part (the
    ``live`` event carries it; on an ``update`` event, the data only, fetch
    ``data-fragment``, one fetch at a time). Prints ``ready`` once every
    stream had its first update, and its figures as JSON (with this
    process's own CPU time, which the machine's cores also pay) when its
    standard input closes."""
    stats = ViewerStats()
    first = asyncio.Event()
    settled = [0]  # viewers whose stream had its first update, or that ended without one

    def settle() -> None:
        settled[0] += 1
        if settled[0] >= n:
            first.set()

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None)
    )

    async def fetch_live(path: str) -> None:
        t0 = time.perf_counter()
        try:
            async with session.get(f"{base}{path}") as r:
                await r.read()
                if r.status != 200:
                    stats.fetch_errors += 1
                    return
        except aiohttp.ClientError:
            stats.fetch_errors += 1
            return
        stats.fetches.append(time.perf_counter() - t0)

    def attribute(page: str, name: str) -> str | None:
        m = re.search(rf'{name}="([^"]*)"', page)
        return html.unescape(m.group(1)) if m else None

    async def viewer(i: int) -> None:
        await asyncio.sleep(ramp * i / n)
        counted = False
        try:
            t0 = time.perf_counter()
            async with session.get(f"{base}/c/{cid}") as r:
                page = await r.text()
                if r.status != 200:
                    stats.page_errors[r.status] += 1
                    return
            stats.pages.append(time.perf_counter() - t0)
            events_path = attribute(page, "data-events")
            fragment_path = attribute(page, "data-fragment")
            if events_path is None:
                stats.page_errors[0] += 1  # a page that names no event stream
                return
            async with session.get(f"{base}{events_path}") as r:
                if r.status != 200:
                    stats.refused[r.status] += 1
                    return
                stats.streams += 1
                busy = False
                again = False

                async def refresh() -> None:
                    nonlocal busy, again
                    busy = True
                    try:
                        while True:
                            again = False
                            assert fragment_path is not None
                            await fetch_live(fragment_path)
                            if not again:
                                break
                    finally:
                        busy = False

                tasks: set[asyncio.Task[None]] = set()
                buffer = b""
                async for chunk in r.content.iter_any():
                    buffer += chunk
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        if event.startswith(b"event: live"):
                            # what the page does with it: its data lines joined, set as the live part
                            part = "\n".join(x[6:] for x in event.decode().split("\n")[1:])
                            stats.in_stream += 1
                            stats.in_stream_chars += len(part)
                        elif not event.startswith(b"event: update"):
                            continue
                        stats.updates += 1
                        if not counted:
                            counted = True
                            settle()
                        if event.startswith(b"event: live"):
                            continue
                        if busy:
                            again = True
                        else:
                            task = asyncio.create_task(refresh())
                            tasks.add(task)
                            task.add_done_callback(tasks.discard)
        except (TimeoutError, aiohttp.ClientError):
            stats.errors += 1
        finally:
            if not counted:
                settle()

    tasks = [asyncio.create_task(viewer(i)) for i in range(n)]
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    await asyncio.wait(
        [asyncio.ensure_future(first.wait()), stdin_closed], return_when=asyncio.FIRST_COMPLETED
    )
    print("ready", flush=True)
    cpu0, t_ready = time.process_time(), time.perf_counter()
    await stdin_closed
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - t_ready
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await session.close()
    print(
        json.dumps(
            {
                "viewers": n,
                "streams": stats.streams,
                "refused": dict(stats.refused),
                "errors": stats.errors,
                "page_errors": dict(stats.page_errors),
                "updates": stats.updates,
                "updates_in_stream": stats.in_stream,
                "live_part_kb": round(stats.in_stream_chars / max(1, stats.in_stream) / 1024, 1),
                "live_fetches": len(stats.fetches),
                "live_fetch_errors": stats.fetch_errors,
                "live_p50_ms": _ms(_pct(stats.fetches, 50)),
                "live_p95_ms": _ms(_pct(stats.fetches, 95)),
                "page_p50_ms": _ms(_pct(stats.pages, 50)),
                # the viewers' own CPU while the window was measured (a browser's, elsewhere in real life)
                "client_cpu_share": round(cpu_s / wall_s, 3) if wall_s > 0 else None,
            }
        ),
        flush=True,
    )


# ------------------------------------------------------------- helpers


def _pct(values: Sequence[float], p: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _ratio(a: float | None, b: float | None, digits: int = 3) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, digits)


def start_bots(log_dir: Path) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs: list[subprocess.Popen[bytes]] = []
    urls = []
    for i, kind in enumerate(BOT_KINDS):
        port = free_port()
        log = open(log_dir / f"bot-{i}-{kind}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", f"sample_bots.{kind}", "--port", str(port), "--log-level", "WARNING"],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    return procs, urls


async def wait_http(url: str, what: str, seconds: float = 60) -> None:
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + seconds
        while True:
            try:
                async with session.get(url) as r:
                    await r.read()
                    return
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} at {url} did not start") from None
                await asyncio.sleep(0.1)


def team_name(i: int) -> str:
    return f"team{i:03d}"


def team_urls(urls: list[str], teams: int) -> list[str]:
    return [urls[i % len(urls)] for i in range(teams)]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# ------------------------------------------------------------ the baseline


def baseline(urls: list[str], games: int, table_size: int, concurrency: int, seed: int) -> dict[str, Any]:
    """``referee tournament``'s runner on the same entries: games, seconds
    (first game to last), CPU of this process, moves."""
    bots = [BotSpec(name=f"{team_name(i)} v1", url=u, address="127.0.0.1") for i, u in enumerate(urls)]
    per_round = len(bots) // table_size * table_size
    league = League(
        tournament=TournamentTable(
            name="baseline",
            seed=seed,
            table_size=table_size,
            schedule="balanced",
            rounds=max(1, math.ceil(games / per_round)),
            concurrency=concurrency,
        ),
        timeouts=Timeouts(move_ms=MOVE_MS),
        bots=bots,
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        t = Tournament(league, out, progress=False, replays=True, log=lambda m: None)
        c0 = time.process_time()
        asyncio.run(t.run())
        cpu = time.process_time() - c0
        with sqlite3.connect(out / "tournament.sqlite") as db:
            moves = int(db.execute("SELECT COALESCE(SUM(turns), 0) FROM games").fetchone()[0])
    return {"games": t.played, "seconds": t.play_seconds, "cpu_s": cpu, "moves": moves}


# ------------------------------------------------------------ the ladder


@dataclass
class Mark:
    """The ladder at one moment."""

    t: float
    games: int
    moves: int
    cpu: float
    threads: dict[str, float]
    bots_cpu: float
    loadavg: float


@dataclass
class Window:
    kind: str  # quiet, viewers, idle
    start: Mark
    end: Mark | None = None
    viewers: dict[str, Any] = field(default_factory=dict)


class Sampler:
    """GETs the targets in turn, each ``hz`` times a second, each request on
    its own schedule (open loop): (start time, seconds, status) per target."""

    def __init__(self, targets: dict[str, str], hz: float) -> None:
        self.targets = targets
        self.hz = hz
        self.samples: dict[str, list[tuple[float, float, int]]] = {k: [] for k in targets}
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, stopped: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        step = 1.0 / (self.hz * len(self.targets))
        names = list(self.targets)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            due = loop.time()
            i = 0
            while not stopped.is_set():
                name = names[i % len(names)]
                task = asyncio.create_task(self._one(session, name))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                i += 1
                due += step
                await asyncio.sleep(max(0.0, due - loop.time()))
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _one(self, session: aiohttp.ClientSession, name: str) -> None:
        t0 = time.perf_counter()
        status = 0
        try:
            async with session.get(self.targets[name]) as r:
                await r.read()
                status = r.status
        except aiohttp.ClientError:
            pass
        self.samples[name].append((t0, time.perf_counter() - t0, status))

    def between(self, name: str, a: float, b: float) -> dict[str, Any]:
        rows = [(d, s) for t, d, s in self.samples[name] if a <= t < b]
        ok = [d for d, s in rows if s == 200]
        return {
            "n": len(rows),
            "errors": len(rows) - len(ok),
            "p50_ms": _ms(_pct(ok, 50)),
            "p95_ms": _ms(_pct(ok, 95)),
        }


class Service:
    """The service subprocess and what the benchmark reads of it."""

    def __init__(self, tmp: Path, settings: dict[str, Any]) -> None:
        from referee.service.store import ServiceDB

        self.db_path = tmp / "service.sqlite"
        db = ServiceDB(self.db_path)
        try:
            token = db.ensure_admin_token()
        finally:
            db.close()
        assert token is not None
        self.admin = {"Authorization": f"Bearer {token}"}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp / "service.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-service",
                str(self.port),
                str(self.db_path),
                json.dumps(settings),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        self.threads: dict[int, str] = {}
        self.games_db: sqlite3.Connection | None = None

    def close(self) -> None:
        if self.games_db is not None:
            self.games_db.close()
        stop(self.proc)
        self.log.close()

    async def thread_names(self, session: aiohttp.ClientSession) -> None:
        async with session.get(f"{self.base}/_bench/threads") as r:
            self.threads = {int(k): v for k, v in (await r.json()).items()}

    def ladder_db(self, cid: int) -> Path:
        from referee.service.store import ServiceDB

        db = ServiceDB(self.db_path)
        try:
            run = db.latest_run_of(cid, "ladder")
            assert run is not None
            return Path(run.out_dir) / "tournament.sqlite"
        finally:
            db.close()

    def progress(self, path: Path) -> tuple[int, int]:
        """(games, moves) recorded so far in the ladder's store (read-only)."""
        if self.games_db is None:
            if not path.exists():
                return 0, 0
            self.games_db = sqlite3.connect(
                f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False
            )
        try:
            n, moves = self.games_db.execute("SELECT COUNT(*), COALESCE(SUM(turns), 0) FROM games").fetchone()
        except sqlite3.OperationalError:  # the ladder is making its tables
            return 0, 0
        return int(n), int(moves)


async def ladder(args: argparse.Namespace, urls: list[str], bot_pids: list[int], tmp: Path) -> dict[str, Any]:
    settings = {
        "validation_games": args.validation_games,
        "admission_workers": 8,
        "max_streams_per_client": args.viewers + 16,
    }
    service = Service(tmp, settings)
    viewers_proc: asyncio.subprocess.Process | None = None
    bare: subprocess.Popen[bytes] | None = None
    stopped = asyncio.Event()
    sampler_task: asyncio.Task[None] | None = None
    try:
        await wait_http(service.base + "/", "the service")
        # no time limit: a swamped service takes minutes to accept the admin's freeze (see the docstring)
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        try:
            # the competition, its teams and their URL bots, through the API
            league = LEAGUE.format(table_size=args.table_size, concurrency=args.concurrency, move_ms=MOVE_MS)
            async with session.post(
                f"{service.base}/api/competitions",
                headers=service.admin,
                json={"name": "ladder bench", "league": league},
            ) as r:
                assert r.status == 201, await r.text()
                cid = int((await r.json())["id"])
            t_admit = time.perf_counter()
            subs: list[tuple[int, str, int]] = []
            for i, url in enumerate(team_urls(urls, args.teams)):
                async with session.post(
                    f"{service.base}/api/competitions/{cid}/teams",
                    headers=service.admin,
                    json={"name": team_name(i)},
                ) as r:
                    assert r.status == 201, await r.text()
                    body = await r.json()
                tid, token = int(body["id"]), str(body["token"])
                async with session.put(
                    f"{service.base}/api/competitions/{cid}/teams/{tid}/bot",
                    headers={"Authorization": f"Bearer {token}"},
                    json={"url": url},
                ) as r:
                    assert r.status == 201, await r.text()
                    subs.append((tid, token, int((await r.json())["id"])))
            for tid, token, sid in subs:
                while True:
                    async with session.get(
                        f"{service.base}/api/competitions/{cid}/teams/{tid}/submissions/{sid}",
                        headers={"Authorization": f"Bearer {token}"},
                    ) as r:
                        status = (await r.json())["submission"]["status"]
                    if status == "accepted":
                        break
                    if status == "refused":
                        raise RuntimeError(f"submission {sid} of team {tid} was refused")
                    await asyncio.sleep(0.2)
            admit_s = time.perf_counter() - t_admit
            print(
                f"{args.teams} teams admitted through the API in {admit_s:.1f} s "
                f"({settings['admission_workers']} workers, {args.validation_games} validation game(s) each)",
                flush=True,
            )

            def mark() -> Mark:
                games, moves = service.progress(path)
                return Mark(
                    t=time.perf_counter(),
                    games=games,
                    moves=moves,
                    cpu=cpu_s(service.proc.pid),
                    threads=thread_cpu(service.proc.pid, service.threads),
                    bots_cpu=sum(cpu_s(p) for p in bot_pids),
                    loadavg=os.getloadavg()[0],
                )

            async def until(games: int, deadline: float = math.inf) -> Mark:
                """The mark once `games` are recorded (or at `deadline`, perf_counter time)."""
                while True:
                    m = await asyncio.to_thread(mark)
                    if m.games >= games or m.t >= deadline:
                        return m
                    await asyncio.sleep(0.1)

            async def drain(limit: float = 300.0) -> float:
                """Seconds until the web loop's thread uses under 0.1 core for 2 s running."""
                t0 = time.perf_counter()
                calm = 0
                last = await asyncio.to_thread(mark)
                while calm < 2 and time.perf_counter() - t0 < limit:
                    await asyncio.sleep(1.0)
                    now = await asyncio.to_thread(mark)
                    busy = (now.threads["web"] - last.threads["web"]) / (now.t - last.t)
                    calm = calm + 1 if busy < 0.1 else 0
                    last = now
                return time.perf_counter() - t0

            # open: the ladder plays from now on
            t_open = time.perf_counter()
            async with session.post(
                f"{service.base}/api/competitions/{cid}/open",
                headers=service.admin,
                json={"concurrency": args.concurrency},
            ) as r:
                assert r.status == 202, await r.text()
            path = service.ladder_db(cid)
            first = await until(1)
            await service.thread_names(session)  # the ladder's thread is there now
            print(f"ladder open: first game recorded {first.t - t_open:.1f} s after the open", flush=True)
            warm = max(args.concurrency, args.games // 50)
            await until(warm)
            async with session.get(f"{service.base}/c/{cid}") as r:
                page_size = len(await r.read())  # every team in the standings by now
            bare_port = free_port()
            bare = subprocess.Popen(
                [sys.executable, __file__, "--serve-bare", str(bare_port), str(page_size)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
            )
            await wait_http(f"http://127.0.0.1:{bare_port}/", "the bare handler")
            # in turn, so that the page and the API are 2/3 of a period apart (more than the
            # service's board_ttl_s, 0.5 s, at --sample-hz 0.5): each finds its board older than that,
            # computed again when games came meanwhile, as a viewer arriving then would
            sampler = Sampler(
                {
                    "page": f"{service.base}/c/{cid}",
                    "bare": f"http://127.0.0.1:{bare_port}/",
                    "api": f"{service.base}/api/competitions/{cid}",
                },
                args.sample_hz,
            )
            sampler_task = asyncio.create_task(sampler.run(stopped))
            windows: list[Window] = []
            trend: list[Window] = []  # the quiet windows cut every 5% of the games
            step = max(1, args.games // 20)
            start = await asyncio.to_thread(mark)
            for kind, share in PLAN:
                target = start.games + max(1, round(args.games * share))
                if kind == "viewers":
                    viewers_proc = await asyncio.create_subprocess_exec(
                        sys.executable,
                        __file__,
                        "--viewers-of",
                        service.base,
                        str(cid),
                        str(args.viewers),
                        str(args.ramp),
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE,
                        cwd=ROOT,
                    )
                    assert viewers_proc.stdout is not None
                    line = await viewers_proc.stdout.readline()
                    assert line.strip() == b"ready", line
                    start = await asyncio.to_thread(mark)
                    target = start.games + max(1, round(args.games * share))
                    w = Window(kind, start)
                    w.end = await until(target, start.t + args.viewer_seconds)
                    assert viewers_proc.stdin is not None and viewers_proc.stdout is not None
                    viewers_proc.stdin.close()
                    w.viewers = json.loads(await viewers_proc.stdout.readline())
                    await viewers_proc.wait()
                    viewers_proc = None
                    # the viewers are gone, but not always the work they asked for: wait until the
                    # web loop is back to what it costs without them
                    w.viewers["drain_s"] = round(await drain(), 1)
                    print(
                        f"  the viewers left; the web loop was quiet again {w.viewers['drain_s']} s later",
                        flush=True,
                    )
                    start = await asyncio.to_thread(mark)
                else:
                    w = Window(kind, start)
                    seg = start
                    while seg.games < target:
                        end = await until(min(target, (seg.games // step + 1) * step))
                        trend.append(Window("trend", seg, end))
                        print(_trend_line(trend[-1], sampler), flush=True)
                        seg = end
                    w.end = start = seg
                windows.append(w)
                print(_window_line(w, sampler), flush=True)
            # freeze: the ladder stops after its games in flight
            t_freeze = time.perf_counter()
            async with session.post(
                f"{service.base}/api/competitions/{cid}/freeze", headers=service.admin
            ) as r:
                assert r.status == 200, await r.text()
            freeze_s = time.perf_counter() - t_freeze
            frozen = await asyncio.to_thread(mark)
            print(f"frozen in {freeze_s:.1f} s (its games in flight, then the ladder's outputs)", flush=True)
            await asyncio.sleep(max(10.0, 10 / args.sample_hz))
            idle = Window("idle", frozen)
            idle.end = await asyncio.to_thread(mark)
            windows.append(idle)
            print(_window_line(idle, sampler), flush=True)
            stopped.set()
            await sampler_task
            sampler_task = None
            async with session.get(f"{service.base}/api/competitions/{cid}") as r:
                board = await r.json()
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                faults = int(db.execute("SELECT COUNT(*) FROM faults").fetchone()[0])
        finally:
            await session.close()
        return {
            "admission_s": round(admit_s, 1),
            "page_bytes": page_size,
            "recorded": frozen.games,
            "ladder_seconds": round(frozen.t - first.t, 1),
            "freeze_s": round(freeze_s, 1),
            "service_rss_mb": round(rss_mb(service.proc.pid), 1),
            "standings": len(board["standings"]),
            "faults": faults,
            "windows": [_window(w, sampler) for w in windows],
            "trend": [_window(w, sampler) for w in trend],
        }
    finally:
        stopped.set()
        if sampler_task is not None:
            sampler_task.cancel()
            with contextlib.suppress(BaseException):
                await sampler_task
        if viewers_proc is not None and viewers_proc.returncode is None:
            viewers_proc.kill()
            await viewers_proc.wait()
        if bare is not None:
            stop(bare)
        service.close()


def _window(w: Window, sampler: Sampler) -> dict[str, Any]:
    assert w.end is not None
    a, b = w.start, w.end
    seconds = b.t - a.t
    games, moves = b.games - a.games, b.moves - a.moves
    cpu = b.cpu - a.cpu
    row: dict[str, Any] = {
        "kind": w.kind,
        "games": games,
        "seconds": round(seconds, 1),
        "games_per_s": round(games / seconds, 2) if seconds > 0 else None,
        "at_games": b.games,
        "moves": moves,
        "service_cpu_s": round(cpu, 2),
        "service_cores": round(cpu / seconds, 2) if seconds > 0 else None,
        "service_us_per_move": round(cpu / moves * 1e6, 1) if moves else None,
        "web_us_per_move": round((b.threads["web"] - a.threads["web"]) / moves * 1e6, 1) if moves else None,
        "ladder_us_per_move": (
            round((b.threads["ladder"] - a.threads["ladder"]) / moves * 1e6, 1) if moves else None
        ),
        "other_us_per_move": (
            round(
                (cpu - (b.threads["web"] - a.threads["web"]) - (b.threads["ladder"] - a.threads["ladder"]))
                / moves
                * 1e6,
                1,
            )
            if moves
            else None
        ),
        "bots_us_per_move": round((b.bots_cpu - a.bots_cpu) / moves * 1e6, 1) if moves else None,
        "web_cores": round((b.threads["web"] - a.threads["web"]) / seconds, 2) if seconds > 0 else None,
        "loadavg_1min": round((a.loadavg + b.loadavg) / 2, 2),
    }
    for name in sampler.targets:
        row[name] = sampler.between(name, a.t, b.t)
    row["page_x_bare"] = _ratio(row["page"]["p50_ms"], row["bare"]["p50_ms"], 2)
    row["api_x_bare"] = _ratio(row["api"]["p50_ms"], row["bare"]["p50_ms"], 2)
    if w.viewers:
        row["viewers"] = w.viewers
    return row


def _window_line(w: Window, sampler: Sampler) -> str:
    r = _window(w, sampler)
    line = (
        f"  {r['kind']:<7} {r['games']:>6} games {r['seconds']:>7.1f} s {r['games_per_s'] or 0:>6.2f} games/s; "
        f"service {r['service_us_per_move'] or 0:.0f} us/move; page p50/p95 {r['page']['p50_ms']}/"
        f"{r['page']['p95_ms']} ms, api {r['api']['p50_ms']}/{r['api']['p95_ms']} ms, bare "
        f"{r['bare']['p50_ms']}/{r['bare']['p95_ms']} ms"
    )
    if w.viewers:
        v = w.viewers
        line += (
            f"; {v['streams']} streams ({v['refused'] or 'none'} refused, pages failed "
            f"{v.get('page_errors') or 'none'}), {v['updates']} updates, "
            f"{v['live_fetches']} /live fetches; viewers' CPU {v.get('client_cpu_share')} core"
        )
        if "drain_s" in v:
            line += f"; the web loop quiet {v['drain_s']} s after they left"
    return line


def _trend_line(w: Window, sampler: Sampler) -> str:
    r = _window(w, sampler)
    return (
        f"    to {r['at_games']:>6} games: {r['games_per_s'] or 0:>5.2f} games/s, service "
        f"{r['service_us_per_move'] or 0:.0f} us/move (web {r['web_us_per_move'] or 0:.0f}, ladder "
        f"{r['ladder_us_per_move'] or 0:.0f}, other {r['other_us_per_move'] or 0:.0f}), page p50 "
        f"{r['page']['p50_ms']} ms, api p50 {r['api']['p50_ms']} ms"
    )


# --------------------------------------------------------------- driver


def summary(figures: dict[str, Any]) -> dict[str, Any]:
    base = figures["baseline"]
    windows = figures["ladder"]["windows"]

    def pooled(kind: str) -> dict[str, float | None]:
        ws = [w for w in windows if w["kind"] == kind]
        seconds = sum(w["seconds"] for w in ws)
        games = sum(w["games"] for w in ws)
        moves = sum(w["moves"] for w in ws)
        cpu = sum(w["service_cpu_s"] for w in ws)
        return {
            "games": games,
            "seconds": round(seconds, 1),
            "games_per_s": round(games / seconds, 2) if seconds else None,
            "service_us_per_move": round(cpu / moves * 1e6, 1) if moves else None,
        }

    quiet, viewed = pooled("quiet"), pooled("viewers")
    # each viewer window against the mean of the quiet windows on either side of it: what a board
    # costs grows with the games recorded, and the machine's speed drifts; both fall out
    pairs = []
    for i, w in enumerate(windows):
        if w["kind"] != "viewers" or w["games_per_s"] is None:
            continue
        around = [
            windows[j]["games_per_s"]
            for j in (i - 1, i + 1)
            if 0 <= j < len(windows) and windows[j]["kind"] == "quiet" and windows[j]["games_per_s"]
        ]
        if around:
            pairs.append(w["games_per_s"] / statistics.mean(around))
    adjacent = round(statistics.median(pairs), 3) if pairs else None
    return {
        "runner_games_per_s": base["games_per_s"],
        "runner_us_per_move": base["us_per_move"],
        "ladder_games_per_s": quiet["games_per_s"],
        "ladder_x_runner": _ratio(quiet["games_per_s"], base["games_per_s"]),
        "service_us_per_move": quiet["service_us_per_move"],
        "service_x_runner_cpu": _ratio(quiet["service_us_per_move"], base["us_per_move"]),
        "viewers_games_per_s": viewed["games_per_s"],
        "viewers_x_quiet": _ratio(viewed["games_per_s"], quiet["games_per_s"]),
        "viewers_x_quiet_around": adjacent,
        "viewers_x_quiet_around_each": [round(p, 3) for p in pairs],
        "viewers_service_us_per_move": viewed["service_us_per_move"],
        "viewers_do_not_slow_games": adjacent is not None and adjacent >= TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--games", type=int, default=10_000, help="games the ladder plays, then it is frozen")
    parser.add_argument("--concurrency", type=int, default=16, help="games at once (ladder and runner)")
    parser.add_argument("--table-size", type=int, default=4)
    parser.add_argument("--viewers", type=int, default=500, help="viewers in the viewer windows")
    parser.add_argument("--ramp", type=float, default=5.0, help="seconds over which the viewers arrive")
    parser.add_argument(
        "--baseline-games", type=int, default=1000, help="the runner's games (half before, half after)"
    )
    parser.add_argument("--sample-hz", type=float, default=0.5, help="latency samples per second per target")
    parser.add_argument(
        "--viewer-seconds",
        type=float,
        default=300.0,
        help="a viewer window ends after this long if its games are not played by then",
    )
    parser.add_argument("--validation-games", type=int, default=1, help="the service's admission games")
    parser.add_argument(
        "--quick", action="store_true", help="20 teams, 1,000 games, 100 viewers, 200 baseline games"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    parser.add_argument(
        "--profile-service",
        metavar="FILE",
        help="profile the service's web loop (cProfile stats to FILE; it slows the service)",
    )
    parser.add_argument(
        "--serve-service", nargs=3, metavar=("PORT", "DB", "SETTINGS"), help=argparse.SUPPRESS
    )
    parser.add_argument("--serve-bare", nargs=2, type=int, metavar=("PORT", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--viewers-of", nargs=4, metavar=("BASE", "CID", "N", "RAMP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_service is not None:
        port, db, settings = args.serve_service
        serve_service(int(port), db, settings)
        return 0
    if args.serve_bare is not None:
        serve_bare(*args.serve_bare)
        return 0
    if args.viewers_of is not None:
        base, cid, n, ramp = args.viewers_of
        asyncio.run(viewers_main(base, int(cid), int(n), float(ramp)))
        return 0
    if args.profile_service:
        os.environ[PROFILE_ENV] = str(Path(args.profile_service).resolve())
    if args.quick:
        args.teams, args.games, args.viewers, args.baseline_games = 20, 1000, 100, 200
    if args.teams < 2 * args.table_size:
        parser.error("--teams must be at least twice --table-size")
    if args.games < 100:
        parser.error("--games must be at least 100")

    figures: dict[str, Any] = {
        "benchmark": "the service's ladder at scale vs the tournament runner, with and without viewers",
        "engine": engine_status(),
        "cpus": os.cpu_count(),
        "teams": args.teams,
        "games": args.games,
        "concurrency": args.concurrency,
        "table_size": args.table_size,
        "viewers": args.viewers,
        "bots": list(BOT_KINDS),
        "loadavg_1min_start": round(os.getloadavg()[0], 2),
    }
    print(figures["engine"])
    print(
        f"{args.teams} teams on {len(BOT_KINDS)} bot processes ({', '.join(BOT_KINDS)}), "
        f"{args.table_size} seats, concurrency {args.concurrency}; {os.cpu_count()} cores, "
        f"load average {figures['loadavg_1min_start']}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="ladder-bench-") as tmp_name:
        tmp = Path(tmp_name)
        procs, urls = start_bots(tmp)
        try:
            for u in urls:
                asyncio.run(wait_http(u, "a sample bot"))
            entries = team_urls(urls, args.teams)
            halves = []
            b1 = baseline(entries, args.baseline_games // 2, args.table_size, args.concurrency, seed=5)
            halves.append(b1)
            print(
                f"runner, before: {b1['games']} games in {b1['seconds']:.1f} s, "
                f"{b1['games'] / b1['seconds']:.2f} games/s",
                flush=True,
            )
            figures["ladder"] = asyncio.run(ladder(args, urls, [p.pid for p in procs], tmp))
            b2 = baseline(
                entries,
                args.baseline_games - args.baseline_games // 2,
                args.table_size,
                args.concurrency,
                seed=6,
            )
            halves.append(b2)
            print(
                f"runner, after: {b2['games']} games in {b2['seconds']:.1f} s, "
                f"{b2['games'] / b2['seconds']:.2f} games/s",
                flush=True,
            )
        finally:
            for p in procs:
                stop(p)
    games = sum(h["games"] for h in halves)
    seconds = sum(h["seconds"] for h in halves)
    moves = sum(h["moves"] for h in halves)
    figures["baseline"] = {
        "games": games,
        "seconds": round(seconds, 1),
        "games_per_s": round(games / seconds, 2),
        "us_per_move": round(sum(h["cpu_s"] for h in halves) / moves * 1e6, 1),
        "halves_games_per_s": [round(h["games"] / h["seconds"], 2) for h in halves],
    }
    figures["loadavg_1min_end"] = round(os.getloadavg()[0], 2)
    s = figures["summary"] = summary(figures)
    lad = figures["ladder"]
    print(
        f"\nladder: {lad['recorded']} games recorded in {lad['ladder_seconds']} s, {lad['standings']} entries "
        f"standing, {lad['faults']} faults; frozen in {lad['freeze_s']} s; the service's RSS then "
        f"{lad['service_rss_mb']} MB"
    )
    head = (
        f"{'':<8} {'to games':>8} {'games':>6} {'s':>7} {'games/s':>8} {'svc us/mv':>9} {'web':>5} "
        f"{'ladder':>6} {'other':>5} {'bots':>5} {'cores':>5} {'page p50/p95':>16} {'api p50/p95':>16} "
        f"{'bare p50/p95':>13} {'xbare':>6}"
    )
    for title, rows in (
        ("quiet stretches, every 5% of the games", lad["trend"]),
        ("windows", lad["windows"]),
    ):
        print(
            f"\n{title} (us per move: the service's CPU, its web loop, its ladder thread, its other threads; "
            "the bots' CPU)"
        )
        print(head)
        for w in rows:
            print(
                f"{w['kind']:<8} {w['at_games']:>8} {w['games']:>6} {w['seconds']:>7.1f} {w['games_per_s'] or 0:>8.2f} "
                f"{w['service_us_per_move'] or 0:>9.0f} {w['web_us_per_move'] or 0:>5.0f} "
                f"{w['ladder_us_per_move'] or 0:>6.0f} {w['other_us_per_move'] or 0:>5.0f} "
                f"{w['bots_us_per_move'] or 0:>5.0f} {w['service_cores'] or 0:>5.2f} "
                f"{_pair(w['page']):>16} {_pair(w['api']):>16} {_pair(w['bare']):>13} {w['page_x_bare'] or 0:>6.1f}"
            )
    for w in lad["windows"]:
        if "viewers" in w:
            v = w["viewers"]
            print(
                f"viewers to {w['at_games']}: {v['streams']} of {v['viewers']} streams open ({v['refused'] or 'none'} "
                f"refused, {v['errors']} broken, pages failed {v.get('page_errors') or 'none'}), {v['updates']} updates ({v.get('updates_in_stream')} "
                f"carrying the live part, {v.get('live_part_kb')} KB), {v['live_fetches']} /live fetches; the "
                f"viewers' own CPU {v.get('client_cpu_share')} core; the web loop quiet {v.get('drain_s')} s "
                "after they left"
            )
    print(
        f"\nrunner (referee tournament's, same bots): {figures['baseline']['games']} games, "
        f"{s['runner_games_per_s']} games/s (halves {figures['baseline']['halves_games_per_s']}), "
        f"{s['runner_us_per_move']} us CPU per move"
    )
    print(
        f"ladder, quiet windows: {s['ladder_games_per_s']} games/s = {s['ladder_x_runner']}x the runner's; "
        f"service {s['service_us_per_move']} us CPU per move = {s['service_x_runner_cpu']}x the runner's"
    )
    print(
        f"with {args.viewers} viewers: {s['viewers_games_per_s']} games/s = {s['viewers_x_quiet']}x the quiet "
        f"windows'; median {s['viewers_x_quiet_around']}x the quiet windows on either side of each "
        f"{s['viewers_x_quiet_around_each']} (claim: >= {TARGET:.2f}, "
        f"{'holds' if s['viewers_do_not_slow_games'] else 'does NOT hold'}); "
        f"service {s['viewers_service_us_per_move']} us CPU per move"
    )
    if args.json:
        print(json.dumps(figures))
    return 0


def _pair(lat: dict[str, Any]) -> str:
    return f"{lat['p50_ms']}/{lat['p95_ms']}"


if __name__ == "__main__":
    sys.exit(main())
