"""Run a league: start the bots, play the schedule, record, rate.

Games run concurrently (``concurrency`` at once); each finished game is
recorded in one SQLite transaction, and ratings are applied in schedule order,
so the standings do not depend on which game finished first. ``resume``
continues a tournament that was stopped, however it was stopped. On Ctrl-C
the games in flight are finished (a second Ctrl-C abandons them: they are
played again on resume) and the exact resume command is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import signal
import sys
import time
from collections.abc import AsyncGenerator, Callable, Container, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from ..bots.base import Bot, BotError
from ..bots.cluster.nodepool import ImageSeat, NodeBot
from ..bots.dropped import DroppedBot
from ..bots.factory import BotFactory, BotSpec
from ..bots.http import make_session
from ..record import MatchResult
from ..report import Progress
from ..textsafe import csv_writer, for_terminal
from .executors import Executor, GameJob, LocalExecutor
from .league import League, LeagueError
from .ratings import HeadToHead, Outcome, Standing, Table, head_to_head
from .schedule import GameSpec, Scheduler, make_scheduler
from .store import TOURNAMENT_DB, Store, outcome_of


class Interrupted(Exception):
    """The tournament was stopped before its end (Ctrl-C); it can be resumed."""


def league_fingerprint(league: League) -> str:
    """What must not change between a run and its resume: the bots, rules,
    timeouts, fault policy, ratings and the schedule's parameters."""
    t = league.tournament
    # An extended league is the league it was: its first budget counts (the
    # schedule replays its games under it), not the budgets it was given since.
    stop = msgspec.to_builtins(league.stop)
    first = stop.pop("extended_from", None)
    if first:
        stop["max_games"] = first[0]
    data = {
        "seed": t.seed,
        "table_size": t.table_size,
        "rounds": t.rounds,
        "duplicate": t.duplicate,
        "schedule": t.schedule,
        "stop": stop,
        "rules": league.rules,
        "timeouts": league.timeouts,
        "faults": league.faults,
        "ratings": league.ratings,
        "bots": [b.name for b in league.bots],
    }
    return hashlib.sha256(msgspec.json.encode(data, order="deterministic")).hexdigest()


#: Games in a row lost to connection faults and timeouts alone that drop a bot.
DEAD_GAMES = 2


def redacted(league: League) -> League:
    """The league without its bots' secrets, as the tournament database
    keeps it (a secret lives in the league file or the service database only)."""
    bots = [msgspec.structs.replace(b, secret=None) if b.secret is not None else b for b in league.bots]
    return msgspec.structs.replace(league, bots=bots)


