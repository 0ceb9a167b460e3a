"""Live updates: the leaderboard's data, pushed by server-sent events.

:class:`Hub` keeps the streams open on each competition; :func:`poller`
looks, for competitions someone is watching, whether the latest run changed
(new games, a new status, a new run, a new team; played by this process or
by ``referee start``) and publishes the new data; :func:`events` is the
stream, ``GET /api/competitions/{cid}/events``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import msgspec
from aiohttp import web

from . import data
from .db import Competition, Run, ServiceDB
from .handlers.common import competition_of
from .runs import count_games
from .schemas import Leaderboard
from .state import DB, SETTINGS

log = logging.getLogger("referee.web")

Update = Leaderboard | None  # None: the stream ends


class Hub:
    """The open streams of each competition, as queues of updates."""

    def __init__(self) -> None:
        self.queues: dict[int, set[asyncio.Queue[Update]]] = {}
        #: What each watched competition looked like at the last poll.
        self.versions: dict[int, tuple[object, ...]] = {}
        self.closing = False

    def subscribe(self, cid: int) -> asyncio.Queue[Update]:
        q: asyncio.Queue[Update] = asyncio.Queue(maxsize=16)
        self.queues.setdefault(cid, set()).add(q)
        return q

    def unsubscribe(self, cid: int, q: asyncio.Queue[Update]) -> None:
        self.queues.get(cid, set()).discard(q)

    def publish(self, cid: int, update: Update) -> None:
        for q in list(self.queues.get(cid, ())):
            if q.full():  # a slow reader gets the latest state only
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(update)

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        self.closing = True
        for cid in list(self.queues):
            self.publish(cid, None)


HUB: web.AppKey[Hub] = web.AppKey("hub", Hub)


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``update`` with the leaderboard's data now and
    whenever a game is recorded or the run's status changes."""
    app = request.app
    comp = await competition_of(request)
    hub = app[HUB]
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    q = hub.subscribe(comp.id)
    try:
        run = await app[DB].call(ServiceDB.latest_run, comp.id)
        await _send(resp, await data.leaderboard(app, comp, run))
        heartbeat = app[SETTINGS].heartbeat_s
        while not hub.closing:
            try:
                update = await asyncio.wait_for(q.get(), heartbeat)
            except asyncio.TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if update is None:
                break
            await _send(resp, update)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        hub.unsubscribe(comp.id, q)
    return resp


async def _send(resp: web.StreamResponse, board: Leaderboard) -> None:
    await resp.write(b"event: update\ndata: " + msgspec.json.encode(board) + b"\n\n")


def _watched(db: ServiceDB, cid: int) -> tuple[Competition, Run | None, int] | None:
    """A competition, its latest run and how many teams it has."""
    comp = db.competition(cid)
    if comp is None:
        return None
    return comp, db.latest_run(cid), len(db.teams(cid))


async def poller(app: web.Application) -> None:
    """Publish a competition's data when its latest run changed (new games,
    new status, a new run), for competitions someone is watching."""
    hub, db, settings = app[HUB], app[DB], app[SETTINGS]
    while True:
        await asyncio.sleep(settings.poll_s)
        for cid, queues in list(hub.queues.items()):
            if not queues:
                continue
            try:
                watched = await db.call(_watched, cid)
                if watched is None:
                    continue
                comp, run, teams = watched
                games = await asyncio.to_thread(count_games, run.out_dir) if run else 0
                version = (run.id if run else None, run.status if run else None, games, teams)
                if hub.versions.get(cid) == version:
                    continue
                first = cid not in hub.versions
                hub.versions[cid] = version
                if not first:
                    hub.publish(cid, await data.leaderboard(app, comp, run))
            except Exception:  # noqa: BLE001 - keep polling
                log.exception("live update of competition %s", cid)
