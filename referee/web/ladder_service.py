"""A competition that plays itself (issue 15): its ladder while it is open,
its final once frozen.

The phases (:data:`referee.service.store.PHASES`): the admin **opens** a
competition and its ladder plays all the time (:class:`LadderThread`, one
:class:`~referee.tournament.ladder.Ladder` in a thread of its own); a
submission accepted meanwhile enters at once (:func:`submission_accepted`).
**Freezing** closes submissions and stops the ladder after its games in
flight. The **final** is an adaptive league of the frozen bots (each team's
newest version accepted before the freeze) from fresh ratings on a new
secret seed, played until settled at the league's ``[stop]`` confidence or
its game budget; its seed and games are public once it is finished.

A restart loses nothing: an open competition's ladder starts again over its
folder (the planned games not yet recorded first), and an unfinished final
resumes (:func:`autoplay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import msgspec
from aiohttp import web

from ..bots.factory import BotSpec
from ..bots.netpolicy import AddressPolicy, PinnedURL
from ..service.errors import Conflict, NotFound, ServiceError
from ..service.store import Competition, Run, ServiceDB, Team
from ..tournament.executors import Executor, LocalExecutor
from ..tournament.ladder import EntryResult, Ladder, Wanted, entry_name, ladder_entries, set_team_ids
from ..tournament.league import League, LeagueError
from ..tournament.runner import Interrupted
from ..tournament.schedule import make_scheduler
from .app_state import DB, RUNS, SETTINGS
from .run_start import (
    RunThread,
    build_league,
    check_house_commands,
    check_league_text,
    decode_league,
    encode_league,
    end_thread,
    executor_factory,
    league_filename,
    pin_house_text,
    pinned_house,
    prepare_run,
    still_allowed,
    team_entry,
    with_secrets,
)

log = logging.getLogger("referee.web")


def _secret_seed() -> int:
    """A deal seed nobody knows before it is published (a league file's seed may be shared)."""
    return secrets.randbits(62)


# ------------------------------------------------------------ the entries


def wanted_of(
    db: ServiceDB, cid: int, policy: AddressPolicy | None, house: Mapping[str, PinnedURL] | None = None
) -> list[Wanted]:
    """The entries an open competition's ladder should have: its house bots
    (a URL one at its address in `house`, :func:`~.runs.pin_house_urls`)
    and each team's version in play (a URL bot only while its pinned address
    is one `policy` allows), with their secrets."""
    comp = db.competition(cid)
    if comp is None:
        return []
    ladder = db.latest_run_of(cid, "ladder")
    if ladder is None:
        house_bots = pinned_house(check_league_text(comp.league_toml).bots, house)
    else:  # a ladder keeps the house bots of the league it was opened with (an edit is for what starts after)
        kept = decode_league(ladder.league_json).bots
        same = {n: p for n, p in (house or {}).items() if any(b.name == n and b.url == p.url for b in kept)}
        house_bots = pinned_house(kept, same)
    out = [Wanted(name=b.name, spec=b) for b in house_bots]
    entries = ladder_entries(ladder.out_dir) if ladder is not None and ladder.out_dir else []
    named = {e.submission: e.name for e in entries if e.submission is not None}
    taken = {e.name for e in entries} | {b.name for b in house_bots}
    for team in db.playing_teams(cid):  # a withdrawn team's entries retire
        sub = db.playing_submission(team.id)
        if sub is None or not still_allowed(sub, policy):
            continue
        spec = msgspec.structs.replace(team_entry(team, sub), secret=sub.secret)
        name = named.get(sub.id) or new_entry_name(team, db.submission_number(sub.id), taken)
        taken.add(name)
        out.append(Wanted(name=name, team=team.name, team_id=team.id, submission=sub.id, spec=spec))
    return out


def new_entry_name(team: Team, version: int, taken: set[str]) -> str:
    """The ladder's name of a team's version entering it: "NAME vN" under the
    team's name now. An entry keeps the name it came in with (issue 32: a
    renamed team's versions in play keep theirs; who an entry is, is its team
    id and submission), so a name two teams' versions would share after a
    rename takes the team's id too."""
    name = entry_name(team.name, version)
    suffix, i = f" (team {team.id})", 1
    while name in taken:
        name = f"{entry_name(team.name, version)}{suffix}" + (f" #{i}" if i > 1 else "")
        i += 1
    return name


def team_of_submission(db: ServiceDB, sid: int) -> int | None:
    """The id of the team whose submission `sid` is (None: there is none)."""
    sub = db.submission(sid)
    return None if sub is None else sub.team_id


def known_of(db: ServiceDB, out_dir: str) -> dict[str, BotSpec]:
    """The specs, with their secrets, of a ladder's earlier entries (a
    retired version may still owe the rotations of a deal it was dealt into)."""
    out: dict[str, BotSpec] = {}
    for e in ladder_entries(out_dir):
        if e.submission is None:
            continue
        sub = db.submission(e.submission)
        team = db.team(sub.team_id) if sub is not None else None
        if sub is None or team is None:
            continue
        out[e.name] = msgspec.structs.replace(team_entry(team, sub), name=e.name, secret=sub.secret)
    return out


# ------------------------------------------------------------ the thread


class LadderThread:
    """A competition's ladder played in a thread with its own event loop
    (like :class:`~referee.web.run_start.RunThread`); :meth:`reconcile` from the
    service's loop brings in new entries."""

    def __init__(
        self,
        db_path: Path,
        run: Run,
        league: League,
        wanted: list[Wanted],
        known: dict[str, BotSpec],
        concurrency: int | None,
        executor: Callable[[], Executor] = LocalExecutor,
    ) -> None:
        self.db_path = db_path
        self.run = run
        self.make_executor = executor
        self.league, self.known, self.concurrency = league, known, concurrency
        self.wanted = wanted
        #: Its house URL bots' addresses, admitted when it started (the
        #: entries a new submission brings keep them).
        self.house: Mapping[str, PinnedURL] = {}
        self.ladder = self._new_ladder(wanted)
        #: Times the ladder failed and started again, since it last played a while.
        self.restarts = 0
        self._stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._main, name=f"ladder-{run.competition_id}", daemon=True)
        #: The run's status once the ladder ends: "finished" when frozen,
        #: "interrupted" when the server stops (it plays on at the next start).
        self.end_status = "interrupted"
        self.status = "running"
        self.error: str | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        self.thread.start()
        self._ready.wait(10)

    def _new_ladder(self, wanted: list[Wanted]) -> Ladder:
        cid = self.run.competition_id
        return Ladder(
            self.league,
            Path(self.run.out_dir),
            wanted=wanted,
            known=self.known,
            concurrency=self.concurrency,
            log=lambda m: log.info("competition %s: %s", cid, m),
        )

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        self._ready.set()
        try:
            while True:
                began = time.monotonic()
                try:
                    self.ladder.executor = self.make_executor()
                    loop.run_until_complete(self.ladder.run())
                except Interrupted:
                    self.status = self.end_status
                    break
                except Exception as e:  # noqa: BLE001 - a ladder's crash must not take the service down
                    self.error = str(e) if isinstance(e, LeagueError) else f"{type(e).__name__}: {e}"
                    if not isinstance(e, LeagueError):
                        traceback.print_exc()
                    # A game that could not be played (the disk, a bug): the ladder starts again over
                    # its folder after a pause, unless it fails again and again.
                    self.restarts = 1 if time.monotonic() - began > RESTART_RESET_S else self.restarts + 1
                    if isinstance(e, LeagueError) or self.restarts > RESTARTS or self._stopping:
                        self.status = "failed"
                        break
                    log.error(
                        "competition %s: the ladder failed (%s); it starts again in %.0f s (%d of %d)",
                        self.run.competition_id,
                        self.error,
                        RESTART_S * self.restarts,
                        self.restarts,
                        RESTARTS,
                    )
                    with contextlib.suppress(Exception):
                        loop.run_until_complete(self.ladder.executor.close())
                    loop.run_until_complete(self._pause(RESTART_S * self.restarts))
                    if self._stopping:
                        self.status = self.end_status
                        break
                    self.ladder = self._new_ladder(self.wanted)
        finally:
            end_thread(loop, self.ladder.executor, self.db_path, self.run.id, self.status, self.error)

    def alive(self) -> bool:
        return self.thread.is_alive()

    async def reconcile(self, wanted: list[Wanted]) -> list[EntryResult]:
        """Bring the ladder to `wanted` (from the service's loop); a ladder
        starting again after a failure starts from the latest `wanted`."""
        self.wanted = wanted
        loop = self.loop
        if loop is None or loop.is_closed() or not self.alive():
            return []

        async def go() -> list[EntryResult]:
            await self.ladder.started.wait()
            if self.ladder._store is None:  # it ended before it started
                return []
            return await self.ladder.reconcile(wanted)

        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(go(), loop))
        except RuntimeError:  # the loop closed meanwhile
            return []

    async def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < end:
            await asyncio.sleep(min(0.1, seconds))

    def stop(self, status: str, abandon: bool) -> None:
        """End the ladder: after its games in flight, or abandoning them
        (planned, they are played when it starts again)."""
        self.end_status = status
        self._stopping = True
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self.ladder.stop, abandon)
        except RuntimeError:
            pass

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