class Tournament:
    def __init__(
        self,
        league: League,
        out: Path | None = None,
        *,
        concurrency: int | None = None,
        resume: bool = False,
        progress: bool = True,
        replays: bool = True,
        log: Callable[[str], None] | None = None,
        executor: Executor | None = None,
        drop_unreachable: bool = False,
        on_game: Callable[[int], None] | None = None,
        seated: Mapping[str, Bot] | None = None,
        scheduler: Scheduler | None = None,
        signals: bool = True,
    ) -> None:
        self.league = league
        #: Seats played by a transport given ready-made (a person's
        #: :class:`~referee.bots.human.HumanSeat`), by the league's bot name:
        #: not started by the factory, handshaken and closed like the others.
        self.seated: Mapping[str, Bot] = seated or {}
        #: Whether Ctrl-C and SIGTERM stop the run (False: a run inside a server, whose signals they are).
        self.signals = signals
        #: Called with a game's index once it is recorded (the service wakes its watchers).
        self.on_game = on_game
        #: A bot that cannot be reached when the run starts, or that loses
        #: DEAD_GAMES games in a row to connection faults and timeouts, is
        #: dropped from the rest of the run (its games recorded as its
        #: faults) instead of stopping the run (the classroom service), or
        #: (False, the CLI's default) stops the run at the start with its name.
        self.drop_unreachable = drop_unreachable
        #: The bots dropped from this run, and why.
        self.dropped: dict[str, str] = {}
        self._dead_games: dict[str, int] = {}
        self.out = (out or league.output_dir()).resolve()
        self.concurrency = concurrency or league.tournament.concurrency
        self.resume = resume
        self.show_progress = progress
        self.replays = replays
        #: Where games run (in this process by default); see executors.py.
        self.executor: Executor = executor or LocalExecutor()
        say = log or (lambda msg: print(msg, file=sys.stderr))
        #: Its lines may quote a bot (its name, its error): no escape sequence reaches a terminal.
        self.log: Callable[[str], None] = lambda msg: say(for_terminal(msg))
        #: Which games, block by block (round-robin, balanced or adaptive; or the one given).
        self.scheduler: Scheduler = scheduler if scheduler is not None else make_scheduler(league)
        #: The league's confidence: what "settled" means in the standings.
        self.confidence = league.stop.confidence
        #: The standings, fed every game in schedule order as it finishes.
        self.table = Table([b.name for b in league.bots], league.ratings, series=league.rules.scoring)
        #: One past the last game index planned so far.
        self.planned = 0
        self._applied = 0
        self._gate: float = 0
        self._finished: dict[int, Outcome] = {}
        self._progressed = asyncio.Event()
        self._failure: BaseException | None = None
        self.bots: dict[str, Bot] = {}
        self._entries = {b.name: b for b in league.bots}
        self._stopping = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._factory: BotFactory | None = None
        #: Games played by :meth:`run` and the seconds they took (bots started).
        self.played = 0
        self.play_seconds = 0.0
        #: Head-to-head records, once :meth:`finish` has computed them.
        self.head_to_head: list[HeadToHead] = []

    # ---------------------------------------------------------------- setup

    def _open_store(self) -> Store:
        self.out.mkdir(parents=True, exist_ok=True)
        db = self.out / TOURNAMENT_DB
        fresh = not db.exists()
        store = Store(db)
        fingerprint = league_fingerprint(self.league)
        if not fresh:
            done = store.count_games()
            known = store.get_meta("fingerprint")
            if not self.resume and done:
                store.close()
                raise LeagueError(
                    f"{self.out} holds a tournament already ({done} games recorded): "
                    f"continue it with --resume, or choose another --out"
                )
            if done and known is not None and known != fingerprint:
                store.close()
                raise LeagueError(
                    f"{self.out} holds a tournament of another league (its bots, rules, timeouts, "
                    "fault policy, ratings or schedule differ): resume it with the league file it "
                    "started with, or choose another --out"
                )
        store.set_meta("fingerprint", fingerprint)
        store.set_meta("league", msgspec.json.encode(redacted(self.league)).decode())
        store.set_meta("name", self.league.tournament.name)
        total = self.scheduler.total
        store.set_meta("total_games", str(total if total is not None else self.scheduler.limit))
        return store

    def _new_factory(self) -> aiohttp.ClientSession:
        """The HTTP session and the bot factory of this run (the session, to close at the end)."""
        session = make_session(connections_per_bot=max(8, self.concurrency * 2))
        league = self.league
        self._factory = BotFactory(
            log_dir=self.out / "logs",
            base_dir=Path(league.path).parent if league.path else Path.cwd(),
            session=session,
            out_dir=self.out,
            limits=league.containers,
            labels={"referee.tournament": league.tournament.name},
            # On a cluster, image bots run on its nodes (the executor's pools).
            nodes=self.executor if getattr(self.executor, "remote_images", False) else None,  # type: ignore[arg-type]
        )
        return session

    async def _start_bots(self, store: Store) -> None:
        """Reach or start every bot before any game; a bot that cannot be used
        stops the tournament here with a message naming it."""
        factory = self._factory
        assert factory is not None

        async def one(i: int, entry: BotSpec) -> None:
            where = f"[[bots]] #{i + 1} {entry.name!r}"
            given = self.seated.get(entry.name)
            if given is not None:
                self.bots[entry.name] = given
                info = await given.handshake()
                store.put_bot(entry.name, entry.kind, entry.target, msgspec.to_builtins(info))
                return
            try:
                strays = await factory.prepare(entry)
            except BotError as e:
                raise LeagueError(f"{where}: {e}") from None
            if strays:
                self.log(
                    f"{where}: removed {len(strays)} container(s) left by a crashed run: " + ", ".join(strays)
                )
            bot = factory.make(entry)
            try:
                info = await bot.handshake()
            except BotError as e:
                await bot.close()
                if not self.drop_unreachable:
                    raise LeagueError(f"{where}: {e}") from None
                self._drop(entry.name, "it could not be reached when the run started", str(e))
                store.put_bot(entry.name, entry.kind, entry.target, None)
                return
            if entry.fresh_process:
                await bot.close()  # each game starts its own
            self.bots[entry.name] = bot
            store.put_bot(entry.name, entry.kind, entry.target, msgspec.to_builtins(info))

        results = await asyncio.gather(
            *(one(i, e) for i, e in enumerate(self.league.bots)), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self._close_bots()
            raise errors[0]

    def _drop(self, name: str, why: str, detail: str = "") -> None:
        """Play the rest of the run without asking `name` anything."""
        self.dropped[name] = why
        old = self.bots.get(name)
        self.bots[name] = DroppedBot(name, why, nowhere=self.out / "dropped.sock")
        self.log(
            f"bot {name!r} is dropped from the rest of this run: {why}" + (f" ({detail})" if detail else "")
        )
        if old is not None:
            task = asyncio.ensure_future(old.close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _judge(self, seats: list[str], result: MatchResult) -> None:
        """Count the games a bot lost to connection faults and timeouts alone;
        DEAD_GAMES in a row drop it (with `drop_unreachable`)."""
        if not self.drop_unreachable:
            return
        for seat, name in enumerate(seats):
            if name in self.dropped:
                continue
            faults = [f for f in result.faults[seat] if not f.detail.startswith(("/start", "/end"))]
            dead = (
                seat in result.disqualified
                and bool(faults)
                and all(f.kind in ("connection", "timeout") for f in faults)
            )
            self._dead_games[name] = self._dead_games.get(name, 0) + 1 if dead else 0
            if self._dead_games[name] >= DEAD_GAMES:
                self._drop(
                    name,
                    f"it stopped answering ({DEAD_GAMES} games in a row lost to "
                    f"{'timeouts' if faults[-1].kind == 'timeout' else 'connection faults'})",
                )

    async def _close_bots(self) -> None:
        await asyncio.gather(*(b.close() for b in self.bots.values()), return_exceptions=True)

    # ------------------------------------------------------------------ run

    async def run(self) -> list[Standing]:
        store = self._open_store()
        try:
            recorded = {o.index: o for o in store.outcomes()}
            if self.resume and recorded:
                self.log(f"resuming: {len(recorded)} games recorded")
            session = self._new_factory()
            try:
                await self._start_bots(store)
                if self.replays:  # only once every bot is ready: a league that stops leaves none
                    (self.out / "replays").mkdir(exist_ok=True)
                t0 = time.perf_counter()
                try:
                    await self._play(recorded, store)
                finally:
                    self.play_seconds = time.perf_counter() - t0
            finally:
                await self._close_bots()
                await session.close()
            return self.finish(store)
        finally:
            store.close()

    def _apply_ready(self) -> None:
        """Apply to the live table every finished game whose turn has come:
        in index order, whatever order they finish in, and never past the
        gate (the first game of the block the next plan must not see)."""
        while self._applied < self._gate and self._applied in self._finished:
            self.table.add(self._finished.pop(self._applied))
            self._applied += 1
        self._progressed.set()

    async def _until_applied(self, index: int) -> None:
        """Wait until every game before `index` is applied (or the run stops)."""
        while self._applied < index and not self._stopping and self._failure is None:
            self._progressed.clear()
            await self._progressed.wait()

    async def _play(self, recorded: dict[int, Outcome], store: Store) -> None:
        """Play the schedule block by block (:meth:`_scheduled`) through
        :meth:`_play_games`, the game loop the ladder shares, with the
        progress bar and Ctrl-C handled here."""
        limit = self.scheduler.total if self.scheduler.total is not None else self.scheduler.limit
        progress = Progress(limit or 0, len(recorded), enabled=self.show_progress)
        progress.update(len(recorded), force=True)
        self._finished = dict(recorded)  # applied as their turn comes, like new ones
        loop = asyncio.get_running_loop()
        handled: list[signal.Signals] = []
        for sig in (signal.SIGINT, signal.SIGTERM) if self.signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal)
                handled.append(sig)
        try:
            await self._play_games(self._scheduled(recorded), store, progress, len(recorded), "stopped")
        finally:
            self._gate = math.inf  # the league is over: every finished game counts
            self._apply_ready()
            progress.close()
            for sig in handled:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)

    async def _scheduled(self, recorded: Container[int]) -> AsyncGenerator[GameSpec, None]:
        """The schedule's games not yet `recorded`, block by block, until it
        ends or the run stops. Block k is planned from the standings after
        every game of the blocks before k-1, so the games of block k-1 keep
        the workers busy while block k is decided, and the choice does not
        depend on which game finished first."""
        starts: list[int] = []  # the first index of each block
        k = 0
        while not self._stopping and self._failure is None:
            standings = None
            if k >= 2:
                await self._until_applied(starts[k - 1])
                if self._stopping or self._failure is not None:
                    return
                standings = self.table.standings(self.confidence)
            block = self.scheduler.block(k, standings)
            if not block:
                return
            starts.append(block[0].index)
            self.planned = block[-1].index + 1
            # The plan of block k+1 sees the games before this block only.
            self._gate = block[0].index if k >= 1 else 0
            self._apply_ready()
            for spec in block:
                if spec.index not in recorded:
                    yield spec
            k += 1

    async def _play_games(
        self,
        games: AsyncGenerator[GameSpec, None],
        store: Store,
        progress: Progress,
        recorded: int,
        stopped: str,
    ) -> None:
        """The game loop of a tournament and of a ladder: each game `games`
        yields is played (:meth:`_game`) as soon as one of the `concurrency`
        slots is free, the games in flight finish after the last one (or
        after :meth:`stop`; abandoned ones are cancelled), then the first
        game that could not be played is raised, or :class:`Interrupted`
        (``"<stopped> with N games recorded"``) if the run was stopped.
        `games` decides the order and when the next game is known (it may
        wait: the ladder's next block); `recorded`: the games recorded
        before this run, which :attr:`played` does not count."""
        semaphore = asyncio.Semaphore(self.concurrency)
        counter = [recorded]
        async with contextlib.aclosing(games):
            async for spec in games:
                await semaphore.acquire()
                if self._stopping or self._failure is not None:
                    semaphore.release()
                    break
                task = asyncio.create_task(self._game(spec, store, semaphore, counter, progress))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.played = counter[0] - recorded
        if self._failure is not None:
            raise self._failure
        if self._stopping:
            raise Interrupted(f"{stopped} with {counter[0]} games recorded")

    def _on_signal(self) -> None:
        self.stop(abandon=self._stopping > 0)

    def stop(self, abandon: bool = False) -> None:
        """Stop after the games in flight (call from the run's loop), or
        abandon them: they are played again on resume. The first Ctrl-C
        stops, the second abandons."""
        if not abandon:
            self._stopping = max(self._stopping, 1)
            self.log(
                f"\nstopping: finishing {len(self._tasks)} games in flight (Ctrl-C again to abandon them)"
            )
            return
        self._stopping = 2
        self.log(f"\nabandoning {len(self._tasks)} games in flight: they will be played on resume")
        for task in list(self._tasks):
            task.cancel()

    async def _game(
        self,
        spec: GameSpec,
        store: Store,
        semaphore: asyncio.Semaphore,
        counter: list[int],
        progress: Progress,
    ) -> None:
        fresh: list[Bot] = []
        try:
            bots: list[Bot] = []
            for name in spec.seats:
                entry = self._entries[name]
                if name in self.dropped:
                    bot = self.bots[name]
                elif entry.fresh_process and entry.started_here:
                    assert self._factory is not None
                    bot = self._factory.make(entry)
                    fresh.append(bot)
                else:
                    bot = self.bots[name]
                bots.append(bot)
            done = await self.executor.play(await self._job(spec, bots), bots)
            replay = None
            if self.replays:
                replay = self.out / "replays" / f"game-{spec.index:06d}.jsonl.gz"
                await asyncio.to_thread(replay.write_bytes, done.replay)
            self._record(spec, done.result, store, replay)
            self._judge(list(spec.seats), done.result)
            self._finished[spec.index] = outcome_of(
                spec.index, spec.seats, spec.deal_seed, msgspec.to_builtins(done.result)
            )
            self._apply_ready()
            counter[0] += 1
            progress.update(counter[0])
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a game that cannot be played stops the league, resumably
            if self._failure is None:
                self._failure = e
            self._progressed.set()
            raise
        finally:
            for b in fresh:
                with contextlib.suppress(Exception):
                    await b.close()
            semaphore.release()

    async def _job(self, spec: GameSpec, bots: list[Bot]) -> GameJob:
        """The game as an executor gets it. Workers in other processes reach
        bots by URL: bots the referee starts are (re)started here first."""
        urls: list[str] = []
        secrets: list[str | None] = []
        addresses: list[str | None] = []
        images: list[ImageSeat | None] = []
        if self.executor.name != "local":
            for bot in bots:
                if isinstance(bot, NodeBot):  # a node starts it
                    urls.append("")
                    secrets.append(None)
                    addresses.append(None)
                    images.append(bot.seat)
                    continue
                where = await bot.endpoint()
                urls.append(where.url)
                secrets.append(where.secret)
                addresses.append(where.address)
                images.append(None)
        league = self.league
        return GameJob(
            seed=spec.deal_seed,
            names=list(spec.seats),
            urls=urls,
            secrets=secrets,
            addresses=addresses,
            rules=league.rules,
            timeouts=league.timeouts,
            policy=league.faults,
            replay=self.replays,
            images=images if any(s is not None for s in images) else [],
            index=spec.index,
        )

    def _record(self, spec: GameSpec, result: MatchResult, store: Store, replay: Path | None) -> None:
        faults = [
            (seat, spec.seats[seat], f.kind, f.turn, f.detail, f.overrun_ms)
            for seat, fs in enumerate(result.faults)
            for f in fs
        ]
        store.record_game(
            index=spec.index,
            round_=spec.round,
            meeting=spec.meeting,
            rotation=spec.rotation,
            deal_seed=spec.deal_seed,
            seats=spec.seats,
            game_id=result.game_id,
            places=result.places,
            adjudicated=result.adjudicated,
            disqualified=result.disqualified,
            turns=result.turns,
            result=result,
            faults=faults,
            replay=str(replay.relative_to(self.out)) if replay else None,
        )
        if self.on_game is not None:
            self.on_game(spec.index)

    # --------------------------------------------------------------- output

    def finish(self, store: Store) -> list[Standing]:
        """The outputs, from the live table (every recorded game applied in
        order) and one pass over the store for head-to-head."""
        store.put_ratings(self.table.history)
        standings = self.table.standings(self.confidence)
        names = [b.name for b in self.league.bots]
        self.head_to_head = head_to_head(names, store.outcomes())
        write_outputs(self.out, standings, self.head_to_head)
        return standings


