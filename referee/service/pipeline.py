"""The submission pipeline: every submission is checked before it may play (issue 14).

One pipeline whatever was submitted:

1. **make it runnable** (status ``building``): a URL is resolved once and
   pinned to its address (:func:`referee.bots.netpolicy.admit_url`, under
   the service's address policy); a ``docker save`` upload is loaded
   (:mod:`referee.bots.images.image_archive`) and a source archive built
   (:mod:`referee.bots.images.source_build`) into an image, tagged
   by the service and pinned by image id; an image named by the admin is
   pinned by its id;
2. **the admission check** (``checking``): :func:`referee.admission.admit`,
   with the competition's rules, timeouts and container limits;
3. ``accepted`` (the team's new version: it enters the competition's ladder
   at once when the competition is open, else the next run plays it) or
   ``refused``, with the reason, the report and the build log on the team's
   own page. A refused submission leaves the team's previous version in play.

The queue lives in the database: a submission is queued when it is made,
and after a restart every one not finished is taken again from step 1.
Uploads are kept (``<data>/teams/<team id>/uploads/``) until their image is
made.

The queue is fair across teams (issue 24: one team's slow bot held the one
worker for minutes per check while another team waited): a team has at most
one submission waiting, a newer one replaces it (``superseded``, with the
reason, its upload deleted) and keeps the team's place; teams are served in
turn, one check per team at a time, over the workers; each check has a total
time budget (``Settings.check_budget_s``, ``referee serve --check-budget``),
over which the bot is refused with its figures. After a restart the queue is
rebuilt the same way from the database.

A service fault is never a team's refusal (issue 25): when the service
itself could not check a bot (:mod:`referee.service.health` tells which faults
are the service's) the submission **waits** (``waiting``, the cause and the
next try kept), is tried again with capped back-off, and goes on by itself
once Docker answers again. And every stop is survived: the upload stays
until its image is made and recorded (a ``checking`` submission resumes with
that image), so a SIGINT, SIGTERM or kill -9 at any stage resumes it at the
next start, where :func:`sweep` first removes what a killed process left:
this instance's images of submissions that no longer need them, its
containers whose referee is gone, and its temporary build folders.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..admission import HOUSE_BOT, AdmissionReport, AdmissionSettings
from ..bots.factory import BotSpec
from ..bots.house import with_image
from ..bots.netpolicy import AddressPolicy, BotURLError, admit_url
from ..bots.sandbox.container_limits import ContainerLimits
from ..bots.sandbox.instance import INSTANCE_LABEL, Instance, current, use
from ..tournament.ladder import entry_name
from ..tournament.league import League, LeagueError
from .check_site import BuildLimits, CheckSite, LocalChecks
from .disk import after_accepted, at_start
from .health import (
    Health,
    ServiceFault,
    backoff,
    classify,
    docker_ok,
    refusal_is_service,
    team_reason,
)
from .ladder import submission_accepted
from .room import Room
from .runs import check_league_text, house_bots
from .settings import Settings
from .store import ServiceDB, Submission, Team

log = logging.getLogger("referee.service.pipeline")

#: A check still running this long after its budget (a clean-up that hangs) is given up.
CLEANUP_GRACE_S = 30.0


def phase_text(phases: dict[str, float]) -> str:
    """A submission's phases as a log line's words: ``queue 1.2 s, build 3.4 s, ...``."""
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()) or "no time spent"


def team_dir(data_dir: Path, tid: int) -> Path:
    """A team's private folder (its uploads, builds and checks), keyed by its
    id, never by its name (two names may make one folder name)."""
    path = data_dir / "teams" / str(int(tid))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def image_tag(tid: int, version: int, instance: Instance | None = None) -> str:
    """The tag the service gives a team's uploaded image:
    ``referee-<instance id>-team-<tid>:v<version>``, `version` the team's
    number of it (:meth:`ServiceDB.submission_number`, "v2" on its pages;
    default instance: the process's)."""
    return (instance or current()).team_tag(tid, version)


def service_instance(db: ServiceDB) -> Instance:
    """The service's instance: the id its database keeps (made at the first
    start), its pinned base images in the data folder."""
    return Instance(db.instance_id(), pins_file=db.data_dir / "instance-images.json")


def retag_pinned(inst: Instance, pinned: list[tuple[int, int, str]]) -> list[str]:
    """Give every image a run may play (`pinned`: team, its version number,
    image id, :meth:`ServiceDB.pinned_images`) its tag of this instance
    again where another install took it, so a daemon-wide ``docker image
    prune`` never deletes a live bot (blocking). An image built before its
    tag named the team's version (``:v<submission id>``) gets its version's
    tag here, at the service's start: the old tag may stay until a newer
    version of that number moves it. The tags set."""
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module

    if not pinned:
        return []
    try:
        client = docker_client()
        errors = docker_module().errors
    except (DockerUnavailable, ImportError):  # no Docker, or no client installed: nothing to keep tagged here
        return []
    done = []
    for tid, version, image_id in pinned:
        try:
            tag = inst.ensure_tagged(client, image_id, inst.team_tag(tid, version))
        except (errors.ImageNotFound, errors.NotFound):
            continue  # removed on purpose (a pruned version): nothing to keep
        except errors.DockerException as e:
            log.warning("could not re-tag image %s: %s", image_id, e)
            continue
        if tag is not None:
            log.warning(
                "image %s lacked its tag (another install took it, or it was tagged with its submission "
                "id before): tagged %s",
                image_id,
                tag,
            )
            done.append(tag)
    return done


def admission_settings(league: League, settings: Settings) -> AdmissionSettings:
    """The admission check of a competition with `league` on this service: its
    validation games, with the service's count and time budget. What the
    pipeline plays, and what ``GET /api/competitions/{cid}/admission`` tells a
    team (``referee check --competition`` plays the same)."""
    return AdmissionSettings.of_league(
        league, games=settings.validation_games, budget_s=settings.check_budget_s
    )


def table_names(db: ServiceDB, sub: Submission) -> tuple[str, list[str]]:
    """The submission's name at its tables and the names a real table could
    seat beside it, as the competition's games name them (its validation games
    look the same): in an open competition the ladder's ``team vN``, else the
    team's name; the league file's house bots and the other teams' versions
    in play."""
    team = db.team(sub.team_id)
    comp = db.competition(team.competition_id) if team is not None else None
    if team is None or comp is None:
        return f"team {sub.team_id}", []
    ladder = comp.phase == "open"

    def name(t: Team, s: Submission) -> str:
        return entry_name(t.name, db.submission_number(s.id)) if ladder else t.name

    try:
        others = house_bots(comp.league_toml)
    except LeagueError:
        others = []
    for other in db.teams(comp.id):
        playing = db.playing_submission(other.id) if other.id != team.id else None
        if playing is not None:
            others.append(name(other, playing))
    return name(team, sub), others


class Pipeline:
    """The workers that take submissions through the pipeline, fairly: each
    team has at most one submission waiting (a newer one supersedes it and
    keeps the team's place), the teams waiting are served in turn, a team has
    one check running at most, and every check has its time budget."""

    def __init__(
        self, room: Room, workers: int | None = 1, site: Callable[[Instance], CheckSite] | None = None
    ) -> None:
        self.room = room
        #: Submissions checked at once; None: as many as the site has places to build (one on
        #: this machine, the cluster's live nodes once joined: :meth:`CheckSite.warm`).
        self.asked = workers
        self.workers = max(1, workers or 1)
        #: Where the builds and checks run (made at :meth:`start`, for the service's instance):
        #: this machine by default (:mod:`referee.service.check_site`).
        self._make_site = site or (lambda inst: LocalChecks(inst, room.db.data_dir))
        self.site: CheckSite | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: Submissions made, their team still to look up (in the order made).
        self._inbox: list[int] = []
        self._arrived = asyncio.Event()
        #: Each team's submission waiting, by team, the teams in their turn (a
        #: dict keeps its order; replacing a value keeps the team's place).
        self._waiting: dict[int, int] = {}
        #: Teams whose check is running.
        self._running: set[int] = set()
        #: When each team's last check began (a count): the team served longest ago goes first.
        self._served: dict[int, int] = {}
        self._turns = 0
        #: Submissions waiting or running here (enqueued twice: taken once).
        self._queued: set[int] = set()
        self._ready = asyncio.Condition()
        #: The service's instance (its database's id), set by :meth:`start`.
        self.instance = current()
        self._outer: Instance | None = None
        #: Submissions finished by this process (tests wait on it).
        self.done = asyncio.Condition()
        #: Submissions finished (or superseded) so far: what :attr:`done` counts.
        self.finished = 0
        #: Waiting submissions (a service fault): by team, (submission, when it is tried again).
        self._retry: dict[int, tuple[int, float]] = {}
        #: Tries so far of each submission that met a service fault (the back-off).
        self._attempts: dict[int, int] = {}
        #: The last service fault was Docker's: a ping says when it is back.
        self._docker_fault = False
        self._next_probe = 0.0
        #: Where each submission's time went, by submission (seconds, accumulated over its tries):
        #: ``queue`` (made to taken), ``build``, ``check`` and ``total`` (taken to verdict), and
        #: what its :class:`CheckSite` adds (on the cluster: ``transfer``, ``node_build``,
        #: ``push``, ``pull``, ``node_check``, ``fetch``). Logged at each verdict (INFO).
        self.phases: dict[int, dict[str, float]] = {}
        #: When each queued submission arrived (``time.perf_counter``): its queue wait.
        self._arrival: dict[int, float] = {}

    async def start(self) -> None:
        db = self.room.db
        self._outer = current()
        self.instance = use(await db.call(service_instance))
        self.site = await asyncio.to_thread(self._make_site, self.instance)
        await asyncio.to_thread(retag_pinned, self.instance, await db.call(ServiceDB.pinned_images))
        await at_start(self.room)  # issue 24: no upload in flight; prune the images nothing needs
        try:  # issue 25: what a killed process left behind
            await db.call(sweep, self.instance)
        except Exception:  # noqa: BLE001 - housekeeping: it never stops the service
            log.exception("sweeping the orphans of instance %s", self.instance.id)
        # After a restart: every submission not finished, oldest first; each team keeps its newest in
        # the place of its oldest (the others are superseded as they would have been).
        pending = await db.call(ServiceDB.pending_submissions)
        newest: dict[int, int] = {}
        for sub in pending:
            newest[sub.team_id] = sub.id
        for sub in pending:
            if newest[sub.team_id] != sub.id:
                await self._supersede(sub.id, newest[sub.team_id])
        for tid, sid in newest.items():
            self._waiting[tid] = sid
            self._queued.add(sid)
            self._arrival[sid] = time.perf_counter()
        self._tasks = [
            asyncio.create_task(self._intake(), name="admission-intake"),
            asyncio.create_task(self._retrier(), name="admission-retry"),
        ]
        self._tasks += [
            asyncio.create_task(self._worker(), name=f"admission-{i}") for i in range(self.workers)
        ]
        if self.site.warm_at_start:
            self._tasks.append(asyncio.create_task(self._warm(self.site), name="admission-warm"))

    async def _warm(self, site: CheckSite) -> None:
        """The site ready before the first submission (the cluster joined, its
        nodes' base images made); with no worker count asked, one per node."""
        try:
            places = await site.warm()
        except Exception as e:  # noqa: BLE001 - the first submission meets it again, and waits
            log.warning("the %s site could not get ready: %s", site.name, e)
            return
        if self.asked is None and places > self.workers:
            log.info("admission: %d workers, one per node of the cluster", places)
            self._tasks += [
                asyncio.create_task(self._worker(), name=f"admission-{i}")
                for i in range(self.workers, places)
            ]
            self.workers = places

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self.site is not None:
            await self.site.close()
            self.site = None
        if self._outer is not None:
            use(self._outer)  # the process's instance as it was (tests run several services)

    def enqueue(self, sid: int) -> None:
        """Queue a submission just made (its team's waiting one, if any, is superseded)."""
        if sid not in self._queued:
            self._queued.add(sid)
            self._arrival.setdefault(sid, time.perf_counter())
            self._inbox.append(sid)
            self._arrived.set()

    async def wait_for(self, sid: int, timeout_s: float = 300.0) -> Submission:
        """The submission once it is accepted, refused or superseded (for tests and the CLI)."""
        db = self.room.db
        async with asyncio.timeout(timeout_s):
            while True:
                seen = self.finished  # before asking: one finished meanwhile is not missed
                sub = await db.call(ServiceDB.submission, sid)
                if sub is None or not sub.pending:
                    assert sub is not None, f"no submission {sid}"
                    return sub
                async with self.done:
                    await self.done.wait_for(lambda seen=seen: self.finished != seen)  # type: ignore[misc]

    async def _intake(self) -> None:
        """Sort the submissions made into their teams' places, one at a time, in the order made."""
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._inbox:
                sid = self._inbox.pop(0)
                try:
                    await self._file(sid)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - one submission must never stop the pipeline
                    log.exception("submission %s", sid)
                    self._queued.discard(sid)

    async def _file(self, sid: int) -> None:
        sub = await self.room.db.call(ServiceDB.submission, sid)
        if sub is None or not sub.pending:
            self._queued.discard(sid)
            return
        replaced = self._waiting.get(sub.team_id)
        if replaced is None and sub.team_id in self._retry and self._retry[sub.team_id][0] != sid:
            replaced = self._retry.pop(sub.team_id)[0]  # a newer upload replaces a waiting one too
        self._waiting[sub.team_id] = sid  # no await since the look-up: no worker took `replaced` meanwhile
        async with self._ready:
            self._ready.notify_all()
        if replaced is not None and replaced != sid:
            self._queued.discard(replaced)
            await self._supersede(replaced, sid)

    async def _supersede(self, sid: int, by: int) -> None:
        """`sid`, not started, replaced by its team's newer `by`: a final status, its upload deleted."""
        old = await self.room.db.call(ServiceDB.supersede, sid, by)
        if old is not None and old.upload:
            with contextlib.suppress(OSError):
                os.unlink(old.upload)
        log.info("submission %s: replaced by #%s before its check", sid, by)
        self.finished += 1
        async with self.done:
            self.done.notify_all()

    async def _take(self) -> tuple[int, int]:
        """The next (team, submission), round robin: of the teams waiting whose
        check is not running, the one served longest ago (never: first), then
        the one waiting longest. So a team that submits again while its check
        runs goes behind every team waiting that was last served before it,
        or never, whenever they came."""
        async with self._ready:
            while True:
                free = [t for t in self._waiting if t not in self._running]
                if free:
                    tid = min(free, key=lambda t: self._served.get(t, 0))  # min keeps the first of equals
                    self._turns += 1
                    self._served[tid] = self._turns
                    self._running.add(tid)
                    return tid, self._waiting.pop(tid)
                await self._ready.wait()

    def _phase(self, sid: int, name: str, seconds: float) -> None:
        phases = self.phases.setdefault(sid, {})
        phases[name] = phases.get(name, 0.0) + seconds

    async def _worker(self) -> None:
        while True:
            tid, sid = await self._take()
            taken = time.perf_counter()
            self._phase(sid, "queue", taken - self._arrival.pop(sid, taken))
            try:
                await self.process(sid)
                self._attempts.pop(sid, None)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - one submission must never stop the pipeline
                fault = classify(e)
                assert fault is not None
                if not isinstance(e, ServiceFault):
                    log.exception("submission %s: a service fault", sid)
                try:
                    await self._wait(tid, sid, fault)
                except Exception:  # noqa: BLE001 - the database itself failed: tried again at the next start
                    log.exception("submission %s: could not record its wait", sid)
            finally:
                self._phase(sid, "total", time.perf_counter() - taken)
                if any(s == sid for s, _ in self._retry.values()):
                    self._arrival[sid] = time.perf_counter()  # waits again: its next wait counts as queue
                else:
                    log.info("submission %s: %s", sid, phase_text(self.phases.get(sid, {})))
                self._queued.discard(sid)
                self._running.discard(tid)
                async with self._ready:
                    self._ready.notify_all()
                self.finished += 1
                async with self.done:
                    self.done.notify_all()

    @property
    def health(self) -> Health:
        return self.room.health

    async def _wait(self, tid: int, sid: int, fault: ServiceFault) -> None:
        """A service fault: the submission waits, tried again after its back-off; the service is degraded."""
        settings = self.room.settings
        now = await self.room.db.call(ServiceDB.submission, sid)
        if now is None or not now.pending:  # it was over (say accepted) when the fault came: it stays so
            log.error(
                "submission %s: a service fault after it was %s: %s", sid, now and now.status, fault.cause
            )
            return
        newer = self._waiting.get(tid)
        if newer is not None and newer != sid:  # the team uploaded again meanwhile: that one goes on
            self._attempts.pop(sid, None)
            await self._supersede(sid, newer)
            return
        attempt = self._attempts[sid] = self._attempts.get(sid, 0) + 1
        retry_at = self.room.clock.time() + backoff(
            attempt, settings.fault_retry_s, settings.fault_retry_max_s
        )
        log.warning("submission %s waits (try %d): %s", sid, attempt, fault.cause)
        self._retry[tid] = (sid, retry_at)  # first: tried again even when the database cannot say so
        self._docker_fault = fault.docker
        self._next_probe = self.room.clock.time() + settings.fault_retry_s
        self.health.fault(fault.cause, min(at for _, at in self._retry.values()), len(self._retry))
        await self.room.db.call(
            ServiceDB.update_submission,
            sid,
            status="waiting",
            reason=team_reason(fault.summary, retry_at),
            retry_at=retry_at,
        )

    def _recovered(self) -> None:
        """The service works again: the banner goes; after Docker's fault every waiting submission goes on now."""
        if self.health.degraded is None:
            return
        self.health.recovered()
        if self._docker_fault:
            self._retry = {tid: (sid, 0.0) for tid, (sid, _) in self._retry.items()}

    async def _retrier(self) -> None:
        """Take the waiting submissions again when their time comes, or all at
        once when Docker, which had failed, answers a ping again."""
        settings = self.room.settings
        while True:
            await self.room.clock.sleep(max(0.05, min(1.0, settings.fault_retry_s / 2)))
            now = self.room.clock.time()
            due = [tid for tid, (_, at) in self._retry.items() if at <= now]
            if self.health.degraded is not None and self._docker_fault and now >= self._next_probe:
                self._next_probe = now + settings.fault_retry_s
                if await asyncio.to_thread(docker_ok) is None:
                    log.warning("Docker answers again: %d waiting submission(s) go on", len(self._retry))
                    self._recovered()
                    due = list(self._retry)
            if not due:
                continue
            for tid in due:
                sid, _ = self._retry.pop(tid)
                self._waiting.setdefault(tid, sid)
            async with self._ready:
                self._ready.notify_all()

    async def _finish(
        self, sid: int, status: str, *, reason: str | None, report: str | None, **fields: str | None
    ) -> None:
        await self.room.db.call(
            ServiceDB.update_submission, sid, status=status, reason=reason, report=report, **fields
        )
        sub = await self.room.db.call(ServiceDB.submission, sid)
        team = await self.room.db.call(ServiceDB.team, sub.team_id) if sub is not None else None
        if team is not None:
            self.room.changed(team.competition_id)

    async def process(self, sid: int) -> None:
        db = self.room.db
        settings = self.room.settings
        sub = await db.call(ServiceDB.submission, sid)
        if sub is None or not sub.pending:
            return
        team = await db.call(ServiceDB.team, sub.team_id)
        assert team is not None
        comp = await db.call(ServiceDB.competition, team.competition_id)
        assert comp is not None
        try:
            league = check_league_text(comp.league_toml)
        except LeagueError as e:
            await self._finish(
                sid, "refused", reason=f"the competition's league file is broken: {e}", report=None
            )
            return
        folder = team_dir(db.data_dir, team.id)
        version = await db.call(ServiceDB.submission_number, sid)  # its image's tag: v<the team's number>
        await db.call(ServiceDB.update_submission, sid, status="building", reason=None, retry_at=None)
        # 1. make it runnable
        spec: BotSpec
        if sub.kind == "url":
            assert sub.url is not None
            try:
                assert settings.bot_policy is not None
                pinned = await admit_url(sub.url, settings.bot_policy)
            except BotURLError as e:
                await self._finish(sid, "refused", reason=str(e), report=None)
                return
            await db.call(ServiceDB.update_submission, sid, address=pinned.address)
            spec = BotSpec(name=team.name, url=pinned.url, address=pinned.address, secret=sub.secret)
        else:
            reused: str | None = None
            image_id: str
            if sub.image_id is not None and sub.kind in ("archive", "source"):
                # made and recorded before a stop: the check goes on with it (its upload is gone)
                assert self.site is not None
                reused = await self.site.find(sub.image_id)
            if reused is not None:
                image_id = reused
                log.info("submission %s: resumed with its image %s", sid, image_id)
            else:
                t0 = time.perf_counter()
                made_id, build_log, why = await self._make_image(sub, team.id, version, league.containers)
                self._phase(sid, "build", time.perf_counter() - t0)
                if made_id is None:
                    fault = refusal_is_service(why)
                    if fault is None and sub.kind != "image":
                        cause = await asyncio.to_thread(docker_ok)  # Docker gone while it worked
                        fault = ServiceFault(cause, docker=True) if cause is not None else None
                    if fault is not None:
                        raise fault  # the upload stays: it waits, tried again
                    await self._finish(sid, "refused", reason=why, report=None, log=build_log, upload=None)
                    self._unlink(sub.upload)
                    return
                image_id = made_id
                # recorded first, the upload deleted after: a stop in between resumes with the image
                await db.call(ServiceDB.update_submission, sid, image_id=image_id, log=build_log, upload=None)
                self._unlink(sub.upload)
            self._recovered()  # Docker made an image: it is there
            spec = BotSpec(name=team.name, image=image_id, secret=sub.secret, limits=league.containers)
        # 2. the admission check, its games seated and named as the competition's are, in its budget
        await db.call(ServiceDB.update_submission, sid, status="checking")
        seat_name, opponents = await db.call(table_names, sub)
        budget = settings.check_budget_s
        assert self.site is not None
        phases = self.phases.setdefault(sid, {})
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(budget + CLEANUP_GRACE_S):
                report: AdmissionReport = await self.site.check(
                    spec,
                    out_dir=folder / f"check-{sid}",
                    settings=admission_settings(league, settings),
                    limits=league.containers,
                    seat_name=seat_name,
                    opponents=opponents,
                    house=with_image(HOUSE_BOT, self.room.house_images),
                    phases=phases,
                )
        except TimeoutError:
            self.site.refused(spec.image or "")
            await self._finish(
                sid,
                "refused",
                report=None,
                reason=f"the check did not end {CLEANUP_GRACE_S:g} s after its budget of {budget:g} s "
                "(stopping the bot hung): submit again, and if it happens again tell the "
                "organiser",
            )
            return
        finally:
            self._phase(sid, "check", time.perf_counter() - t0)
        text = msgspec.json.encode(report).decode()
        if not report.ok and spec.image is not None:
            cause = await asyncio.to_thread(docker_ok)  # the bot failed, or Docker went away under it?
            if cause is not None:
                raise ServiceFault(cause, docker=True)
        # 3. accepted or refused
        made_here = sub.kind in ("archive", "source") and spec.image is not None
        if report.ok:
            if made_here:
                assert spec.image is not None
                # on the coordinator's daemon before it may play (on the cluster: pulled home now, once)
                await self.site.accepted(spec.image, image_tag(team.id, version, self.instance), phases)
            await self._finish(sid, "accepted", reason=None, report=text)
            for result in await submission_accepted(self.room, team.competition_id):
                if result.outcome == "unreachable":
                    log.warning(
                        "submission %s: accepted, but the ladder could not reach it: %s", sid, result.reason
                    )
            await after_accepted(self.room, team.id)  # issue 24: its superseded versions' images
        else:
            if made_here and spec.image is not None:
                self.site.refused(spec.image)
                # a refused version never plays: its image need not stay on the disk. Removed
                # before the status says so, so that "refused" is the final state, image gone.
                await asyncio.to_thread(
                    self._remove_image, image_tag(team.id, version, self.instance), spec.image
                )
            await self._finish(sid, "refused", reason=report.reason, report=text)

    @staticmethod
    def _unlink(path: str | None) -> None:
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)

    @staticmethod
    def _remove_image(tag: str, image_id: str) -> None:
        from ..bots.images import builds

        with contextlib.suppress(Exception):  # best effort: the daemon may be busy or gone
            builds.remove_image(tag, image_id=image_id)

    async def _make_image(
        self, sub: Submission, tid: int, version: int, limits: ContainerLimits
    ) -> tuple[str | None, str, str | None]:
        """(image id, log, why refused) for an upload (made where :attr:`site`
        builds: a source build's compile step runs under the runtime of
        `limits`, the competition's, the operator's ``--runtime`` over it, as
        its bots do) or an image named on this server (looked up here)."""
        if sub.kind == "image":
            return await asyncio.to_thread(self._named_image, sub)
        if sub.upload is None or not Path(sub.upload).is_file():
            return None, "", "the uploaded file is gone (the server lost it): upload it again"
        assert self.site is not None
        # the upload stays until its image is recorded (issue 25): a stop here resumes from step 1
        made = await self.site.build(
            sub.kind,
            Path(sub.upload),
            tid=tid,
            sid=sub.id,
            version=version,
            limits=limits,
            bounds=BuildLimits.of(self.room.settings),
            phases=self.phases.setdefault(sub.id, {}),
        )
        return made.image_id, made.log, made.reason

    @staticmethod
    def _named_image(sub: Submission) -> tuple[str | None, str, str | None]:
        """An image the admin named, by its id on this server's daemon (blocking)."""
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module

        try:
            client = docker_client()
        except DockerUnavailable as e:
            raise ServiceFault(f"Docker is not reachable: {e}", docker=True) from None
        errors = docker_module().errors
        assert sub.image is not None
        try:
            return str(client.images.get(sub.image).id), "", None
        except (errors.ImageNotFound, errors.NotFound) as e:
            return None, "", f"no image {sub.image!r} on this server: {e}"