LADDERS: web.AppKey[dict[int, LadderThread]] = web.AppKey("ladders", dict)

#: A ladder that fails starts again after RESTART_S x the failures in a row,
#: RESTARTS times at most; a ladder that played RESTART_RESET_S seconds
#: before failing counts as failing for the first time.
RESTARTS = 5
RESTART_S = 5.0
RESTART_RESET_S = 300.0


def executor_of(app: web.Application) -> Callable[[], Executor]:
    """The executor every run, ladder and final of this server plays on."""
    s = app[SETTINGS]
    return executor_factory(s.executor, s.executor_address, s.executor_workers, s.executor_registry)


# ------------------------------------------------------------ the phases


async def _house_pins(app: web.Application, comp: Competition, what: str) -> Mapping[str, PinnedURL]:
    """The competition's house URL bots admitted and pinned
    (:func:`~.runs.pin_house_urls`); :class:`Conflict` naming the one refused, after `what`."""
    settings = app[SETTINGS]
    try:
        return await pin_house_text(
            comp.league_toml,
            settings.bot_policy,
            anywhere=settings.house_urls_anywhere,
            allow_commands=settings.allow_house_commands,
        )
    except ServiceError as e:
        raise e.reworded(f"{what}: {e.message}") from None


def _start_ladder(
    db: ServiceDB,
    cid: int,
    policy: AddressPolicy | None,
    concurrency: int | None,
    house: Mapping[str, PinnedURL] | None = None,
    *,
    allow_commands: bool = False,
) -> tuple[Run, League, list[Wanted], dict[str, BotSpec]]:
    """Mark the competition open and its ladder running: the same ladder as
    before when it has one (reopened, or the server restarted), else a new
    one on a secret seed; its house URL bots at their addresses in `house`.
    A stored ladder whose house bots need ``--allow-house-commands`` (the
    league edited after it opened under the flag, a restored or edited
    database) is refused when the service runs without it, as a new one is
    (issue 32)."""
    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    last = db.latest_run_of(cid, "ladder")
    if last is not None:
        league = decode_league(last.league_json)
        try:
            check_house_commands(league, allow_commands=allow_commands)
        except ServiceError as e:
            raise e.reworded(f"cannot open: its ladder's stored league: {e.message}") from None
        run = db.begin_run(
            cid, out_dir=last.out_dir, league_json=last.league_json, total_games=0, resume_run=last.id
        )
    else:
        try:
            league = check_league_text(comp.league_toml, league_filename(db, cid))
        except LeagueError as e:
            raise Conflict(f"cannot open: {e}") from None
        league.tournament.seed = _secret_seed()
        league.path = league_filename(db, cid)
        league.bots = pinned_house(league.bots, house)
        run = db.begin_run(cid, out_dir="", league_json=encode_league(league), total_games=0, kind="ladder")
        if not isinstance(run, str):
            out = db.data_dir / f"competition-{cid}" / f"ladder-{run.id}"
            db.set_out_dir(run.id, str(out))
            run.out_dir = str(out)
    if isinstance(run, str):
        raise Conflict(f"cannot open: {run}")
    db.set_phase(cid, "open", concurrency=concurrency)
    if run.out_dir:  # a ladder from before entries had team ids: each gets its submission's team's
        set_team_ids(run.out_dir, lambda sid: team_of_submission(db, sid))
    return run, league, wanted_of(db, cid, policy, house), known_of(db, run.out_dir)


