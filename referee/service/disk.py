"""What a team's uploads may hold of the server's disk (issue 24).

Three guards, all taken before a byte of an upload is read and kept while
it streams (:class:`UploadGuard`):

- **one upload in flight per team**, its submission's slot taken first (in
  the database, atomically with the rate limit: :meth:`ServiceDB.take_upload_slot`)
  and given back when the upload fails, is too large or empty; a second
  upload of the team meanwhile is refused at once (RateLimited, with when to retry);
- **the data disk's floor** (``referee serve --min-free-disk``): below it an
  upload is refused (DiskFull), before its body is read and again while it
  streams. The server's disk, not the team's fault. And an uploaded image
  counts what it unpacks to: before the daemon loads a ``docker save``
  archive, :func:`check_room_to_load` makes its submission wait (a service
  fault, tried again by itself) when its unpacked layers and the archive
  would take the disk below the floor;
- **each team's storage quota** (``--team-image-quota``): the sizes of the
  team's images the service keeps (as the daemon counts them, by the image
  ids of its submissions), its uploads waiting to be built, and the upload in
  flight. Over it the upload is refused (TooLarge), saying what the team uses
  and why each image is kept.

And **pruning** (:func:`prune`): the image of a superseded version is
removed once nothing can need it: not the team's version in play, nor the
version a frozen competition's final plays, nor a run or final that is not
finished (it may be resumed), nor a ladder entry in play or owing planned
games, nor a submission still being checked. Removal is by image id, never
forced (an image a container still uses stays until the next pruning), and
only of an image this service labelled for that team and that submission
(:data:`referee.bots.images.builds.BUILT_BY_LABEL`, ``referee.team``,
``referee.submission``). It runs after each accepted submission, at the
service's start, and before an upload would be refused for its quota.

The Docker calls block: they run in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import msgspec

from ..tournament.ladder import needed_entries
from ..tournament.league import LeagueError
from .errors import Conflict, DiskFull, RateLimited, TooLarge
from .health import ServiceFault
from .room import Room
from .runs import decode_league
from .store import ServiceDB, Team

log = logging.getLogger("referee.service.disk")

#: The disk is looked at again every this many bytes an upload streams.
RECHECK_BYTES = 1 << 20
#: What a second upload of a team in flight is told to wait (seconds).
BUSY_RETRY_S = 5


def _mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


# ------------------------------------------------------------ the disk floor


def free_bytes(path: Path) -> int:
    """Bytes free for this (unprivileged) process on the file system of `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _floor_words(free: int, floor: int) -> str:
    return (
        f"{_mib(max(free, 0))} free, and the service keeps at least {_mib(floor)} free for its "
        "database and games. This is not your team's fault"
    )


def check_disk(data_dir: Path, floor: int, incoming: int = 0) -> None:
    """:class:`DiskFull` when the data folder's disk has less than `floor`
    free (with `incoming` more bytes written)."""
    if floor <= 0:
        return
    free = free_bytes(data_dir)
    if free - incoming < floor:
        raise DiskFull(
            f"the server's disk is full: {_floor_words(free, floor)}: the upload was not stored; try "
            "again later, and tell the organisers"
        )


def check_room_to_load(data_dir: Path, floor: int, need: int, daemon_root: str | None = None) -> None:
    """Before the daemon loads an image that takes `need` bytes of disk
    (:func:`referee.bots.images.image_archive.load_bytes`): a
    :class:`~referee.service.health.ServiceFault` (the submission waits, tried
    again) when the data folder's disk, or the daemon's (`daemon_root`, its
    ``DockerRootDir``, when it is on this machine), would keep less than
    `floor` free. The server's disk, not the team's fault."""
    if floor <= 0:
        return
    seen: set[int] = set()
    for folder in (str(data_dir), daemon_root):
        if not folder:
            continue
        try:
            device = os.stat(folder).st_dev
        except OSError:  # the daemon's folder is on another machine: its disk is not ours to see
            continue
        if device in seen:
            continue
        seen.add(device)
        free = free_bytes(Path(folder))
        if free - need < floor:
            raise ServiceFault(
                f"the server's disk is full: the image takes {_mib(need)} once loaded (unpacked, with "
                f"its archive while it loads), {_floor_words(free, floor)}: nothing was loaded; it is "
                "tried again by itself once there is room (the organisers: free some disk, or lower "
                "--min-free-disk)"
            )


# ------------------------------------------------------------ what needs an image


class Kept(msgspec.Struct, kw_only=True):
    """One of a team's images (or uploads waiting to be built) that the service keeps."""

    submission: int
    version: int
    image_id: str | None
    size: int
    #: Why it is kept (None: nothing needs it; it is pruned).
    why: str | None


def pins(db: ServiceDB) -> dict[str, str]:
    """Every image id something may still start, with the first reason found."""
    out: dict[str, str] = {}

    def pin(image: str | None, why: str) -> None:
        if image:
            out.setdefault(image, why)

    for s in db.pending_submissions():
        pin(s.image_id, "being checked")
    for c in db.competitions():
        comp = db.competition(c.id)
        if comp is None:
            continue
        for team in db.teams(comp.id):
            playing = db.playing_submission(team.id)
            pin(playing.image_id if playing is not None else None, "the version in play")
            if comp.frozen_at is not None:
                final = db.playing_submission(team.id, before=comp.frozen_at)
                pin(final.image_id if final is not None else None, "the version the final plays")
        for run in db.runs(comp.id):
            if run.kind == "ladder":
                # a ladder lives on (it plays again when the competition opens again)
                for e in needed_entries(run.out_dir):
                    pin(e.spec.image, f"the ladder ({'in play' if e.status == 'active' else 'owes games'})")
                continue
            if run.status == "finished":
                continue
            try:
                bots = decode_league(run.league_json).bots
            except (LeagueError, msgspec.DecodeError, msgspec.ValidationError):
                # unreadable: whatever it names stays (an image id appears in it as text)
                for sub in db.image_submissions():
                    if sub.image_id and sub.image_id in run.league_json:
                        pin(sub.image_id, f"{run.kind} {run.id} ({run.status})")
                continue
            for b in bots:
                pin(b.image, f"{run.kind} {run.id} ({run.status}, may be resumed)")
    return out


def team_images(db: ServiceDB, tid: int) -> list[Kept]:
    """The team's images and waiting uploads, each with why it is kept (sizes
    of images still 0: :func:`_measure` asks the daemon)."""
    needed = pins(db)
    out = []
    for sub in db.image_submissions(tid):
        size = 0
        if sub.upload is not None:
            with contextlib.suppress(OSError):
                size = os.stat(sub.upload).st_size
        why = needed.get(sub.image_id or "") if sub.image_id else "waiting to be built"
        out.append(
            Kept(
                submission=sub.id,
                version=db.submission_number(sub.id),
                image_id=sub.image_id,
                size=size,
                why=why,
            )
        )
    return out


def _docker() -> Any | None:
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client

    try:
        return docker_client()
    except DockerUnavailable:
        return None


def _measure(kept: list[Kept]) -> list[Kept]:
    """The images' sizes as the daemon counts them (blocking); images gone are left out."""
    client = _docker()
    out, seen = [], set()
    for k in kept:
        if k.image_id is None:
            out.append(k)
            continue
        if client is None or k.image_id in seen:
            continue
        try:
            attrs = client.api.inspect_image(k.image_id)
        except Exception:  # noqa: BLE001 - gone (pruned), or the daemon's error: not counted
            continue
        seen.add(k.image_id)
        out.append(msgspec.structs.replace(k, size=int(attrs.get("Size") or 0)))
    return out


# ------------------------------------------------------------ pruning


def _remove(client: Any, tid: int, sid: int, image_id: str) -> bool:
    """Remove the image of team `tid`'s submission `sid` by its id, never by
    force, only when the service labelled it so. Whether it went."""
    from ..bots.images.builds import BUILT_BY_LABEL
    from ..bots.sandbox.instance import INSTANCE_LABEL, current

    try:
        attrs = client.api.inspect_image(image_id)
    except Exception:  # noqa: BLE001 - gone already
        return False
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    if (
        labels.get(BUILT_BY_LABEL) != "referee"
        or labels.get(INSTANCE_LABEL) != current().id
        or labels.get("referee.team") != str(tid)
        or labels.get("referee.submission") != str(sid)
    ):
        log.warning(
            "not pruning %s: its labels do not say it is this instance's image of team %s's submission %s",
            image_id,
            tid,
            sid,
        )
        return False
    try:
        # by id, never forced: the daemon refuses while a container uses it, or while a tag
        # other than the service's names it (then it is someone else's too, and stays)
        client.api.remove_image(image_id, force=False, noprune=False)
    except Exception as e:  # noqa: BLE001 - docker's conflict: the next pruning tries again
        log.info("not pruning %s now: %s", image_id, e)
        return False
    return True


def _prune_images(candidates: list[tuple[int, int, str]]) -> list[int]:
    """Remove these (team, submission, image id) images (blocking): the submissions whose image went."""
    if not candidates:
        return []
    client = _docker()
    if client is None:
        return []
    return [sid for tid, sid, image in candidates if _remove(client, tid, sid, image)]


def prunable(db: ServiceDB, tid: int | None = None) -> list[tuple[int, int, str]]:
    """(team, submission, image id) of the images nothing needs, of team `tid` or all."""
    needed = pins(db)
    return [
        (s.team_id, s.id, s.image_id)
        for s in db.image_submissions(tid)
        if s.image_id is not None and s.image_id not in needed and not s.pending
    ]


async def prune(room: Room, tid: int | None = None) -> list[int]:
    """Remove the images of superseded versions nothing needs (of team
    `tid`, or every team's): the submissions whose image went."""
    candidates = await room.db.call(prunable, tid)
    gone = await asyncio.to_thread(_prune_images, candidates)
    for sid in gone:
        log.info("pruned the image of submission %s: superseded, and nothing needs it", sid)
    return gone


async def after_accepted(room: Room, tid: int) -> None:
    """A team's new version was accepted (its previous one superseded): prune the team's images."""
    try:
        await prune(room, tid)
    except Exception:  # noqa: BLE001 - pruning is housekeeping: it never fails a submission
        log.exception("pruning team %s's images", tid)


async def at_start(room: Room) -> None:
    """The service starts: no upload is in flight; prune what nothing needs."""
    await room.db.call(ServiceDB.clear_upload_slots)
    try:
        await prune(room)
    except Exception:  # noqa: BLE001
        log.exception("pruning the teams' images")


# ------------------------------------------------------------ the guard


def _quota_message(used: list[Kept], quota: int, incoming: int) -> str:
    total = sum(k.size for k in used)
    parts = []
    for k in used:
        what = "upload" if k.image_id is None else "image"
        parts.append(f"v{k.version} ({what}, {_mib(k.size)}: {k.why or 'superseded, pruned now'})")
    kept = "; ".join(parts) or "nothing"
    return (
        f"your team's storage quota is {_mib(quota)}: its images and uploads use {_mib(total)} "
        f"({kept}), and this upload ({_mib(incoming)} so far) does not fit. The image of a superseded "
        "version is pruned as soon as no run, ladder or final needs it (a run that is not finished "
        "may be resumed: it needs the versions it plays); make the upload smaller, or wait until a "
        "run that pins an older version is finished"
    )


class UploadGuard:
    """A team's one upload in flight: the slot taken, the disk and the quota
    checked; :meth:`check` while it streams; :meth:`release` at the end
    (after :func:`referee.web.handlers.teams.make_submission` used the
    slot, giving it back does nothing)."""

    def __init__(self, room: Room, team: Team, slot: str, used: list[Kept]) -> None:
        self.room, self.team, self.slot = room, team, slot
        self.used = used
        self.base = sum(k.size for k in used)
        self._next_disk_check = RECHECK_BYTES

    def check(self, size: int) -> None:
        """`size` bytes streamed so far: :class:`DiskFull` below the disk's
        floor, :class:`TooLarge` over the quota."""
        settings = self.room.settings
        if settings.team_image_quota > 0 and self.base + size > settings.team_image_quota:
            raise TooLarge(_quota_message(self.used, settings.team_image_quota, size))
        if size >= self._next_disk_check:
            self._next_disk_check = size + RECHECK_BYTES
            check_disk(self.room.db.data_dir, settings.min_free_disk)

    async def release(self) -> None:
        await self.room.db.call(ServiceDB.release_upload_slot, self.team.id, self.slot)


async def begin_upload(room: Room, team: Team, declared: int | None) -> UploadGuard:
    """Before a byte of the team's upload is read: the submissions still
    open (:class:`Conflict`), the team's slot (:class:`RateLimited` when one
    of its uploads is in flight or its window is full), the disk's floor
    (:class:`DiskFull`) and its quota (:class:`TooLarge`, after pruning what
    nothing needs). `declared`: the request's Content-Length."""
    settings = room.settings
    db = room.db
    comp = await db.call(ServiceDB.competition, team.competition_id)
    if comp is not None and comp.phase in ("frozen", "final"):
        raise Conflict(
            f"submissions are closed: the competition is {comp.phase} (the final plays the versions "
            "accepted before the freeze)"
        )
    got = await db.call(
        ServiceDB.take_upload_slot, team.id, (settings.submissions_per_window, settings.window_s)
    )
    if not isinstance(got, str):
        why, wait = got
        if why == "busy":
            raise RateLimited(
                "an upload of your team is in flight already: one at a time; wait until it is answered",
                retry_after=BUSY_RETRY_S,
            )
        raise RateLimited(
            f"too many submissions: at most {settings.submissions_per_window} every "
            f"{settings.window_s:g} s; try again in {wait:.0f} s",
            retry_after=wait,
        )
    try:
        check_disk(db.data_dir, settings.min_free_disk, declared or 0)
        used: list[Kept] = []
        if settings.team_image_quota > 0:
            used = await _usage(room, team.id)
            incoming = declared or 0
            if sum(k.size for k in used) + incoming > settings.team_image_quota:
                await prune(room, team.id)
                used = await _usage(room, team.id)
                if sum(k.size for k in used) + incoming > settings.team_image_quota:
                    raise TooLarge(_quota_message(used, settings.team_image_quota, incoming))
        guard = UploadGuard(room, team, got, used)
    except BaseException:
        await db.call(ServiceDB.release_upload_slot, team.id, got)
        raise
    room.changed(team.competition_id)  # an upload of the team in flight: whoever waits on it asks again
    return guard


async def _usage(room: Room, tid: int) -> list[Kept]:
    kept = await room.db.call(team_images, tid)
    return await asyncio.to_thread(_measure, kept)


__all__ = [
    "UploadGuard",
    "after_accepted",
    "at_start",
    "begin_upload",
    "check_disk",
    "check_room_to_load",
    "free_bytes",
    "pins",
    "prune",
    "prunable",
]
