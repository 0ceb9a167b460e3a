"""The competition without HTTP (issue 33): one :class:`Classroom` holds the
service's settings, its store, its workers and its clock, starts and stops
them, and does what a teacher, a team or a deadline asks (open, freeze, the
final, submissions, practice...).

The web (:mod:`referee.web`) makes one and calls it; a test makes one with
a fake clock and :class:`~referee.service.hosts.InlineHost` and drives a
whole semester on one event loop, with no HTTP and no sleep
(``tests/service``). Nothing here imports aiohttp (the layer test says so).

Who may do what is said once, as named rules in PokerKit's shape: a
``verify_*`` raises a :class:`~referee.service.errors.ServiceError` saying
why not; the operation calls it first, and a page asks the same rule to
show or hide an action (``can_*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from ..admission import AdmissionSettings
from ..tournament.executors import Executor
from ..tournament.league import League, LeagueError, league_notes
from . import alerts, human_practice, watch
from . import deadlines as deadlines_mod
from . import ladder as ladder_mod
from .check_site import site_for
from .clock import SYSTEM, Clock
from .default_league import league_or_default
from .edits import latest_ladder_league, store_ladder_league
from .errors import Conflict, Invalid, NotFound, RateLimited, ServiceError, Unauthorized
from .finals import PairEstimate, final_pairs, prepare_extension, suggested_games
from .health import Health, uploads_missing
from .hosts import HostMaker, ThreadHost
from .ladder_work import LadderWork
from .pipeline import Pipeline, admission_settings, default_policy
from .practice import PracticeQueue, PracticeRunner, ask
from .rules import (
    check_name,
    verify_has_token,
    verify_house_names,
    verify_submissions_open,
    verify_team_name,
    verify_uploads_ready,
)
from .runs import (
    RunWork,
    check_league_text,
    decode_league,
    executor_factory,
    pin_house_text,
    pin_house_urls,
    prepare_run,
)
from .settings import Settings
from .store import AsyncServiceDB, Competition, LeagueVersion, Run, ServiceDB, SlotRevoked, Submission, Team
from .store.practice import PracticeGame

log = logging.getLogger("referee.service")


class Classroom:
    """The service: `db_path` its database (made if missing), `settings`
    what ``referee serve``'s options say. Injected, for tests: `clock` (the
    time and the waits), `hosts` (where runs and ladders play: a thread of
    their own by default), `executor` (where their games play: by default
    as ``settings.executor`` says), `practice_runner` (how a practice game
    is played: a child process by default)."""

    def __init__(
        self,
        db_path: str | Path,
        settings: Settings | None = None,
        *,
        clock: Clock = SYSTEM,
        hosts: HostMaker = ThreadHost,
        executor: Callable[[], Executor] | None = None,
        practice_runner: PracticeRunner | None = None,
    ) -> None:
        settings = settings or Settings()
        if settings.bot_policy is None:
            settings = msgspec.structs.replace(settings, bot_policy=default_policy())
        self.settings = settings
        self.db = AsyncServiceDB(db_path)
        self.db_path = self.db.path
        self.clock = clock
        self.new_host = hosts
        self.executor = executor or executor_factory(
            settings.executor,
            settings.executor_address,
            settings.executor_workers,
            settings.executor_registry,
        )
        #: The runs this service plays (hand-started runs and finals), by run id.
        self.runs: dict[int, RunWork] = {}
        #: The open competitions' ladders, by competition id.
        self.ladders: dict[int, LadderWork] = {}
        self.health = Health(clock)
        # issue 37: with --executor ray --registry the builds and checks run on the cluster's nodes
        self.pipeline: Pipeline = Pipeline(
            self, settings.admission_workers, site=lambda inst: site_for(settings, inst, self.db.data_dir)
        )
        self.practice: PracticeQueue = PracticeQueue(self, practice_runner)
        #: The games watched while they play (their feeds), :mod:`.watch`.
        self.watching = watch.Watching()
        #: The practice games with a person seated, in flight, by practice game id.
        self.human_games: dict[int, human_practice.HumanGame] = {}
        #: Called with a competition's id whenever something of it changed
        #: (a phase, a game recorded, a verdict): the web forgets its cached pages.
        self.listeners: list[Callable[[int], None]] = []
        self._changed = asyncio.Condition() if _has_loop() else None
        self._version = 0
        #: The built-in house bots' images this service built at start, by
        #: built-in name (their image ids); empty: they play as its own commands.
        self.house_images: dict[str, str] = {}
        #: What this install lacks to take the teams' uploads (the docker
        #: package), checked at :meth:`start`; None: ready. The team page
        #: shows it instead of the upload form, and an upload is refused with
        #: it (:meth:`verify_uploads`). A Docker daemon that does not answer
        #: is not here: uploads wait for it (:mod:`.health`).
        self.uploads_missing: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started = False

    # ------------------------------------------------------------ events

    def changed(self, cid: int) -> None:
        """Something of competition `cid` changed (from the service's loop)."""
        for fn in list(self.listeners):
            try:
                fn(cid)
            except Exception:  # noqa: BLE001 - a listener never stops the service
                log.exception("a listener of competition %s's changes", cid)
        self._wake()

    def _wake(self) -> None:
        """Whoever waits in :meth:`until` asks again."""
        self._version += 1
        if self._changed is not None:
            cond = self._changed

            async def wake() -> None:
                async with cond:
                    cond.notify_all()

            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().create_task(wake())

    def changed_threadsafe(self, cid: int) -> None:
        """:meth:`changed` from any thread (a run's or a ladder's host)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.changed(cid)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.changed, cid)

    async def until(self, ready: Callable[[], Awaitable[bool]]) -> None:
        """Wait until `ready()` is true, asking again at each change (no
        clock involved: a test bounds it with its own timeout)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        cond = self._changed
        while True:
            seen = self._version
            if await ready():
                return
            async with cond:  # a change while ready() ran counts: no wait then
                await cond.wait_for(lambda seen=seen: self._version != seen)  # type: ignore[misc]

    # ------------------------------------------------------------ start and stop

    async def start(self) -> None:
        """Open the store, and set the workers going: the admission pipeline,
        the deadlines passed while the service was down, the ladders and
        finals that were playing, the deadline watch and the practice queue."""
        self._loop = asyncio.get_running_loop()
        if self._changed is None:
            self._changed = asyncio.Condition()
        await self.db.open()
        self.uploads_missing = uploads_missing()
        if self.uploads_missing is not None:
            log.warning("the teams' uploads are refused: %s", self.uploads_missing)
        await self.db.call(ServiceDB.mark_stale_runs)
        await self.pipeline.start()
        await deadlines_mod.apply_due(self)  # before the ladders play again
        await ladder_mod.autoplay(self)
        await alerts.sweep(self)
        self._tasks.append(asyncio.create_task(deadlines_mod.watch(self), name="deadlines"))
        await self.practice.start()
        if self.settings.house_images:
            self._tasks.append(asyncio.create_task(self._build_house_images(), name="house images"))
        self.started = True

    async def _build_house_images(self) -> None:
        """The built-in house bots' images, built (or found up to date) from
        the service's own base image, tagged with its instance; from then on
        every house bot of theirs plays as its image. Without Docker they
        play as the service's own programs: said in the log, not an error."""
        from ..bots.house import DEFAULT_HOUSE
        from .health import docker_ok
        from .runs import containers_enabled

        why = "the container bots module is not installed" if not containers_enabled() else None
        why = why or await asyncio.to_thread(docker_ok)
        if why is not None:
            log.info("the built-in house bots play as the service's own programs (%s)", why)
            return

        instance = self.pipeline.instance  # tagged with the service's instance, as its teams' images

        def build() -> dict[str, str]:
            from ..bots.images.baseimage import ensure_sample_images
            from ..bots.sandbox.docker_daemon import docker_client

            client = docker_client()
            tags = ensure_sample_images(DEFAULT_HOUSE, client, log=log.debug, instance=instance)
            return {bot: str(client.images.get(tag).id) for bot, tag in tags.items()}

        began = time.perf_counter()  # the build's real time (the clock may be a test's)
        try:
            images = await asyncio.to_thread(build)
        except Exception as e:  # noqa: BLE001 - the house bots still play, as programs
            log.warning("the built-in house bots' images could not be built, they play as programs: %s", e)
            return
        self.house_images = images
        log.info(
            "the built-in house bots' images are ready (%s) in %.1f s",
            ", ".join(images),
            time.perf_counter() - began,
        )
        self._wake()

    async def stop(self) -> None:
        """Stop everything, in the reverse order: practice, the deadline
        watch, the ladders (their games in flight abandoned: planned, they
        are played at the next start), the runs, the pipeline, the store."""
        await self.practice.stop()
        await human_practice.stop_all(self.human_games)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        ladders = list(self.ladders.values())
        for lad in ladders:
            lad.stop("interrupted", abandon=True)
        for lad in ladders:
            await lad.join(30)
        runs = list(self.runs.values())
        for r in runs:
            r.stop(abandon=True)
        for r in runs:
            await r.join(30)
        await self.pipeline.stop()
        await self.db.close()
        self.started = False

    def run_work(self, run: Run, league: League, *, resume: bool) -> RunWork:
        """A run (a hand-started one, a final) to play on a host of its own; :meth:`RunWork.start` plays it."""
        return RunWork(
            self.db.path,
            run,
            league,
            resume=resume,
            host=self.new_host(f"run-{run.id}"),
            executor=self.executor,
            on_game=lambda _index: self.changed_threadsafe(run.competition_id),
            on_end=lambda: self.changed_threadsafe(run.competition_id),
        )

    # ------------------------------------------------------------ competitions

    async def create_competition(self, name: str, league_text: str | None = None) -> Competition:
        """A new competition (:class:`Invalid` naming 'name', or 'league' and
        its line); no league text (or a blank one): the default league, with
        the built-in house bots (:data:`~referee.service.default_league.DEFAULT_LEAGUE`)."""
        league_text = league_or_default(league_text)
        name = check_name(name, "name", 80, slash=True)
        if await self.db.call(ServiceDB.competition_named, name) is not None:
            raise Invalid(f"a competition named {name!r} exists already", field="name")
        await self.check_league(league_text)
        return await self.db.call(ServiceDB.add_competition, name, league_text)

    async def check_league(self, league_text: str) -> League:
        """A league file the admin sends (a new competition's, or an edit):
        :class:`Invalid` naming the field 'league' and its line, or the house bot refused."""
        try:
            league = check_league_text(league_text, "league")
        except LeagueError as e:
            raise Invalid(f"'league': {e}", field="league") from None
        if league.containers.runtime or any(b.limits is not None and b.limits.runtime for b in league.bots):
            # a runtime the Docker daemon lacks: refused now, not at every team's admission
            from ..bots.base import BotError
            from ..bots.sandbox.docker_daemon import check_runtimes

            try:
                await asyncio.to_thread(
                    check_runtimes, [league.containers, *(league.limits_for(b) for b in league.bots)]
                )
            except BotError as e:
                raise Invalid(f"'league': {e}", field="league") from None
        settings = self.settings
        try:  # a house command bot needs the flag; a house URL bot is where a team's URL may be: refused now
            await pin_house_urls(
                league,
                settings.bot_policy,
                anywhere=settings.house_urls_anywhere,
                allow_commands=settings.allow_house_commands,
            )
        except ServiceError as e:  # the house bot refused: said about the league the admin sends
            raise Invalid(f"'league': {e.message}", field="league") from None
        return league

    async def edit_league(self, cid: int, league_text: str, who: str) -> tuple[LeagueVersion, list[str]]:
        """The competition's new league file, checked as a new competition's is
        (:class:`Invalid` naming 'league' and its line; nothing stored then),
        kept as its next version; an open ladder plays it from its next games
        (:mod:`.edits`). What the edit says: where the ladder took it and what
        it keeps, and what the file holds that has no meaning somewhere."""
        comp = await self.competition(cid)
        league = await self.check_league(league_text)
        await self.db.call(verify_house_names, comp.id, league)
        version = await self.db.call(ServiceDB.set_league, comp.id, league_text, who)
        notes = league_notes(league)
        lad = self.ladders.get(cid)
        if comp.phase == "open" and lad is not None and lad.alive():
            settings = self.settings
            house = await pin_house_text(
                league_text,
                settings.bot_policy,
                anywhere=settings.house_urls_anywhere,
                allow_commands=settings.allow_house_commands,
            )
            merged, kept, _ = await self.db.call(
                latest_ladder_league, await self.competition(cid), lad.league, house
            )
            await self.db.call(store_ladder_league, lad.run.id, merged, version)
            lad.house = house
            await lad.apply_league(merged)
            await ladder_mod.submission_accepted(self, cid)  # its house bots as the version has them
            notes = [f"the open ladder plays version {version.version} from its next games", *kept, *notes]
        self.changed(cid)
        return version, notes

    async def admission_settings(self, cid: int) -> AdmissionSettings:
        """The admission check a submission to the competition plays (what
        ``referee check --competition`` plays the same); :class:`Conflict`
        when the competition's league file is broken."""
        comp = await self.competition(cid)
        try:
            league = check_league_text(comp.league_toml)
        except LeagueError as e:
            raise Conflict(f"the competition's league file is broken (tell the organiser): {e}") from None
        return admission_settings(league, self.settings)

    # ------------------------------------------------------------ the phases

    async def competition(self, cid: int) -> Competition:
        """The competition, or :class:`NotFound`."""
        comp = await self.db.call(ServiceDB.competition, cid)
        if comp is None:
            raise NotFound(f"no competition {cid}")
        return comp

    async def open(self, cid: int, concurrency: int | None = None) -> Run:
        """Open the competition (from setup or frozen): its ladder plays from now on."""
        comp = await self.competition(cid)
        verify_open(comp, self.clock.time(), await self.db.call(deadlines_mod.deadlines_of, comp))
        run = await ladder_mod.open_competition(self, comp, concurrency)
        await alerts.resolve(self, cid, "freeze", "final", "ladder")  # a ladder again: a new story
        self.changed(cid)
        return run

    async def freeze(self, cid: int) -> int:
        """Close submissions; the ladder stops once its games in flight end
        (the ladder's run id; 0: it had none playing)."""
        lad = self.ladders.get(cid)
        rid = lad.run.id if lad is not None else 0
        await ladder_mod.freeze(self, await self.competition(cid))
        await alerts.resolve(self, cid, "freeze", "ladder")  # frozen: no ladder is asked for
        self.changed(cid)
        return rid

    async def start_run(self, cid: int, *, resume: bool = False) -> Run:
        """A run by hand (a competition in setup): a new one with the teams'
        latest bots, or (`resume`) the last one again."""
        comp = await self.competition(cid)
        verify_hand_run(comp)
        settings = self.settings
        try:  # its house URL bots admitted and pinned as teams' URLs are (a resume plays the pins it had)
            house = (
                {}
                if resume
                else await pin_house_text(
                    comp.league_toml,
                    settings.bot_policy,
                    anywhere=settings.house_urls_anywhere,
                    allow_commands=settings.allow_house_commands,
                )
            )
        except ServiceError as e:
            raise e.reworded(f"cannot start: {e.message}") from None
        run, league = await self.db.call(
            prepare_run,
            comp.id,
            resume=resume,
            policy=settings.bot_policy,
            house=house,
            allow_commands=settings.allow_house_commands,
        )
        work = self.runs[run.id] = self.run_work(run, league, resume=resume)
        work.start()
        self.changed(cid)
        return run

    async def stop_run(self, cid: int, rid: int) -> None:
        """Stop a run this service plays (its games in flight abandoned: played again on resume)."""
        work = self.runs.get(rid)
        if work is None or work.run.competition_id != cid or not work.alive():
            raise Conflict(f"run {rid} is not running in this server")
        work.stop(abandon=True)
        await work.join(30)
        self.changed(cid)

    # ------------------------------------------------------------ teams

    async def add_team(self, cid: int, name: str) -> tuple[Team, str]:
        """A new team of the competition and its token (:class:`Invalid` naming 'name')."""
        comp = await self.competition(cid)

        def add(db: ServiceDB) -> tuple[Team, str]:  # checked and added in one go, in the store's thread
            return db.add_team(comp.id, verify_team_name(db, comp, name))

        made = await self.db.call(add)
        self.changed(cid)
        return made

    async def verify_team_name(self, comp: Competition, name: str) -> str:
        """`name` as a new team's name in `comp` (:class:`Invalid` naming 'name')."""
        return await self.db.call(verify_team_name, comp, name)

    async def add_teams(self, cid: int, names: list[str]) -> list[tuple[Team, str]]:
        """New teams (each name checked as :meth:`add_team` checks one) and their tokens."""
        comp = await self.competition(cid)

        def add(db: ServiceDB) -> list[tuple[Team, str]]:
            for name in names:
                verify_team_name(db, comp, name)
            return db.add_teams(comp.id, names)

        made = await self.db.call(add)
        self.changed(cid)
        return made

    async def rename_team(self, team: Team, name: str) -> Team:
        """The team under its new name, checked as a new team's is; an open
        ladder takes it in now (its versions in play keep their entries' names)."""
        comp = await self.competition(team.competition_id)

        def rename(db: ServiceDB) -> None:
            db.rename_team(team.id, verify_team_name(db, comp, name))

        await self.db.call(rename)
        return await self._team_changed(team)

    async def withdraw_team(self, team: Team) -> Team:
        """The team withdrawn: its token stops, its entries retire from an open ladder; its history stays."""
        await self.db.call(ServiceDB.withdraw_team, team.id)
        return await self._team_changed(team)

    async def renew_token(self, team: Team) -> str:
        """A new token for the team (the old one and its sessions stop at once)."""
        verify_has_token(team)
        return await self.db.call(ServiceDB.new_team_token, team.id)

    async def _team_changed(self, team: Team) -> Team:
        await ladder_mod.submission_accepted(self, team.competition_id)
        self.changed(team.competition_id)
        fresh = await self.db.call(ServiceDB.team, team.id)
        assert fresh is not None
        return fresh

    def verify_uploads(self, kind: str) -> None:
        """:class:`~referee.service.errors.NotReady` when a submission of
        `kind` needs Docker and this install lacks it (before an upload
        streams, and again when it is recorded)."""
        verify_uploads_ready(kind, self.uploads_missing)

    async def submit(
        self,
        team: Team,
        *,
        kind: str,
        url: str | None = None,
        image: str | None = None,
        secret: str | None = None,
        note: str = "",
        upload: Path | None = None,
        slot: str | None = None,
    ) -> Submission:
        """Record a team's submission and queue it for its admission check.
        :class:`Conflict` once submissions are closed, :class:`RateLimited`
        over the team's rate, :class:`Unauthorized` when its upload slot was
        revoked (its token replaced while it streamed); refused, its upload
        is deleted. `slot`: the upload slot its file was streamed under
        (:func:`referee.service.disk.begin_upload`), used up here."""
        settings = self.settings
        limit = (settings.submissions_per_window, settings.window_s)
        comp = await self.competition(team.competition_id)
        try:
            verify_submissions_open(comp)
            self.verify_uploads(kind)
            try:
                sub = await self.db.call(
                    ServiceDB.add_submission,
                    team.id,
                    kind=kind,
                    url=url,
                    image=image,
                    secret=secret,
                    note=note,
                    rate_limit=limit,
                    upload=None if upload is None else str(upload),
                    slot=slot,
                )
            except SlotRevoked:
                raise Unauthorized(
                    "the upload was not stored: the team's token was replaced (or the team withdrawn) while "
                    "it streamed, and the old token no longer submits. Upload again with the team's new token "
                    "(on the team page: sign in again with it)",
                ) from None
            if sub is None:
                wait = await self.db.call(ServiceDB.retry_after, team.id, limit[1])
                raise RateLimited(
                    f"too many submissions: at most {settings.submissions_per_window} every "
                    f"{settings.window_s:g} s; try again in {wait:.0f} s",
                    retry_after=wait,
                )
        except ServiceError:
            if upload is not None:
                upload.unlink(missing_ok=True)
            raise
        self.pipeline.enqueue(sub.id)
        self.changed(comp.id)
        return sub

    # ------------------------------------------------------------ practice

    async def ask_practice(self, team: Team, picks: list[str]) -> PracticeGame:
        """A practice game asked for by `team` (its opponents as picked)."""
        game = await ask(self, team, picks)
        self.practice.asked()
        return game

    async def play_practice_human(self, team: Team, picks: list[str]) -> human_practice.HumanGame:
        """A practice game with a member of `team` seated against `picks`,
        playing at once in this process; its seat is the handle's
        (:mod:`.human_practice`). It counts against the team's practice limits."""
        return await human_practice.start(self, self.human_games, team, picks)

    def human_game(self, pid: int, team: Team) -> human_practice.HumanGame:
        """Practice game `pid` of `team` with a person seated, while it plays
        (:class:`NotFound` otherwise, and for any other team)."""
        hg = self.human_games.get(pid)
        if hg is None or hg.team_id != team.id:
            raise NotFound(f"no practice game {pid} with a seat of your team in play")
        return hg

    def live_games(self, cid: int) -> list[watch.LiveGame]:
        """The games of competition `cid` playing now that can be watched (:mod:`.watch`)."""
        return watch.games_in_flight(self, cid)

    def watch_game(self, cid: int, rid: int, idx: int) -> watch.Feed:
        """Watch game `idx` of run `rid` while it plays: its feed, counted
        until :meth:`unwatch` (:class:`NotFound` when it is not playing,
        :class:`RateLimited` past ``max_watchers_per_game``)."""
        return self.watching.join(self, cid, rid, idx, self.settings.max_watchers_per_game)

    def unwatch(self, feed: watch.Feed) -> None:
        self.watching.leave(feed)

    async def start_final(self, cid: int, seed: int | None = None) -> Run:
        """Start the competition's final by hand (a frozen one); its alert, if any, is resolved."""
        run = await ladder_mod.start_final(self, await self.competition(cid), seed)
        await alerts.resolve(self, cid, "final")
        self.changed(cid)
        return run

    # ------------------------------------------------------------ alerts

    async def standing_alerts(self, cid: int) -> list[alerts.Alert]:
        """The alerts that stand for the competition (the service-wide ones too), oldest first."""
        return await alerts.standing(self, cid)

    async def extend_final(self, cid: int, games: int) -> Run:
        """Play `games` more games of the competition's finished, unsettled
        final (:func:`~.rules.verify_extend`): the same run, in the same
        folder, on the same seed, until its order is settled or the new budget spent."""
        await self.competition(cid)  # NotFound first
        run, league = await self.db.call(
            prepare_extension, cid, games, allow_commands=self.settings.allow_house_commands
        )
        work = self.runs[run.id] = self.run_work(run, league, resume=True)
        work.start()
        self.changed(cid)
        return run

    async def final_estimate(self, cid: int) -> tuple[Run | None, list[PairEstimate], int | None]:
        """The final, its unsettled neighbouring pairs with the games each
        needs, and about how many more games would settle the separable ones."""
        final = await self.db.call(ServiceDB.latest_run_of, cid, "final")
        if final is None or final.status == "running":
            return final, [], None
        pairs = await asyncio.to_thread(final_pairs, final)
        table = decode_league(final.league_json).tournament.table_size
        return final, pairs, suggested_games(pairs, table)


def verify_hand_run(comp: Competition) -> None:
    """:class:`Conflict` unless a run may be started by hand: only in setup."""
    if comp.phase != "setup":
        raise Conflict(
            f"competition {comp.id} is {comp.phase}: its ladder and final play by themselves "
            "(a run by hand is for a competition in setup)",
        )


def verify_open(comp: Competition, now: float, d: deadlines_mod.Deadlines) -> None:
    """:class:`Conflict` saying why the competition may not open now."""
    why = deadlines_mod.passed_for_open(d, now)
    if why is not None:
        raise Conflict(f"competition {comp.id} cannot open: {why}")
    if comp.phase not in ("setup", "frozen"):
        raise Conflict(f"competition {comp.id} is {comp.phase}: only a competition in setup or frozen opens")


def can_open(comp: Competition, now: float, d: deadlines_mod.Deadlines) -> bool:
    try:
        verify_open(comp, now, d)
    except ServiceError:
        return False
    return True


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