def compute(store: Store, league: League) -> tuple[list[Standing], list[HeadToHead]]:
    """Standings and head-to-head from the recorded games, in schedule order
    (a league's outputs again, from its store alone)."""
    outcomes: list[Outcome] = list(store.outcomes())
    table = Table([b.name for b in league.bots], league.ratings, series=league.rules.scoring)
    for o in outcomes:
        table.add(o)
    return table.standings(league.stop.confidence), head_to_head([b.name for b in league.bots], outcomes)


#: How sure the table is of each rank (referee.tournament.ratings.Standing).
SETTLED_FIELDS = ("p_above_next", "rank_low", "rank_high", "separated_above", "separated_below")

#: What standings.json holds: a function of the league and the bots' moves
#: alone, so the same league gives the same file at any concurrency.
DETERMINISTIC_FIELDS = (
    "rank",
    "bot",
    "mu",
    "sigma",
    "score",
    "games",
    "wins",
    "avg_place",
    "faults",
    *SETTLED_FIELDS,
)

#: standings.csv's columns: those, then the latency figures (which are not).
STANDINGS_FIELDS = (*DETERMINISTIC_FIELDS, "latency_p50_ms", "latency_p95_ms")


def standings_cell(row: dict[str, Any], key: str, *, first: bool, last: bool) -> object:
    """A standings.csv cell of `row` (a Standing as builtins): faults summed,
    None empty, and the first row's ``separated_above`` and the last row's
    ``separated_below`` empty: there is no bot there to be separated from
    (the Struct keeps True there by convention, for the pages' reading)."""
    if (key == "separated_above" and first) or (key == "separated_below" and last):
        return ""
    value = row[key]
    if key == "faults":
        return sum(value.values())
    return "" if value is None else value


