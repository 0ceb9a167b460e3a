"""The submission pipeline: every submission is checked before it may play (issue 14).

One pipeline whatever was submitted:

1. **make it runnable** (status ``building``): a URL is resolved once and
   pinned to its address (:func:`referee.bots.netpolicy.admit_url`, under
   the service's address policy); a ``docker save`` upload is loaded and a
   source archive built into an image (:mod:`referee.bots.builds`), tagged
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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
from aiohttp import web

from ..admission import AdmissionReport, admit
from ..bots.factory import BotSpec
from ..bots.netpolicy import AddressPolicy, BotURLError, admit_url
from ..tournament.league import LeagueError
from .db import ServiceDB, Submission
from .ladders import submission_accepted
from .runs import check_league_text
from .state import DB, SETTINGS

log = logging.getLogger("referee.web.admissions")

#: The pipeline's key in the app.
PIPELINE: web.AppKey[Pipeline] = web.AppKey("pipeline")


def team_dir(data_dir: Path, tid: int) -> Path:
    """A team's private folder (its uploads, builds and checks), keyed by its
    id, never by its name (two names may make one folder name)."""
    path = data_dir / "teams" / str(int(tid))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def image_tag(tid: int, sid: int) -> str:
    """The tag the service gives a team's uploaded image."""
    return f"referee-team-{int(tid)}:v{int(sid)}"


class Pipeline:
    """The workers that take submissions through the pipeline."""

    def __init__(self, app: web.Application, workers: int = 1) -> None:
        self.app = app
        self.workers = max(1, workers)
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._queued: set[int] = set()
        #: Submissions finished by this process (tests wait on it).
        self.done = asyncio.Condition()

    async def start(self) -> None:
        for sub in await self.app[DB].call(ServiceDB.pending_submissions):
            self.enqueue(sub.id)
        self._tasks = [asyncio.create_task(self._worker(), name=f"admission-{i}") for i in range(self.workers)]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def enqueue(self, sid: int) -> None:
        if sid not in self._queued:
            self._queued.add(sid)
            self.queue.put_nowait(sid)

    async def wait_for(self, sid: int, timeout_s: float = 300.0) -> Submission:
        """The submission once it is accepted or refused (for tests and the CLI)."""
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

    async def _worker(self) -> None:
        while True:
            sid = await self.queue.get()
            try:
                await self.process(sid)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - one submission must never stop the pipeline
                log.exception("submission %s", sid)
                await self._finish(sid, "refused", reason=f"the check could not run: {type(e).__name__}",
                                   report=None)
            finally:
                self._queued.discard(sid)
                async with self.done:
                    self.done.notify_all()

    async def _finish(self, sid: int, status: str, *, reason: str | None, report: str | None,
                      **fields: str | None) -> None:
        await self.app[DB].call(ServiceDB.update_submission, sid, status=status, reason=reason,
                                report=report, **fields)

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
            await self._finish(sid, "refused", reason=f"the competition's league file is broken: {e}",
                               report=None)
            return
        folder = team_dir(db.data_dir, team.id)
        await db.call(ServiceDB.update_submission, sid, status="building")
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
            made = await asyncio.to_thread(self._make_image, sub, team.id, settings.build_timeout_s)
            image_id, build_log, why = made
            if image_id is None:
                await self._finish(sid, "refused", reason=why, report=None, log=build_log, upload=None)
                return
            await db.call(ServiceDB.update_submission, sid, image_id=image_id, log=build_log, upload=None)
            spec = BotSpec(name=team.name, image=image_id, secret=sub.secret,
                           limits=league.containers)
        # 2. the admission check
        await db.call(ServiceDB.update_submission, sid, status="checking")
        report: AdmissionReport = await admit(
            spec, out_dir=folder / f"check-{sid}", rules=league.rules, timeouts=league.timeouts,
            limits=league.containers, games=settings.validation_games)
        text = msgspec.json.encode(report).decode()
        # 3. accepted or refused
        if report.ok:
            await self._finish(sid, "accepted", reason=None, report=text)
            for result in await submission_accepted(self.app, team.competition_id):
                if result.outcome == "unreachable":
                    log.warning("submission %s: accepted, but the ladder could not reach it: %s", sid,
                                result.reason)
        else:
            if sub.kind in ("archive", "source") and spec.image is not None:
                # a refused version never plays: its image need not stay on the disk. Removed
                # before the status says so, so that "refused" is the final state, image gone.
                await asyncio.to_thread(self._remove_image, image_tag(team.id, sid), spec.image)
            await self._finish(sid, "refused", reason=report.reason, report=text)

    @staticmethod
    def _remove_image(tag: str, image_id: str) -> None:
        from ..bots import builds

        with contextlib.suppress(Exception):  # best effort: the daemon may be busy or gone
            builds.remove_image(tag, image_id=image_id)

    def _make_image(self, sub: Submission, tid: int, timeout_s: float) -> tuple[str | None, str, str | None]:
        """(image id, log, why refused) for an upload or a named image (blocking)."""
        from ..bots import builds
        from ..bots.container import DockerUnavailable, docker_client

        try:
            client = docker_client()
        except DockerUnavailable as e:
            return None, "", f"containers are not available on this server: {e}"
        if sub.kind == "image":
            assert sub.image is not None
            try:
                return str(client.images.get(sub.image).id), "", None
            except Exception as e:  # noqa: BLE001 - docker's errors
                return None, "", f"no image {sub.image!r} on this server: {e}"
        if sub.upload is None or not Path(sub.upload).is_file():
            return None, "", "the uploaded file is gone (the server lost it): upload it again"
        labels = {"referee.team": str(tid), "referee.submission": str(sub.id)}
        path = Path(sub.upload)
        try:
            if sub.kind == "archive":
                result = builds.load_image_archive(path, tag=image_tag(tid, sub.id), labels=labels, client=client,
                                                   timeout_s=timeout_s,
                                                   max_unpacked=self.app[SETTINGS].max_image_unpacked)
            else:
                result = builds.build_source(path, tag=image_tag(tid, sub.id), labels=labels, client=client,
                                             timeout_s=timeout_s, workdir=path.parent)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return (result.image_id if result.ok else None), result.log, result.reason


async def pipeline_ctx(app: web.Application) -> AsyncIterator[None]:
    pipeline = Pipeline(app, app[SETTINGS].admission_workers)
    app[PIPELINE] = pipeline
    await pipeline.start()
    yield
    await pipeline.stop()


def default_policy() -> AddressPolicy:
    """Without ``--bot-networks``: public addresses only, this host's refused."""
    return AddressPolicy.for_service()