async def open_competition(app: web.Application, comp: Competition, concurrency: int | None = None) -> Run:
    """Open the competition (from setup or frozen): its ladder plays from now on."""
    if comp.phase not in ("setup", "frozen"):
        raise Conflict(f"competition {comp.id} is {comp.phase}: only a competition in setup or frozen opens")
    if comp.id in app[LADDERS] and app[LADDERS][comp.id].alive():
        raise Conflict(f"competition {comp.id}'s ladder is playing already")
    db, settings = app[DB], app[SETTINGS]
    house = await _house_pins(app, comp, "cannot open")
    run, league, wanted, known = await db.call(
        _start_ladder,
        comp.id,
        settings.bot_policy,
        concurrency,
        house,
        allow_commands=settings.allow_house_commands,
    )
    thread = LadderThread(
        db.path,
        run,
        league,
        wanted,
        known,
        concurrency if concurrency is not None else comp.ladder_concurrency,
        executor_of(app),
    )
    thread.house = house
    app[LADDERS][comp.id] = thread
    await asyncio.to_thread(thread.start)
    return run


def ladder_waiting(app: web.Application, cid: int) -> str | None:
    """Why the competition's ladder, playing, plays no game now and what to do (None: it plays)."""
    thread = app[LADDERS].get(cid)
    return thread.ladder.waiting if thread is not None and thread.alive() else None


