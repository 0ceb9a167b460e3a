"""The classroom service's web: :func:`make_app` builds the aiohttp application
over a :class:`~referee.service.classroom.Classroom` (the service itself,
without HTTP).

The pieces, one module each: :mod:`~referee.web.routes` (every URL),
:mod:`~referee.web.handlers` (by concern), :mod:`~referee.web.schemas` (the
request and answer Structs), :mod:`~referee.web.validation`,
:mod:`~referee.web.auth` (tokens), :mod:`~referee.web.data` (what the pages
show, assembled off the loop), :mod:`~referee.web.live` (server-sent events),
:mod:`~referee.web.middlewares` (errors, security headers),
:mod:`~referee.web.pages` (the Jinja2 templates).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from ..service.classroom import Classroom
from ..service.settings import Settings
from . import pages
from .app_state import ROOM
from .boardcache import BOARDS, RENDERED, RENDERED_BYTES, BoardCache, forget
from .data import CACHES, LRU, Caches
from .live import HUB, Hub, poller
from .middlewares import errors_middleware, on_response_prepare
from .routes import setup_routes


async def _room_ctx(app: web.Application) -> AsyncIterator[None]:
    """The service starts with the app and stops with it; a change it
    reports makes the pages of that competition be computed afresh."""
    room = app[ROOM]
    room.listeners.append(lambda cid: forget(app, cid))
    await room.start()
    yield
    await room.stop()


async def _live_ctx(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(poller(app))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await app[BOARDS].close()


async def _end_streams(app: web.Application) -> None:
    app[HUB].close()


def make_app(db_path: str | Path | Classroom, settings: Settings | None = None) -> web.Application:
    """The service over the database at ``db_path`` (created if missing), or
    over a :class:`Classroom` made by the caller (a test's, with its clock).
    The admin token is made by :meth:`ServiceDB.ensure_admin_token` (``referee serve`` does)."""
    room = db_path if isinstance(db_path, Classroom) else Classroom(db_path, settings)
    settings = room.settings
    app = web.Application(middlewares=[errors_middleware], client_max_size=settings.max_body)
    app[ROOM] = room
    app[RENDERED] = LRU(128, RENDERED_BYTES)
    app[HUB] = Hub()
    app[CACHES] = Caches(settings.replay_cache_bytes)
    app[BOARDS] = BoardCache(settings.board_ttl_s, clock=room.clock.monotonic)
    pages.setup(app)
    setup_routes(app)
    app.cleanup_ctx.append(_room_ctx)
    app.cleanup_ctx.append(_live_ctx)
    app.on_shutdown.append(_end_streams)
    app.on_response_prepare.append(on_response_prepare)
    return app


__all__ = ["Settings", "make_app"]
