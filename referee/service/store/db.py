"""The service database: the one object callers hold (:class:`ServiceDB`,
composed of the table groups' classes) and its event-loop wrapper
(:class:`AsyncServiceDB`).

One SQLite file (WAL), given by ``referee serve --db PATH``. It holds only the
service's own tables; each tournament run plays into its own output folder
(``tournament.sqlite``, ``replays/``, standings files: what ``referee
tournament`` writes), and the ``runs`` table points at that folder. Results
are therefore never copied: the leaderboard, bot pages and replays are read
from the run folders, and a restart finds everything where it was.

Tokens are random (32 bytes, URL-safe) and only their SHA-256 is stored; they
are compared with :func:`hmac.compare_digest`.

:class:`ServiceDB` is synchronous and bound to the thread that opened it
(sqlite3's ``check_same_thread``): the command line uses it directly, a run's
thread opens its own. The web service never touches it from the event loop:
:class:`AsyncServiceDB` owns one in a worker thread of its own and runs every
call there, in order.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from .alerts import Alerts
from .base import connect, data_dir_of
from .competitions import Competitions
from .leagues import Leagues
from .meta import Meta
from .runs import Runs
from .schema import SchemaError, newer_than_known, upgrade
from .schema import version as schema_version
from .sessions import Sessions
from .submissions import Submissions
from .teams import Teams
from .uploads import Uploads


class ServiceDB(Meta, Competitions, Alerts, Leagues, Teams, Submissions, Uploads, Sessions, Runs):
    """The service tables. One connection per instance, used only by the
    thread that opened it (sqlite3 refuses any other): open one per thread.
    Opening upgrades the database to this code's schema (:mod:`.schema`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = connect(self.path)
        refusal = newer_than_known(self.version(), self.path)
        if refusal is not None:
            self.db.close()
            raise SchemaError(refusal)
        upgrade(self.db)
        self._private()

    def version(self) -> int:
        """The schema version of the database (``PRAGMA user_version``)."""
        return schema_version(self.db)

    def close(self) -> None:
        self.db.close()


# ------------------------------------------------------- for the event loop

P = ParamSpec("P")
T = TypeVar("T")


class AsyncServiceDB:
    """The service database as the web service uses it: a worker thread of
    its own opens the :class:`ServiceDB` and runs every call, one at a time,
    so no query ever runs on the event loop and the connection stays in the
    thread that made it.

    ``await db.call(ServiceDB.team, tid)``; a function of several queries
    (``fn(service_db, ...)``) runs in one go: ``await db.call(prepare_run, cid, resume=False)``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data_dir = data_dir_of(self.path)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="service-db")
        self._db: ServiceDB | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._db = await loop.run_in_executor(self._pool, ServiceDB, self.path)

    async def call(
        self, fn: Callable[Concatenate[ServiceDB, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(service_db, *args, **kwargs)`` in the database's thread."""
        db = self._db
        if db is None:
            raise RuntimeError("the service database is not open")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, db, *args, **kwargs))

    async def close(self) -> None:
        if self._db is not None:
            await self.call(ServiceDB.close)
            self._db = None
        self._pool.shutdown(wait=False)