async def submission_accepted(app: web.Application, cid: int) -> list[EntryResult]:
    """A team's new version enters the competition's ladder at once (when it plays)."""
    thread = app[LADDERS].get(cid)
    if thread is None or not thread.alive():
        return []
    wanted = await app[DB].call(wanted_of, cid, app[SETTINGS].bot_policy, thread.house)
    return await thread.reconcile(wanted)


async def stop_ladder(app: web.Application, cid: int, status: str, *, abandon: bool) -> None:
    thread = app[LADDERS].pop(cid, None)
    if thread is None:
        return
    thread.stop(status, abandon)
    await asyncio.to_thread(thread.join, 120)


async def freeze(app: web.Application, comp: Competition) -> None:
    """Close submissions; the ladder stops once its games in flight end."""
    if comp.phase != "open":
        raise Conflict(f"competition {comp.id} is {comp.phase}: only an open competition freezes")
    await app[DB].call(ServiceDB.set_phase, comp.id, "frozen")
    await stop_ladder(app, comp.id, "finished", abandon=False)


def _prepare_final(
    db: ServiceDB,
    cid: int,
    policy: AddressPolicy | None,
    seed: int | None = None,
    house: Mapping[str, PinnedURL] | None = None,
) -> tuple[Run, League]:
    """The final's run: the house bots (a URL one at its address in
    `house`) and each team's newest version accepted before the freeze, on
    an adaptive schedule from fresh ratings and a new secret seed."""
    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    if comp.phase != "frozen":
        raise Conflict(f"competition {cid} is {comp.phase}: the final starts once it is frozen")
    pending = [
        s
        for s in db.pending_submissions()
        if (t := db.team(s.team_id)) is not None and t.competition_id == cid
    ]
    if pending:
        raise Conflict(
            f"{len(pending)} submission(s) made before the freeze are still being checked: "
            "start the final once they are accepted or refused",
        )
    pairs = []
    for team in db.playing_teams(cid):
        sub = db.playing_submission(team.id, before=comp.frozen_at)
        if sub is not None and still_allowed(sub, policy):
            pairs.append((team, sub))
    try:
        league = build_league(comp.league_toml, pairs, league_filename(db, cid), house)
    except LeagueError as e:
        raise Conflict(f"cannot start the final: {e}") from None
    league.tournament.schedule = "adaptive"
    league.tournament.seed = _secret_seed() if seed is None else seed
    limit = make_scheduler(league).limit or 0
    # every team bot's submission (not only those with a secret): who each bot of the run is (issue 32)
    secrets_from = msgspec.json.encode({t.name: s.id for t, s in pairs}).decode()
    run = db.begin_run(
        cid,
        out_dir="",
        league_json=encode_league(league),
        total_games=limit,
        secrets_from=secrets_from,
        kind="final",
    )
    if isinstance(run, str):
        raise Conflict(f"cannot start the final: {run}")
    out = db.data_dir / f"competition-{cid}" / f"final-{run.id}"
    db.set_out_dir(run.id, str(out))
    run.out_dir = str(out)
    db.set_phase(cid, "final")
    return run, with_secrets(db, league, secrets_from)