def write_outputs(out: Path, standings: list[Standing], h2h: list[Any]) -> None:
    """standings.json (deterministic), latency.json (measured, varies from
    run to run), standings.csv (both), head_to_head.json."""
    rows = [msgspec.to_builtins(s) for s in standings]
    series = any(s.points is not None for s in standings)  # V4 [D14]
    fields = DETERMINISTIC_FIELDS + (("points",) if series else ())
    (out / "standings.json").write_text(
        json.dumps([{k: r[k] for k in fields} for r in rows], indent=2) + "\n"
    )
    (out / "latency.json").write_text(
        json.dumps(
            {r["bot"]: {"p50_ms": r["latency_p50_ms"], "p95_ms": r["latency_p95_ms"]} for r in rows}, indent=2
        )
        + "\n"
    )
    with (out / "standings.csv").open("w", newline="") as f:
        w = csv_writer(f)  # a bot named =HYPERLINK(...) is text to a spreadsheet
        columns = STANDINGS_FIELDS + (("points",) if series else ())
        w.writerow(columns)
        for i, r in enumerate(rows):
            w.writerow([standings_cell(r, k, first=i == 0, last=i == len(rows) - 1) for k in columns])
    (out / "head_to_head.json").write_text(json.dumps([msgspec.to_builtins(h) for h in h2h], indent=2) + "\n")


def load_standings(out: Path) -> list[Standing]:
    path = out / "standings.json"
    if not path.exists():
        raise LeagueError(f"{out}: no standings.json here (is it a tournament's output folder?)")
    rows = msgspec.json.decode(path.read_bytes(), type=list[Standing])
    lat_path = out / "latency.json"
    if lat_path.exists():
        latency = json.loads(lat_path.read_text())
        for r in rows:
            r.latency_p50_ms = latency.get(r.bot, {}).get("p50_ms")
            r.latency_p95_ms = latency.get(r.bot, {}).get("p95_ms")
    return rows


def load_confidence(out: Path) -> float:
    """The confidence the tournament in `out` was settled at (its league's
    ``[stop]``), 0.95 when the folder holds no readable league."""
    db = out / TOURNAMENT_DB
    if db.exists():
        with contextlib.suppress(Exception), Store(db) as store:
            text = store.get_meta("league")
            if text is not None:
                return float(msgspec.json.decode(text, type=League).stop.confidence)
    return 0.95


def load_h2h(out: Path) -> list[HeadToHead]:
    path = out / "head_to_head.json"
    if not path.exists():
        return []
    return msgspec.json.decode(path.read_bytes(), type=list[HeadToHead])
