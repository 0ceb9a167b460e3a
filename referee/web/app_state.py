"""The app's state every handler reads: the one :class:`Classroom` (the
service without HTTP: settings, store, workers, clock).

Each of the web's own resources is made and closed by
:func:`referee.web.app.make_app`; the keys of the live updates
(:data:`referee.web.live.HUB`) and of the caches (:data:`referee.web.data.CACHES`,
:data:`referee.web.boardcache.BOARDS`) sit with their code.
"""

from __future__ import annotations

from aiohttp import web

from ..service.classroom import Classroom
from ..service.settings import Settings

#: Seconds a refused live stream is told to wait (``Retry-After``), and that
#: the pages' script waits (more a jitter) before it asks again.
STREAM_RETRY_S = 10

#: The service the app serves.
ROOM: web.AppKey[Classroom] = web.AppKey("room", Classroom)

__all__ = ["ROOM", "STREAM_RETRY_S", "Settings"]
