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
itself could not check a bot (:mod:`referee.web.health` tells which faults
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
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
from aiohttp import web

from ..admission import AdmissionReport, admit
from ..bots.factory import BotSpec
from ..bots.netpolicy import AddressPolicy, BotURLError, admit_url
from ..bots.sandbox.container_limits import ContainerLimits
from ..bots.sandbox.instance import INSTANCE_LABEL, Instance, current, use
from ..service.store import ServiceDB, Submission, Team
from ..tournament.ladder import entry_name
from ..tournament.league import LeagueError
from .app_state import DB, SETTINGS
from .health import (
    HEALTH,
    Health,
    ServiceFault,
    backoff,
    classify,
    docker_ok,
    refusal_is_service,
    team_reason,
)
from .ladder_service import submission_accepted
from .run_start import check_league_text, house_bots
from .storage import after_accepted, at_start, check_room_to_load

log = logging.getLogger("referee.web.admission_queue")

#: The pipeline's key in the app.
PIPELINE: web.AppKey[Pipeline] = web.AppKey("pipeline")

#: A check still running this long after its budget (a clean-up that hangs) is given up.
CLEANUP_GRACE_S = 30.0


def team_dir(data_dir: Path, tid: int) -> Path:
    """A team's private folder (its uploads, builds and checks), keyed by its
    id, never by its name (two names may make one folder name)."""
    path = data_dir / "teams" / str(int(tid))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def image_tag(tid: int, sid: int, instance: Instance | None = None) -> str:
    """The tag the service gives a team's uploaded image:
    ``referee-<instance id>-team-<tid>:v<sid>`` (default: the process's instance)."""
    return (instance or current()).team_tag(tid, sid)


def service_instance(db: ServiceDB) -> Instance:
    """The service's instance: the id its database keeps (made at the first
    start), its pinned base images in the data folder."""
    return Instance(db.instance_id(), pins_file=db.data_dir / "instance-images.json")


def retag_pinned(inst: Instance, pinned: list[tuple[int, int, str]]) -> list[str]:
    """Give every image a run may play (`pinned`: team, submission, image id)
    its tag of this instance again where another install took it, so a
    daemon-wide ``docker image prune`` never deletes a live bot (blocking).
    The tags set."""
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module

    try:
        client = docker_client()
    except DockerUnavailable:
        return []
    errors = docker_module().errors
    done = []
    for tid, sid, image_id in pinned:
        try:
            tag = inst.ensure_tagged(client, image_id, inst.team_tag(tid, sid))
        except (errors.ImageNotFound, errors.NotFound):
            continue  # removed on purpose (a pruned version): nothing to keep
        except errors.DockerException as e:
            log.warning("could not re-tag image %s: %s", image_id, e)
            continue
        if tag is not None:
            log.warning(
                "image %s had lost its tag (another install re-tagged it): tagged %s again", image_id, tag
            )
            done.append(tag)
    return done


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

    def __init__(self, app: web.Application, workers: int = 1) -> None:
        self.app = app
        self.workers = max(1, workers)
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
        #: Waiting submissions (a service fault): by team, (submission, when it is tried again).
        self._retry: dict[int, tuple[int, float]] = {}
        #: Tries so far of each submission that met a service fault (the back-off).
        self._attempts: dict[int, int] = {}
        #: The last service fault was Docker's: a ping says when it is back.
        self._docker_fault = False
        self._next_probe = 0.0

    async def start(self) -> None:
        db = self.app[DB]
        self._outer = current()
        self.instance = use(await db.call(service_instance))
        await asyncio.to_thread(retag_pinned, self.instance, await db.call(ServiceDB.pinned_images))
        await at_start(self.app)  # issue 24: no upload in flight; prune the images nothing needs
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
        self._tasks = [
            asyncio.create_task(self._intake(), name="admission-intake"),
            asyncio.create_task(self._retrier(), name="admission-retry"),
        ]
        self._tasks += [
            asyncio.create_task(self._worker(), name=f"admission-{i}") for i in range(self.workers)
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self._outer is not None:
            use(self._outer)  # the process's instance as it was (tests run several services)

    def enqueue(self, sid: int) -> None:
        """Queue a submission just made (its team's waiting one, if any, is superseded)."""
        if sid not in self._queued:
            self._queued.add(sid)
            self._inbox.append(sid)
            self._arrived.set()

    async def wait_for(self, sid: int, timeout_s: float = 300.0) -> Submission:
        """The submission once it is accepted, refused or superseded (for tests and the CLI)."""
        db = self.app[DB]
        async with asyncio.timeout(timeout_s):
            while True:
                sub = await db.call(ServiceDB.submission, sid)
                if sub is None or not sub.pending:
                    assert sub is not None, f"no submission {sid}"
                    return sub
                async with self.done:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.done.wait(), 1.0)

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
        sub = await self.app[DB].call(ServiceDB.submission, sid)
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
        old = await self.app[DB].call(ServiceDB.supersede, sid, by)
        if old is not None and old.upload:
            with contextlib.suppress(OSError):
                os.unlink(old.upload)
        log.info("submission %s: replaced by #%s before its check", sid, by)
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

    async def _worker(self) -> None:
        while True:
            tid, sid = await self._take()
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
                self._queued.discard(sid)
                self._running.discard(tid)
                async with self._ready:
                    self._ready.notify_all()
                async with self.done:
                    self.done.notify_all()

    @property
    def health(self) -> Health:
        return self.app[HEALTH]

    async def _wait(self, tid: int, sid: int, fault: ServiceFault) -> None:
        """A service fault: the submission waits, tried again after its back-off; the service is degraded."""
        settings = self.app[SETTINGS]
        now = await self.app[DB].call(ServiceDB.submission, sid)
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
        retry_at = time.time() + backoff(attempt, settings.fault_retry_s, settings.fault_retry_max_s)
        log.warning("submission %s waits (try %d): %s", sid, attempt, fault.cause)
        self._retry[tid] = (sid, retry_at)  # first: tried again even when the database cannot say so
        self._docker_fault = fault.docker
        self._next_probe = time.time() + settings.fault_retry_s
        self.health.fault(fault.cause, min(at for _, at in self._retry.values()), len(self._retry))
        await self.app[DB].call(
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
        settings = self.app[SETTINGS]
        while True:
            await asyncio.sleep(max(0.05, min(1.0, settings.fault_retry_s / 2)))
            now = time.time()
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
        await self.app[DB].call(
            ServiceDB.update_submission, sid, status=status, reason=reason, report=report, **fields
        )

    async def process(self, sid: int) -> None:
        db = self.app[DB]
        settings = self.app[SETTINGS]
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
                reused = await asyncio.to_thread(self._image_exists, sub.image_id)
            if reused is not None:
                image_id = reused
                log.info("submission %s: resumed with its image %s", sid, image_id)
            else:
                made = await asyncio.to_thread(
                    self._make_image, sub, team.id, settings.build_timeout_s, league.containers
                )
                made_id, build_log, why = made
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
        try:
            async with asyncio.timeout(budget + CLEANUP_GRACE_S):
                report: AdmissionReport = await admit(
                    spec,
                    out_dir=folder / f"check-{sid}",
                    rules=league.rules,
                    timeouts=league.timeouts,
                    limits=league.containers,
                    games=settings.validation_games,
                    seat_name=seat_name,
                    opponents=opponents,
                    table_size=league.tournament.table_size,
                    duplicate=league.tournament.duplicate,
                    policy=league.faults,
                    budget_s=budget,
                )
        except TimeoutError:
            await self._finish(
                sid,
                "refused",
                report=None,
                reason=f"the check did not end {CLEANUP_GRACE_S:g} s after its budget of {budget:g} s "
                "(stopping the bot hung): submit again, and if it happens again tell the "
                "organiser",
            )
            return
        text = msgspec.json.encode(report).decode()
        if not report.ok and spec.image is not None:
            cause = await asyncio.to_thread(docker_ok)  # the bot failed, or Docker went away under it?
            if cause is not None:
                raise ServiceFault(cause, docker=True)
        # 3. accepted or refused
        if report.ok:
            await self._finish(sid, "accepted", reason=None, report=text)
            for result in await submission_accepted(self.app, team.competition_id):
                if result.outcome == "unreachable":
                    log.warning(
                        "submission %s: accepted, but the ladder could not reach it: %s", sid, result.reason
                    )
            await after_accepted(self.app, team.id)  # issue 24: its superseded versions' images
        else:
            if sub.kind in ("archive", "source") and spec.image is not None:
                # a refused version never plays: its image need not stay on the disk. Removed
                # before the status says so, so that "refused" is the final state, image gone.
                await asyncio.to_thread(
                    self._remove_image, image_tag(team.id, sid, self.instance), spec.image
                )
            await self._finish(sid, "refused", reason=report.reason, report=text)

    @staticmethod
    def _unlink(path: str | None) -> None:
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)

    @staticmethod
    def _image_exists(image_id: str) -> str | None:
        """The image's id when the daemon has it (blocking); None when it is gone."""
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module

        try:
            client = docker_client()
        except DockerUnavailable as e:
            raise ServiceFault(f"Docker is not reachable: {e}", docker=True) from None
        try:
            return str(client.images.get(image_id).id)
        except docker_module().errors.ImageNotFound:
            return None

    @staticmethod
    def _remove_image(tag: str, image_id: str) -> None:
        from ..bots.images import builds

        with contextlib.suppress(Exception):  # best effort: the daemon may be busy or gone
            builds.remove_image(tag, image_id=image_id)

    def _make_image(
        self, sub: Submission, tid: int, timeout_s: float, limits: ContainerLimits
    ) -> tuple[str | None, str, str | None]:
        """(image id, log, why refused) for an upload or a named image (blocking);
        a source build's compile step runs under the runtime of `limits` (the
        competition's), the operator's ``--runtime`` over it, as its bots do."""
        from ..bots.images.image_archive import load_image_archive
        from ..bots.images.source_build import build_source
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module

        try:
            client = docker_client()
        except DockerUnavailable as e:
            raise ServiceFault(f"Docker is not reachable: {e}", docker=True) from None
        errors = docker_module().errors
        if sub.kind == "image":
            assert sub.image is not None
            try:
                return str(client.images.get(sub.image).id), "", None
            except (errors.ImageNotFound, errors.NotFound) as e:
                return None, "", f"no image {sub.image!r} on this server: {e}"
        if sub.upload is None or not Path(sub.upload).is_file():
            return None, "", "the uploaded file is gone (the server lost it): upload it again"
        labels = {
            "referee.team": str(tid),
            "referee.submission": str(sub.id),
            INSTANCE_LABEL: self.instance.id,
        }
        tag = image_tag(tid, sub.id, self.instance)
        path = Path(sub.upload)
        # the upload stays until its image is recorded (issue 25): a stop here resumes from step 1
        settings = self.app[SETTINGS]
        if sub.kind == "archive":
            data_dir = self.app[DB].data_dir
            try:
                daemon_root = str(client.info().get("DockerRootDir") or "") or None
            except Exception:  # noqa: BLE001 - the load says what is wrong with the daemon
                daemon_root = None
            result = load_image_archive(
                path,
                tag=tag,
                labels=labels,
                client=client,
                timeout_s=timeout_s,
                max_unpacked=settings.max_image_unpacked,
                # issue 32: the disk floor counts what the image unpacks to, before the daemon loads it
                before_load=lambda need: check_room_to_load(
                    data_dir, settings.min_free_disk, need, daemon_root
                ),
            )
        else:
            result = build_source(
                path,
                tag=tag,
                labels=labels,
                client=client,
                timeout_s=timeout_s,
                workdir=path.parent,
                instance=self.instance,
                max_growth_bytes=settings.max_build_growth,
                limits=limits,
            )
        return (result.image_id if result.ok else None), result.log, result.reason


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
        for tag in image.tags:
            if inst.owns_tag(tag):
                with contextlib.suppress(errors.APIError):
                    client.images.remove(tag, force=False, noprune=False)
        with contextlib.suppress(errors.APIError):
            client.images.remove(image.id, force=False, noprune=False)
            removed.append(f"image {image.id}")
    if removed:
        log.warning("instance %s: removed what a stopped process left: %s", inst.id, ", ".join(removed))
    return removed


async def pipeline_ctx(app: web.Application) -> AsyncIterator[None]:
    app[HEALTH] = Health()
    pipeline = Pipeline(app, app[SETTINGS].admission_workers)
    app[PIPELINE] = pipeline
    await pipeline.start()
    yield
    await pipeline.stop()


def default_policy() -> AddressPolicy:
    """Without ``--bot-networks``: public addresses only, this host's refused."""
    return AddressPolicy.for_service()