def sweep(db: ServiceDB, inst: Instance) -> list[str]:
    """What a process of this instance killed mid-way left (blocking; at the
    start, before the pipeline takes anything): its images of submissions
    that do not need them (an image labelled for a submission refused,
    superseded or gone, or not the image its submission recorded: a kill
    mid-build), its containers whose referee process is gone, its temporary
    build folders and the uploads no submission names. Only this instance's:
    every image and container is matched by its ``referee.instance`` label.
    What it removed."""
    from ..bots.sandbox.docker_daemon import (
        DockerUnavailable,
        cleanup_containers,
        docker_client,
        docker_module,
        remove_own_tags,
    )

    removed: list[str] = []
    named = {Path(s.upload).resolve() for s in db.pending_submissions() if s.upload}
    for folder in (db.data_dir / "teams").glob("*/uploads"):
        for entry in folder.iterdir():
            if entry.name.startswith("referee-build-") and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(str(entry))
            elif entry.name.startswith("upload-") and entry.is_file() and entry.resolve() not in named:
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(str(entry))
    try:
        client = docker_client()
    except DockerUnavailable:
        return removed
    errors = docker_module().errors
    removed += [f"container {n}" for n in cleanup_containers(orphans_only=True, client=client, instance=inst)]
    for image in client.images.list(all=True, filters={"label": [inst.label_filter, "referee.submission"]}):
        labels = image.labels or {}
        if labels.get(INSTANCE_LABEL) != inst.id or not labels.get("referee.submission", "").isdigit():
            continue
        sub = db.submission(int(labels["referee.submission"]))
        if (
            sub is not None
            and sub.status not in ("refused", "superseded")
            and sub.image_id == image.id
            and str(sub.team_id) == labels.get("referee.team")
        ):
            continue
        remove_own_tags(client, inst, image.id)
        with contextlib.suppress(errors.APIError):
            client.images.remove(image.id, force=False, noprune=False)
            removed.append(f"image {image.id}")
    if removed:
        log.warning("instance %s: removed what a stopped process left: %s", inst.id, ", ".join(removed))
    return removed


def default_policy() -> AddressPolicy:
    """Without ``--bot-networks``: public addresses only, this host's refused."""
    return AddressPolicy.for_service()