async def start_final(app: web.Application, comp: Competition, seed: int | None = None) -> Run:
    db, settings = app[DB], app[SETTINGS]
    house = await _house_pins(app, comp, "cannot start the final")
    run, league = await db.call(_prepare_final, comp.id, settings.bot_policy, seed, house)
    thread = RunThread(db.path, run, league, resume=False, executor=executor_of(app))
    app[RUNS][run.id] = thread
    await asyncio.to_thread(thread.start)
    return run


async def autoplay(app: web.Application) -> None:
    """At the server's start: open competitions play their ladder again,
    an unfinished final resumes."""
    db, settings = app[DB], app[SETTINGS]
    for comp in await db.call(ServiceDB.competitions_in, "open"):
        try:
            house = await _house_pins(app, comp, "cannot open")
            run, league, wanted, known = await db.call(
                _start_ladder,
                comp.id,
                settings.bot_policy,
                None,
                house,
                allow_commands=settings.allow_house_commands,
            )
        except ServiceError as e:
            log.error("competition %s: its ladder cannot start again: %s", comp.id, e.message)
            continue
        thread = LadderThread(db.path, run, league, wanted, known, comp.ladder_concurrency, executor_of(app))
        thread.house = house
        app[LADDERS][comp.id] = thread
        await asyncio.to_thread(thread.start)
    for comp in await db.call(ServiceDB.competitions_in, "final"):
        final = await db.call(ServiceDB.latest_run_of, comp.id, "final")
        if final is None or final.status == "finished":
            continue
        try:
            run, league = await db.call(
                prepare_run,
                comp.id,
                resume=True,
                policy=settings.bot_policy,
                allow_commands=settings.allow_house_commands,
            )
        except ServiceError as e:
            log.error("competition %s: its final cannot resume: %s", comp.id, e.message)
            continue
        final_thread = RunThread(db.path, run, league, resume=True, executor=executor_of(app))
        app[RUNS][run.id] = final_thread
        await asyncio.to_thread(final_thread.start)


async def ladders_ctx(app: web.Application) -> AsyncIterator[None]:
    """Ladders and finals play on from the server's start; on the way out
    the ladders stop (their games in flight abandoned: planned, they are
    played at the next start)."""
    await autoplay(app)
    yield
    threads = list(app[LADDERS].values())
    for t in threads:
        t.stop("interrupted", abandon=True)
    for t in threads:
        await asyncio.to_thread(t.join, 30)
