"""The service database: competitions, teams, their tokens and submissions, runs.

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
import hashlib
import hmac
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import msgspec

from ..bots.process import pid_alive

SCHEMA = """
CREATE TABLE IF NOT EXISTS service_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS competitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS teams (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    name TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    UNIQUE (competition_id, name)
);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    kind TEXT NOT NULL,            -- 'url' or 'image'
    url TEXT,
    image TEXT,
    secret TEXT,
    note TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS submissions_team ON submissions(team_id, created_at);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    out_dir TEXT NOT NULL,
    league_json TEXT NOT NULL,     -- the exact league played (for --resume)
    total_games INTEGER NOT NULL,
    status TEXT NOT NULL,          -- running, finished, interrupted, failed
    error TEXT,
    pid INTEGER,
    started_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS runs_competition ON runs(competition_id, id);
"""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Competition(msgspec.Struct, kw_only=True):
    id: int
    name: str
    league_toml: str
    created_at: float


class Team(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    name: str
    created_at: float


class Submission(msgspec.Struct, kw_only=True):
    id: int
    team_id: int
    kind: str
    url: str | None
    image: str | None
    secret: str | None
    note: str
    created_at: float


class Run(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    out_dir: str
    league_json: str
    total_games: int
    status: str
    error: str | None
    pid: int | None
    started_at: float
    finished_at: float | None


class ServiceDB:
    """The service tables. One connection per instance, used only by the
    thread that opened it (sqlite3 refuses any other): open one per thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @property
    def data_dir(self) -> Path:
        """Where the runs' output folders go: ``<db stem>-data/`` beside the database."""
        return self.path.parent / f"{self.path.stem}-data"

    # ------------------------------------------------------------ admin token

    def ensure_admin_token(self, reset: bool = False) -> str | None:
        """Create the admin token if there is none (or ``reset``): the new
        token, to be shown once; None when one exists already."""
        with self.transaction() as db:
            row = db.execute("SELECT value FROM service_meta WHERE key = 'admin_token_sha256'").fetchone()
            if row is not None and not reset:
                return None
            token = new_token()
            db.execute(
                "INSERT OR REPLACE INTO service_meta (key, value) VALUES ('admin_token_sha256', ?)",
                (hash_token(token),),
            )
            return token

    def is_admin(self, token: str) -> bool:
        row = self.db.execute("SELECT value FROM service_meta WHERE key = 'admin_token_sha256'").fetchone()
        return row is not None and hmac.compare_digest(hash_token(token), str(row[0]))

    # ----------------------------------------------------------- competitions

    def add_competition(self, name: str, league_toml: str) -> Competition:
        now = time.time()
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO competitions (name, league_toml, created_at) VALUES (?, ?, ?)",
                (name, league_toml, now),
            )
            assert cur.lastrowid is not None
            return Competition(id=cur.lastrowid, name=name, league_toml=league_toml, created_at=now)

    def competition(self, cid: int) -> Competition | None:
        row = self.db.execute(
            "SELECT id, name, league_toml, created_at FROM competitions WHERE id = ?", (cid,)
        ).fetchone()
        return None if row is None else Competition(id=row[0], name=row[1], league_toml=row[2], created_at=row[3])

    def competition_named(self, name: str) -> Competition | None:
        row = self.db.execute("SELECT id FROM competitions WHERE name = ?", (name,)).fetchone()
        return None if row is None else self.competition(int(row[0]))

    def competitions(self) -> list[Competition]:
        return [
            Competition(id=r[0], name=r[1], league_toml=r[2], created_at=r[3])
            for r in self.db.execute("SELECT id, name, league_toml, created_at FROM competitions ORDER BY id")
        ]

    # ------------------------------------------------------------------ teams

    def add_team(self, cid: int, name: str) -> tuple[Team, str]:
        """A new team and its token (shown once)."""
        token = new_token()
        now = time.time()
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO teams (competition_id, name, token_sha256, created_at) VALUES (?, ?, ?, ?)",
                (cid, name, hash_token(token), now),
            )
            assert cur.lastrowid is not None
            return Team(id=cur.lastrowid, competition_id=cid, name=name, created_at=now), token

    def team(self, tid: int) -> Team | None:
        row = self.db.execute(
            "SELECT id, competition_id, name, created_at FROM teams WHERE id = ?", (tid,)
        ).fetchone()
        return None if row is None else Team(id=row[0], competition_id=row[1], name=row[2], created_at=row[3])

    def team_named(self, cid: int, name: str) -> Team | None:
        row = self.db.execute("SELECT id FROM teams WHERE competition_id = ? AND name = ?", (cid, name)).fetchone()
        return None if row is None else self.team(int(row[0]))

    def teams(self, cid: int) -> list[Team]:
        return [
            Team(id=r[0], competition_id=r[1], name=r[2], created_at=r[3])
            for r in self.db.execute(
                "SELECT id, competition_id, name, created_at FROM teams WHERE competition_id = ? ORDER BY id",
                (cid,),
            )
        ]

    def team_token_matches(self, tid: int, token: str) -> bool:
        row = self.db.execute("SELECT token_sha256 FROM teams WHERE id = ?", (tid,)).fetchone()
        return row is not None and hmac.compare_digest(hash_token(token), str(row[0]))

    def team_by_token(self, token: str) -> Team | None:
        """The team whose token this is (looked up by its hash)."""
        row = self.db.execute("SELECT id FROM teams WHERE token_sha256 = ?", (hash_token(token),)).fetchone()
        return None if row is None else self.team(int(row[0]))

    # ------------------------------------------------------------ submissions

    def add_submission(
        self, tid: int, *, kind: str, url: str | None, image: str | None, secret: str | None, note: str,
        rate_limit: tuple[int, float] | None = None,
    ) -> Submission | None:
        """Record a submission; None (and nothing stored) when the team made
        ``rate_limit[0]`` submissions in the last ``rate_limit[1]`` seconds."""
        now = time.time()
        with self.transaction() as db:
            if rate_limit is not None:
                count, window = rate_limit
                recent = db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE team_id = ? AND created_at > ?", (tid, now - window)
                ).fetchone()[0]
                if recent >= count:
                    return None
            cur = db.execute(
                "INSERT INTO submissions (team_id, kind, url, image, secret, note, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (tid, kind, url, image, secret, note, now),
            )
            assert cur.lastrowid is not None
            return Submission(id=cur.lastrowid, team_id=tid, kind=kind, url=url, image=image, secret=secret,
                              note=note, created_at=now)

    def retry_after(self, tid: int, window: float) -> float:
        """Seconds until the oldest submission in the window leaves it."""
        row = self.db.execute(
            "SELECT MIN(created_at) FROM submissions WHERE team_id = ? AND created_at > ?",
            (tid, time.time() - window),
        ).fetchone()
        return 1.0 if row[0] is None else max(1.0, float(row[0]) + window - time.time())

    def latest_submission(self, tid: int) -> Submission | None:
        row = self.db.execute(
            "SELECT id, team_id, kind, url, image, secret, note, created_at FROM submissions"
            " WHERE team_id = ? ORDER BY id DESC LIMIT 1",
            (tid,),
        ).fetchone()
        return None if row is None else Submission(
            id=row[0], team_id=row[1], kind=row[2], url=row[3], image=row[4], secret=row[5], note=row[6],
            created_at=row[7],
        )

    def count_submissions(self, tid: int) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM submissions WHERE team_id = ?", (tid,)).fetchone()[0])

    # ------------------------------------------------------------------- runs

    _RUN_COLUMNS = ("id, competition_id, out_dir, league_json, total_games, status, error, pid, started_at,"
                    " finished_at")

    def _run(self, row: tuple[object, ...] | None) -> Run | None:
        if row is None:
            return None
        return msgspec.convert(dict(zip(self._RUN_COLUMNS.replace(" ", "").split(","), row, strict=True)), Run)

    def begin_run(self, cid: int, *, out_dir: str, league_json: str, total_games: int,
                  resume_run: int | None = None) -> Run | str:
        """Mark a run of competition ``cid`` as running (a new one, or
        ``resume_run`` again); a message instead when one is running already."""
        now = time.time()
        with self.transaction() as db:
            for r in db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? AND status = 'running'", (cid,)
            ).fetchall():
                run = self._run(r)
                assert run is not None
                if pid_alive(run.pid):
                    return f"run {run.id} of this competition is running already"
                db.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run.id,))
            if resume_run is not None:
                db.execute(
                    "UPDATE runs SET status = 'running', error = NULL, pid = ?, finished_at = NULL WHERE id = ?",
                    (os.getpid(), resume_run),
                )
                rid = resume_run
            else:
                cur = db.execute(
                    "INSERT INTO runs (competition_id, out_dir, league_json, total_games, status, pid, started_at)"
                    " VALUES (?, ?, ?, ?, 'running', ?, ?)",
                    (cid, out_dir, league_json, total_games, os.getpid(), now),
                )
                assert cur.lastrowid is not None
                rid = cur.lastrowid
            run = self._run(db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone())
            assert run is not None
            return run

    def end_run(self, rid: int, status: str, error: str | None = None) -> None:
        self.db.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = ?, pid = NULL WHERE id = ?",
            (status, error, time.time(), rid),
        )

    def set_out_dir(self, rid: int, out_dir: str) -> None:
        self.db.execute("UPDATE runs SET out_dir = ? WHERE id = ?", (out_dir, rid))

    def run(self, rid: int) -> Run | None:
        return self._run(self.db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone())

    def runs(self, cid: int) -> list[Run]:
        rows = self.db.execute(
            f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id", (cid,)
        ).fetchall()
        return [r for r in (self._run(row) for row in rows) if r is not None]

    def latest_run(self, cid: int) -> Run | None:
        return self._run(self.db.execute(
            f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id DESC LIMIT 1", (cid,)
        ).fetchone())

    def mark_stale_runs(self) -> int:
        """Runs marked running whose process is gone (a crash, a restart):
        interrupted, to be resumed. How many there were."""
        stale = [
            r for r in (self._run(row) for row in self.db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE status = 'running'"
            ).fetchall())
            if r is not None and (not pid_alive(r.pid) or r.pid == os.getpid())
        ]
        for r in stale:
            self.db.execute("UPDATE runs SET status = 'interrupted', pid = NULL WHERE id = ?", (r.id,))
        return len(stale)


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
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="service-db")
        self._db: ServiceDB | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._db = await loop.run_in_executor(self._pool, ServiceDB, self.path)

    async def call(self, fn: Callable[Concatenate[ServiceDB, P], T], /, *args: P.args, **kwargs: P.kwargs) -> T:
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
