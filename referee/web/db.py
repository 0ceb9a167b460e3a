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
from typing import Concatenate, Literal, ParamSpec, TypeVar, get_args

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
CREATE TABLE IF NOT EXISTS sessions (
    id_sha256 TEXT PRIMARY KEY,    -- the cookie's value is never stored, only its hash
    team_id INTEGER NOT NULL REFERENCES teams(id),
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS admin_sessions (
    id_sha256 TEXT PRIMARY KEY,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS upload_slots (   -- a team's one upload in flight (issue 24)
    team_id INTEGER PRIMARY KEY REFERENCES teams(id),
    token TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS league_versions (   -- every league file a competition had (issue 25)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    version INTEGER NOT NULL,      -- 1, 2, ... per competition
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL,
    who TEXT NOT NULL,             -- 'admin (page)', 'admin (API)', 'at creation'
    UNIQUE (competition_id, version)
);
CREATE TABLE IF NOT EXISTS practice_games (   -- a team's unrated, private practice game (issue 26)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    team_id INTEGER NOT NULL REFERENCES teams(id),
    seats TEXT NOT NULL,           -- JSON: the bots as picked (referee.web.practice.Seat)
    status TEXT NOT NULL,          -- queued, playing, finished, failed
    error TEXT,
    out_dir TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    results TEXT                   -- JSON: each game played (referee.web.practice.Result)
);
CREATE INDEX IF NOT EXISTS practice_team ON practice_games(team_id, id);
"""

#: Columns added since the first schema, with their definitions: an older
#: database gets them at open (its submissions, unchecked then, stay in play
#: as 'accepted').
MIGRATIONS = {
    "submissions": {
        "status": "TEXT NOT NULL DEFAULT 'accepted'",
        "reason": "TEXT",
        "report": "TEXT",
        "log": "TEXT",
        "image_id": "TEXT",
        "address": "TEXT",
        "upload": "TEXT",
        "updated_at": "REAL",
        # issue 25: a service fault's submission waits until then (status 'waiting')
        "retry_at": "REAL",
    },
    "runs": {
        "secrets_from": "TEXT",
        "kind": "TEXT NOT NULL DEFAULT 'run'",
        "league_version": "INTEGER",  # league_versions.id it played (NULL: before versions were kept)
    },
    "teams": {
        "withdrawn_at": "REAL",
    },
    "competitions": {
        "phase": "TEXT NOT NULL DEFAULT 'setup'",
        "ladder_concurrency": "INTEGER",
        "frozen_at": "REAL",
    },
}

#: The schema's numbered upgrade steps (``PRAGMA user_version``): step N
#: takes a database at version N - 1 to N, in one transaction, after the
#: idempotent base (:data:`SCHEMA` and :data:`MIGRATIONS`, which a newer
#: table or column may still join as before). Step 1 is the schema as it was
#: when versions began (nothing to do: the base made it). A step is added at
#: the end, never changed once released; a database whose version is past
#: the last step was written by a newer referee and is refused.
STEPS: tuple[tuple[str, ...], ...] = (
    (),  # 1: the schema of release 90465a8 and after
    ("ALTER TABLE competitions ADD COLUMN deadlines TEXT",),  # 2: freeze_at/final_at set on the admin page
)

#: The schema version this code writes.
SCHEMA_VERSION = len(STEPS)


class SchemaError(RuntimeError):
    """A database this code cannot use (written by a newer referee)."""


#: A competition's life (issue 15): "setup" (the admin starts runs by hand),
#: "open" (the ladder plays all the time; new versions enter at once),
#: "frozen" (submissions closed, the ladder stopped), "final" (the final
#: league of the frozen bots is played, or was).
PHASES = ("setup", "open", "frozen", "final")

#: What a run is: a run started by hand ("run"), a competition's ladder
#: ("ladder", played while it is open) or its final ("final").
RUN_KINDS = ("run", "ladder", "final")

#: A submission's life: queued, then building (an upload made into an
#: image), checking (the admission check), then accepted or refused; or
#: superseded: replaced by the team's newer one before its check began.
#: Or waiting (issue 25): the service itself could not check it (Docker
#: unreachable, the disk full, ...); nothing is wrong with the bot: it is
#: retried at ``retry_at`` (``reason`` says why, for the team and the admin).
SubmissionStatus = Literal["queued", "building", "checking", "accepted", "refused", "superseded", "waiting"]
STATUSES: tuple[SubmissionStatus, ...] = get_args(SubmissionStatus)
PENDING: tuple[SubmissionStatus, ...] = ("queued", "building", "checking", "waiting")

#: A run's life (a run by hand, a ladder, a final): running, then finished
#: (every game played; a ladder: its competition froze), interrupted
#: (stopped, or the service stopped meanwhile: it can be resumed) or failed
#: (its ``error`` says why).
RunStatus = Literal["running", "finished", "interrupted", "failed"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

#: A practice game's life (:mod:`referee.web.practice`): queued, playing,
#: then finished or failed; the first two are in flight.
PracticeStatus = Literal["queued", "playing", "finished", "failed"]
PRACTICE_STATUSES: tuple[PracticeStatus, ...] = get_args(PracticeStatus)

#: How long a signed-in team's session lasts.
SESSION_S = 12 * 3600.0


def data_dir_of(db_path: Path) -> Path:
    """Where the runs' output folders and the teams' folders go: ``<db stem>-data/`` beside the database."""
    return db_path.parent / f"{db_path.stem}-data"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def new_token() -> str:
    """A token of 43 URL-safe characters, never starting with ``-`` (a
    command line would take it for an option, a spreadsheet for a formula)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


class Competition(msgspec.Struct, kw_only=True):
    id: int
    name: str
    league_toml: str
    created_at: float
    #: See :data:`PHASES`.
    phase: str = "setup"
    #: Games at once while the ladder plays (None: the league's ``[ladder]``).
    ladder_concurrency: int | None = None
    #: When submissions closed (the final plays the versions made before).
    frozen_at: float | None = None


class Team(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    name: str
    created_at: float
    #: When the admin withdrew it (its token stopped, it plays no more; its history is kept).
    withdrawn_at: float | None = None


class LeagueVersion(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    #: 1 for the league the competition was created with, then 2, 3, ...
    version: int
    league_toml: str
    created_at: float
    who: str


class Submission(msgspec.Struct, kw_only=True):
    id: int
    team_id: int
    #: 'url', 'image' (an image on the server: the admin's right), 'archive'
    #: (a ``docker save`` upload) or 'source' (a .zip or .tar.gz to build).
    kind: str
    url: str | None
    image: str | None
    secret: str | None
    note: str
    created_at: float
    #: See :data:`SubmissionStatus`.
    status: SubmissionStatus = "accepted"
    #: Why it was refused (one line; the team's own pages only).
    reason: str | None = None
    #: The admission report (JSON of :class:`referee.admission.AdmissionReport`).
    report: str | None = None
    #: The build or load log (capped).
    log: str | None = None
    #: The image id an upload was pinned to.
    image_id: str | None = None
    #: The address a URL bot was pinned to at admission.
    address: str | None = None
    #: The uploaded file waiting to be built.
    upload: str | None = None
    updated_at: float | None = None
    #: When a waiting submission is tried again (issue 25; None otherwise).
    retry_at: float | None = None

    @property
    def pending(self) -> bool:
        return self.status in PENDING


_SUB_COLUMNS = (
    "id, team_id, kind, url, image, secret, note, created_at, status, reason, report, log,"
    " image_id, address, upload, updated_at, retry_at"
)
_SUB_NAMES = _SUB_COLUMNS.replace(" ", "").split(",")


def _submission(row: tuple[object, ...] | None) -> Submission | None:
    return None if row is None else msgspec.convert(dict(zip(_SUB_NAMES, row, strict=True)), Submission)


class Session(msgspec.Struct, kw_only=True):
    team_id: int
    csrf: str
    expires_at: float


class SlotRevoked(Exception):
    """An upload's slot was taken back while it streamed: the team's token
    was replaced, or the team withdrawn (:meth:`ServiceDB.add_submission`)."""

    def __init__(self, tid: int) -> None:
        super().__init__(f"team {tid}'s upload slot was taken back")
        self.team_id = tid


class Run(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    out_dir: str
    league_json: str
    total_games: int
    #: See :data:`RunStatus`.
    status: RunStatus
    error: str | None
    pid: int | None
    started_at: float
    finished_at: float | None
    #: JSON {bot name: submission id}: where the run's bots' secrets are read
    #: from when it starts (they are never copied into league_json).
    secrets_from: str | None = None
    #: See :data:`RUN_KINDS`.
    kind: str = "run"
    #: The id of the :class:`LeagueVersion` it played (None: before versions were kept).
    league_version: int | None = None


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
        self._check_version()
        self.db.executescript(SCHEMA)
        self._migrate()
        self._upgrade()
        self._private()

    def version(self) -> int:
        """The schema version of the database (``PRAGMA user_version``)."""
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _check_version(self) -> None:
        found = self.version()
        if found > SCHEMA_VERSION:
            self.db.close()
            raise SchemaError(
                f"{self.path}: the database is at schema version {found}, written by a newer referee; this one "
                f"knows versions up to {SCHEMA_VERSION}: run the newer referee, or restore a backup made by "
                "this version (referee restore)"
            )

    def _upgrade(self) -> None:
        """Apply the numbered steps the database lacks, each in its own
        transaction with its version (a crash between two leaves a database
        at the earlier one, whole)."""
        while (at := self.version()) < SCHEMA_VERSION:
            with self.transaction() as db:
                if int(db.execute("PRAGMA user_version").fetchone()[0]) != at:
                    continue  # another connection upgraded it meanwhile
                for statement in STEPS[at]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {at + 1}")

    def _migrate(self) -> None:
        for table, columns in MIGRATIONS.items():
            have = {str(r[1]) for r in self.db.execute(f"PRAGMA table_info({table})")}
            for name, definition in columns.items():
                if name not in have:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")

    def _private(self) -> None:
        """The database, its WAL files and the data folder: the service's user only."""
        for path in (
            self.path,
            self.path.with_name(self.path.name + "-wal"),
            self.path.with_name(self.path.name + "-shm"),
        ):
            if path.exists():
                os.chmod(path, 0o600)
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.data_dir, 0o700)

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
        return data_dir_of(self.path)

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

    def instance_id(self) -> str:
        """This install's id on the Docker daemon, made at the first start and
        kept: in every image tag, container name and label the service gives
        (:mod:`referee.bots.instance`), so two installs never take each other's."""
        from ..bots.instance import new_instance_id

        with self.transaction() as db:
            row = db.execute("SELECT value FROM service_meta WHERE key = 'instance_id'").fetchone()
            if row is not None:
                return str(row[0])
            made = new_instance_id()
            db.execute("INSERT INTO service_meta (key, value) VALUES ('instance_id', ?)", (made,))
            return made

    def pinned_images(self) -> list[tuple[int, int, str]]:
        """(team id, submission id, image id) of every upload whose image a run
        may play (not refused): each must keep a tag of this instance."""
        rows = self.db.execute(
            "SELECT team_id, id, image_id FROM submissions WHERE image_id IS NOT NULL"
            " AND kind IN ('archive', 'source') AND status != 'refused' ORDER BY id"
        ).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]

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
            db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " VALUES (?, 1, ?, ?, 'at creation')",
                (cur.lastrowid, league_toml, now),
            )
            return Competition(id=cur.lastrowid, name=name, league_toml=league_toml, created_at=now)

    def competition(self, cid: int) -> Competition | None:
        row = self.db.execute(
            "SELECT id, name, league_toml, created_at, phase, ladder_concurrency, frozen_at FROM competitions"
            " WHERE id = ?",
            (cid,),
        ).fetchone()
        return (
            None
            if row is None
            else Competition(
                id=row[0],
                name=row[1],
                league_toml=row[2],
                created_at=row[3],
                phase=row[4],
                ladder_concurrency=row[5],
                frozen_at=row[6],
            )
        )

    def set_phase(self, cid: int, phase: str, *, concurrency: int | None = None) -> None:
        """Move the competition to `phase` (freezing: submissions close now)."""
        assert phase in PHASES, phase
        frozen = time.time() if phase == "frozen" else None
        self.db.execute(
            "UPDATE competitions SET phase = ?, ladder_concurrency = COALESCE(?, ladder_concurrency),"
            " frozen_at = CASE WHEN ? = 'open' THEN NULL ELSE COALESCE(?, frozen_at) END WHERE id = ?",
            (phase, concurrency, phase, frozen, cid),
        )

    def deadlines(self, cid: int) -> tuple[float | None, float | None] | None:
        """The (freeze_at, final_at) set on the admin page (Unix times, None:
        no such deadline); None: none set there, the league file's apply."""
        row = self.db.execute("SELECT deadlines FROM competitions WHERE id = ?", (cid,)).fetchone()
        if row is None or row[0] is None:
            return None
        both = msgspec.json.decode(str(row[0]), type=tuple[float | None, float | None])
        return both

    def set_deadlines(self, cid: int, times: tuple[float | None, float | None] | None) -> None:
        """Set the competition's deadlines (None: back to the league file's)."""
        value = None if times is None else msgspec.json.encode(times).decode()
        self.db.execute("UPDATE competitions SET deadlines = ? WHERE id = ?", (value, cid))

    def set_frozen_at(self, cid: int, when: float) -> None:
        """Submissions closed at `when` (a deadline applied after it passed)."""
        self.db.execute("UPDATE competitions SET frozen_at = ? WHERE id = ?", (when, cid))

    def competitions_in(self, phase: str) -> list[Competition]:
        ids = [
            int(r[0])
            for r in self.db.execute("SELECT id FROM competitions WHERE phase = ? ORDER BY id", (phase,))
        ]
        return [c for c in (self.competition(i) for i in ids) if c is not None]

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
            "SELECT id, competition_id, name, created_at, withdrawn_at FROM teams WHERE id = ?", (tid,)
        ).fetchone()
        return (
            None
            if row is None
            else Team(id=row[0], competition_id=row[1], name=row[2], created_at=row[3], withdrawn_at=row[4])
        )

    def team_named(self, cid: int, name: str) -> Team | None:
        row = self.db.execute(
            "SELECT id FROM teams WHERE competition_id = ? AND name = ?", (cid, name)
        ).fetchone()
        return None if row is None else self.team(int(row[0]))

    def teams(self, cid: int) -> list[Team]:
        """All the competition's teams, withdrawn ones too (their history is kept)."""
        return [
            Team(id=r[0], competition_id=r[1], name=r[2], created_at=r[3], withdrawn_at=r[4])
            for r in self.db.execute(
                "SELECT id, competition_id, name, created_at, withdrawn_at FROM teams WHERE competition_id = ?"
                " ORDER BY id",
                (cid,),
            )
        ]

    def playing_teams(self, cid: int) -> list[Team]:
        """The teams that play in runs, ladders and finals: all but the withdrawn."""
        return [t for t in self.teams(cid) if t.withdrawn_at is None]

    def team_token_matches(self, tid: int, token: str) -> bool:
        """`token` is the team's and the team is not withdrawn (a withdrawn team's token stops)."""
        row = self.db.execute(
            "SELECT token_sha256 FROM teams WHERE id = ? AND withdrawn_at IS NULL", (tid,)
        ).fetchone()
        return row is not None and hmac.compare_digest(hash_token(token), str(row[0]))

    def team_by_token(self, token: str) -> Team | None:
        """The team whose token this is (looked up by its hash); None for a withdrawn team."""
        row = self.db.execute(
            "SELECT id FROM teams WHERE token_sha256 = ? AND withdrawn_at IS NULL", (hash_token(token),)
        ).fetchone()
        return None if row is None else self.team(int(row[0]))

    # ------------------------------------------- changing a team (issue 25)

    def rename_team(self, tid: int, name: str) -> None:
        """The team's new name (its id, token, submissions and sessions stay)."""
        self.db.execute("UPDATE teams SET name = ? WHERE id = ?", (name, tid))

    def withdraw_team(self, tid: int) -> None:
        """The team leaves: it plays no more, its token stops and its sessions end at once; its history stays."""
        with self.transaction() as db:
            db.execute(
                "UPDATE teams SET withdrawn_at = COALESCE(withdrawn_at, ?) WHERE id = ?", (time.time(), tid)
            )
            db.execute("DELETE FROM sessions WHERE team_id = ?", (tid,))
            db.execute("DELETE FROM upload_slots WHERE team_id = ?", (tid,))  # an upload streaming is refused

    def new_team_token(self, tid: int) -> str:
        """A new token for the team (shown once): the old one stops and the team's sessions end at once,
        and an upload streaming under the old one is refused at its end (its slot is taken back)."""
        token = new_token()
        with self.transaction() as db:
            db.execute("UPDATE teams SET token_sha256 = ? WHERE id = ?", (hash_token(token), tid))
            db.execute("DELETE FROM sessions WHERE team_id = ?", (tid,))
            db.execute("DELETE FROM upload_slots WHERE team_id = ?", (tid,))
        return token

    # ------------------------------------------- league versions (issue 25)

    def _first_version(self, db: sqlite3.Connection, cid: int) -> None:
        """A competition made before versions were kept: its league so far becomes version 1."""
        if db.execute("SELECT 1 FROM league_versions WHERE competition_id = ?", (cid,)).fetchone() is None:
            db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " SELECT id, 1, league_toml, created_at, 'at creation' FROM competitions WHERE id = ?",
                (cid,),
            )

    def set_league(self, cid: int, league_toml: str, who: str) -> LeagueVersion:
        """The competition's new league file (checked by the caller), kept as its next version."""
        now = time.time()
        with self.transaction() as db:
            self._first_version(db, cid)
            number = (
                int(
                    db.execute(
                        "SELECT MAX(version) FROM league_versions WHERE competition_id = ?", (cid,)
                    ).fetchone()[0]
                )
                + 1
            )
            cur = db.execute(
                "INSERT INTO league_versions (competition_id, version, league_toml, created_at, who)"
                " VALUES (?, ?, ?, ?, ?)",
                (cid, number, league_toml, now, who),
            )
            db.execute("UPDATE competitions SET league_toml = ? WHERE id = ?", (league_toml, cid))
            assert cur.lastrowid is not None
            return LeagueVersion(
                id=cur.lastrowid,
                competition_id=cid,
                version=number,
                league_toml=league_toml,
                created_at=now,
                who=who,
            )

    def league_versions(self, cid: int) -> list[LeagueVersion]:
        """The competition's league files, newest first."""
        with self.transaction() as db:
            self._first_version(db, cid)
        return [
            LeagueVersion(
                id=r[0], competition_id=r[1], version=r[2], league_toml=r[3], created_at=r[4], who=r[5]
            )
            for r in self.db.execute(
                "SELECT id, competition_id, version, league_toml, created_at, who FROM league_versions"
                " WHERE competition_id = ? ORDER BY version DESC",
                (cid,),
            )
        ]

    # ------------------------------------------------------------ submissions

    def add_submission(
        self,
        tid: int,
        *,
        kind: str,
        url: str | None,
        image: str | None,
        secret: str | None,
        note: str,
        rate_limit: tuple[int, float] | None = None,
        status: SubmissionStatus = "queued",
        upload: str | None = None,
        slot: str | None = None,
    ) -> Submission | None:
        """Record a submission (queued for its admission check unless
        `status` says otherwise); None (and nothing stored) when the team made
        ``rate_limit[0]`` submissions in the last ``rate_limit[1]`` seconds
        (an upload in flight counts as one). `slot`: the upload slot this
        submission's file was streamed under (:meth:`take_upload_slot`),
        given up here in the same transaction."""
        assert status in STATUSES
        now = time.time()
        with self.transaction() as db:
            if slot is not None:
                gone = db.execute("DELETE FROM upload_slots WHERE team_id = ? AND token = ?", (tid, slot))
                if gone.rowcount == 0:  # the team's token was replaced (or it withdrew) while it streamed
                    raise SlotRevoked(tid)
            if rate_limit is not None:
                count, window = rate_limit
                recent = db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE team_id = ? AND created_at > ?",
                    (tid, now - window),
                ).fetchone()[0]
                recent += db.execute(
                    "SELECT COUNT(*) FROM upload_slots WHERE team_id = ?", (tid,)
                ).fetchone()[0]
                if recent >= count:
                    return None
            cur = db.execute(
                "INSERT INTO submissions (team_id, kind, url, image, secret, note, created_at, status, upload,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (tid, kind, url, image, secret, note, now, status, upload, now),
            )
            assert cur.lastrowid is not None
            sub = self.submission(cur.lastrowid)
            assert sub is not None
            return sub

    def submission(self, sid: int) -> Submission | None:
        return _submission(
            self.db.execute(f"SELECT {_SUB_COLUMNS} FROM submissions WHERE id = ?", (sid,)).fetchone()
        )

    def update_submission(self, sid: int, /, **fields: str | float | None) -> None:
        """Set some of status, reason, report, log, image_id, address, upload, retry_at."""
        allowed = {"status", "reason", "report", "log", "image_id", "address", "upload", "retry_at"}
        unknown = set(fields) - allowed
        assert not unknown, unknown
        assert fields.get("status", "queued") in STATUSES
        names = sorted(fields)
        sets = ", ".join(f"{n} = ?" for n in names)
        self.db.execute(
            f"UPDATE submissions SET {sets}, updated_at = ? WHERE id = ?",
            (*[fields[n] for n in names], time.time(), sid),
        )

    def supersede(self, sid: int, by: int) -> Submission | None:
        """Mark a submission not yet checked as replaced by the team's newer
        one `by` (a final status, with the reason); the submission as it was
        (its upload still to delete), or None when it was no longer pending."""
        with self.transaction() as db:
            sub = self.submission(sid)
            if sub is None or not sub.pending:
                return None
            db.execute(
                "UPDATE submissions SET status = 'superseded', reason = ?, upload = NULL, updated_at = ?"
                " WHERE id = ?",
                (f"replaced by #{int(by)} before its check", time.time(), sid),
            )
            return sub

    def retry_after(self, tid: int, window: float) -> float:
        """Seconds until the oldest submission in the window leaves it."""
        row = self.db.execute(
            "SELECT MIN(created_at) FROM submissions WHERE team_id = ? AND created_at > ?",
            (tid, time.time() - window),
        ).fetchone()
        return 1.0 if row[0] is None else max(1.0, float(row[0]) + window - time.time())

    # ------------------------------------------------------ uploads (issue 24)

    def take_upload_slot(self, tid: int, rate_limit: tuple[int, float]) -> str | tuple[str, float]:
        """Take the team's one upload slot before its file is streamed: a
        token (give it to :meth:`add_submission`, or back with
        :meth:`release_upload_slot`), else ("busy" or "rate", seconds to
        wait): an upload of the team is in flight, or its submissions fill
        the window already."""
        count, window = rate_limit
        now = time.time()
        with self.transaction() as db:
            row = db.execute("SELECT created_at FROM upload_slots WHERE team_id = ?", (tid,)).fetchone()
            if row is not None:
                return "busy", 5.0
            recent = db.execute(
                "SELECT COUNT(*) FROM submissions WHERE team_id = ? AND created_at > ?", (tid, now - window)
            ).fetchone()[0]
            if recent >= count:
                return "rate", self.retry_after(tid, window)
            token = secrets.token_hex(16)
            db.execute(
                "INSERT INTO upload_slots (team_id, token, created_at) VALUES (?, ?, ?)", (tid, token, now)
            )
            return token

    def release_upload_slot(self, tid: int, token: str) -> None:
        """Give the slot back (the upload failed, was too large or empty); nothing once it was used."""
        self.db.execute("DELETE FROM upload_slots WHERE team_id = ? AND token = ?", (tid, token))

    def clear_upload_slots(self) -> None:
        """At the service's start: no upload is in flight (a crash left its slots)."""
        self.db.execute("DELETE FROM upload_slots")

    def image_submissions(self, tid: int | None = None) -> list[Submission]:
        """Submissions with an image the service made (uploads), of team `tid` or all, oldest first."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE kind IN ('archive', 'source')"
            " AND (image_id IS NOT NULL OR upload IS NOT NULL) AND team_id = COALESCE(?, team_id) ORDER BY id",
            (tid,),
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def latest_submission(self, tid: int) -> Submission | None:
        """The team's newest submission, whatever its status."""
        return _submission(
            self.db.execute(
                f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? ORDER BY id DESC LIMIT 1", (tid,)
            ).fetchone()
        )

    def playing_submission(self, tid: int, before: float | None = None) -> Submission | None:
        """The version in play: the team's newest accepted submission (a
        refused or pending one leaves the previous version playing); made
        `before` that time only, when given (the final: before the freeze)."""
        return _submission(
            self.db.execute(
                f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? AND status = 'accepted'"
                " AND created_at <= COALESCE(?, created_at) ORDER BY id DESC LIMIT 1",
                (tid, before),
            ).fetchone()
        )

    def submission_number(self, sid: int) -> int:
        """A submission's number among its team's (1 for the first): its
        version, "v2" on the pages and "team v2" in the ladder. Every
        submission takes the next number when it is made (a superseded or
        refused one too) and keeps it: a version's name never changes, and a
        running ladder's entries keep theirs."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM submissions WHERE team_id = (SELECT team_id FROM submissions WHERE id = ?)"
            " AND id <= ?",
            (sid, sid),
        ).fetchone()
        return int(row[0])

    def submissions(self, tid: int, limit: int = 50, offset: int = 0) -> list[Submission]:
        """The team's submissions, newest first (`offset` of them skipped)."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE team_id = ? ORDER BY id DESC LIMIT ? OFFSET ?",
            (tid, limit, offset),
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def numbered_submissions(
        self, tid: int, limit: int = 50, offset: int = 0
    ) -> list[tuple[Submission, int]]:
        """:meth:`submissions` with each one's :meth:`submission_number`."""
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS}, ROW_NUMBER() OVER (ORDER BY id) FROM submissions WHERE team_id = ?"
            " ORDER BY id DESC LIMIT ? OFFSET ?",
            (tid, limit, offset),
        ).fetchall()
        out = []
        for row in rows:
            sub = _submission(row[:-1])
            if sub is not None:
                out.append((sub, int(row[-1])))
        return out

    def pending_submissions(self) -> list[Submission]:
        """Submissions still to check, oldest first (after a restart: all of
        them again, from the start of their pipeline)."""
        marks = ", ".join("?" * len(PENDING))
        rows = self.db.execute(
            f"SELECT {_SUB_COLUMNS} FROM submissions WHERE status IN ({marks}) ORDER BY id", PENDING
        ).fetchall()
        return [s for s in map(_submission, rows) if s is not None]

    def count_submissions(self, tid: int) -> int:
        return int(
            self.db.execute("SELECT COUNT(*) FROM submissions WHERE team_id = ?", (tid,)).fetchone()[0]
        )

    # --------------------------------------------------------------- sessions

    def new_session(self, tid: int, lifetime_s: float = SESSION_S) -> tuple[str, str]:
        """A signed-in session for team `tid`: (cookie value, CSRF token).
        Only the cookie's hash is stored; expired sessions are swept here."""
        sid, csrf = new_token(), new_token()
        now = time.time()
        with self.transaction() as db:
            db.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
            db.execute(
                "INSERT INTO sessions (id_sha256, team_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                (hash_token(sid), tid, csrf, now, now + lifetime_s),
            )
        return sid, csrf

    def session(self, sid: str) -> Session | None:
        row = self.db.execute(
            "SELECT team_id, csrf, expires_at FROM sessions WHERE id_sha256 = ?", (hash_token(sid),)
        ).fetchone()
        if row is None or float(row[2]) < time.time():
            return None
        return Session(team_id=int(row[0]), csrf=str(row[1]), expires_at=float(row[2]))

    def end_session(self, sid: str) -> None:
        self.db.execute("DELETE FROM sessions WHERE id_sha256 = ?", (hash_token(sid),))

    def new_admin_session(self, lifetime_s: float = SESSION_S) -> tuple[str, str]:
        """A signed-in admin session: (cookie value, CSRF token)."""
        sid, csrf = new_token(), new_token()
        now = time.time()
        with self.transaction() as db:
            db.execute("DELETE FROM admin_sessions WHERE expires_at < ?", (now,))
            db.execute(
                "INSERT INTO admin_sessions (id_sha256, csrf, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (hash_token(sid), csrf, now, now + lifetime_s),
            )
        return sid, csrf

    def admin_session(self, sid: str) -> str | None:
        """The session's CSRF token, or None when there is no such live session."""
        row = self.db.execute(
            "SELECT csrf, expires_at FROM admin_sessions WHERE id_sha256 = ?", (hash_token(sid),)
        ).fetchone()
        return None if row is None or float(row[1]) < time.time() else str(row[0])

    def end_admin_session(self, sid: str) -> None:
        self.db.execute("DELETE FROM admin_sessions WHERE id_sha256 = ?", (hash_token(sid),))

    def add_teams(self, cid: int, names: list[str]) -> list[tuple[Team, str]]:
        """Several teams at once, all or none (a name taken refuses them all): each with its token."""
        out = []
        now = time.time()
        with self.transaction() as db:
            for name in names:
                token = new_token()
                cur = db.execute(
                    "INSERT INTO teams (competition_id, name, token_sha256, created_at) VALUES (?, ?, ?, ?)",
                    (cid, name, hash_token(token), now),
                )
                assert cur.lastrowid is not None
                out.append((Team(id=cur.lastrowid, competition_id=cid, name=name, created_at=now), token))
        return out

    # ------------------------------------------------------------------- runs

    _RUN_COLUMNS = (
        "id, competition_id, out_dir, league_json, total_games, status, error, pid, started_at,"
        " finished_at, secrets_from, kind, league_version"
    )

    def _run(self, row: tuple[object, ...] | None) -> Run | None:
        if row is None:
            return None
        return msgspec.convert(
            dict(zip(self._RUN_COLUMNS.replace(" ", "").split(","), row, strict=True)), Run
        )

    def begin_run(
        self,
        cid: int,
        *,
        out_dir: str,
        league_json: str,
        total_games: int,
        resume_run: int | None = None,
        secrets_from: str | None = None,
        kind: str = "run",
    ) -> Run | str:
        """Mark a run of competition ``cid`` as running (a new one, or
        ``resume_run`` again); a message instead when one is running already."""
        now = time.time()
        with self.transaction() as db:
            for r in db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? AND status = 'running'",
                (cid,),
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
                    "INSERT INTO runs (competition_id, out_dir, league_json, total_games, status, pid, started_at,"
                    " secrets_from, kind, league_version) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?,"
                    " (SELECT MAX(id) FROM league_versions WHERE competition_id = ?))",
                    (cid, out_dir, league_json, total_games, os.getpid(), now, secrets_from, kind, cid),
                )
                assert cur.lastrowid is not None
                rid = cur.lastrowid
            run = self._run(
                db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone()
            )
            assert run is not None
            return run

    def end_run(self, rid: int, status: str, error: str | None = None) -> None:
        """Record the end of run `rid`: `status` is one of :data:`RUN_STATUSES`
        (checked here, where it is stored: the run threads still carry it as
        a plain string)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"not a run status: {status!r} (one of {', '.join(RUN_STATUSES)})")
        self.db.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = ?, pid = NULL WHERE id = ?",
            (status, error, time.time(), rid),
        )

    def set_out_dir(self, rid: int, out_dir: str) -> None:
        self.db.execute("UPDATE runs SET out_dir = ? WHERE id = ?", (out_dir, rid))

    def run(self, rid: int) -> Run | None:
        return self._run(
            self.db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs WHERE id = ?", (rid,)).fetchone()
        )

    def runs(self, cid: int) -> list[Run]:
        rows = self.db.execute(
            f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id", (cid,)
        ).fetchall()
        return [r for r in (self._run(row) for row in rows) if r is not None]

    def latest_run_of(self, cid: int, kind: str) -> Run | None:
        return self._run(
            self.db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
                (cid, kind),
            ).fetchone()
        )

    def latest_run(self, cid: int) -> Run | None:
        return self._run(
            self.db.execute(
                f"SELECT {self._RUN_COLUMNS} FROM runs WHERE competition_id = ? ORDER BY id DESC LIMIT 1",
                (cid,),
            ).fetchone()
        )

    def mark_stale_runs(self) -> int:
        """Runs marked running whose process is gone (a crash, a restart):
        interrupted, to be resumed. How many there were."""
        stale = [
            r
            for r in (
                self._run(row)
                for row in self.db.execute(
                    f"SELECT {self._RUN_COLUMNS} FROM runs WHERE status = 'running'"
                ).fetchall()
            )
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
