"""The classroom service: :func:`make_app` builds the aiohttp application.

The pieces, one module each: :mod:`~referee.web.routes` (every URL),
:mod:`~referee.web.handlers` (by concern), :mod:`~referee.web.schemas` (the
request and answer Structs), :mod:`~referee.web.validation`,
:mod:`~referee.web.auth` (tokens), :mod:`~referee.web.data` (what the pages
show, assembled off the loop), :mod:`~referee.web.live` (server-sent events),
:mod:`~referee.web.middlewares` (errors, security headers),
:mod:`~referee.web.pages` (the Jinja2 templates), :mod:`~referee.service.store`
(the service database, called from its own thread).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
from aiohttp import web

from ..service.store import AsyncServiceDB, ServiceDB
from . import pages
from .admission_queue import default_policy, pipeline_ctx
from .app_state import DB, RUNS, SETTINGS, Settings
from .boardcache import BOARDS, RENDERED, BoardCache
from .data import CACHES, LRU, Caches
from .deadlines import deadlines_ctx, watch_deadlines_ctx
from .ladder_service import LADDERS, ladders_ctx
from .live import HUB, Hub, poller
from .middlewares import errors_middleware, on_response_prepare
from .practice import practice_ctx
from .routes import setup_routes


async def _db_ctx(app: web.Application) -> AsyncIterator[None]:
    """The service database, open in its thread; runs left "running" by a
    process that is gone are marked interrupted."""
    db = app[DB]
    await db.open()
    await db.call(ServiceDB.mark_stale_runs)
    yield
    await db.close()


async def _runs_ctx(app: web.Application) -> AsyncIterator[None]:
    """On the way out, the runs this server plays are stopped (their games in
    flight abandoned: played again on resume)."""
    yield
    threads = list(app[RUNS].values())
    for t in threads:
        t.stop(abandon=True)
    for t in threads:
        await asyncio.to_thread(t.join, 30)


async def _live_ctx(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(poller(app))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await app[BOARDS].close()


async def _end_streams(app: web.Application) -> None:
    app[HUB].close()


def make_app(db_path: str | Path, settings: Settings | None = None) -> web.Application:
    """The service over the database at ``db_path`` (created if missing).
    The admin token is made by :meth:`ServiceDB.ensure_admin_token` (``referee serve`` does)."""
    settings = settings or Settings()
    if settings.bot_policy is None:
        settings = msgspec.structs.replace(settings, bot_policy=default_policy())
    app = web.Application(middlewares=[errors_middleware], client_max_size=settings.max_body)
    app[SETTINGS] = settings
    app[DB] = AsyncServiceDB(db_path)
    app[RUNS] = {}
    app[LADDERS] = {}
    app[RENDERED] = LRU(128)
    app[HUB] = Hub()
    app[CACHES] = Caches(settings.replay_cache_bytes)
    app[BOARDS] = BoardCache(settings.board_ttl_s)
    pages.setup(app)
    setup_routes(app)
    # Order: the database outlives the runs (they record their end in it).
    app.cleanup_ctx.append(_db_ctx)
    app.cleanup_ctx.append(pipeline_ctx)
    app.cleanup_ctx.append(_runs_ctx)
    app.cleanup_ctx.append(
        deadlines_ctx
    )  # deadlines passed while it was down: applied before the ladders play
    app.cleanup_ctx.append(ladders_ctx)
    app.cleanup_ctx.append(watch_deadlines_ctx)
    app.cleanup_ctx.append(practice_ctx)  # practice games (issue 26): stopped before the ladders
    app.cleanup_ctx.append(_live_ctx)
    app.on_shutdown.append(_end_streams)
    app.on_response_prepare.append(on_response_prepare)
    return app


__all__ = ["Settings", "make_app"]
