"""The service database's schema: one ordered list of steps, from the first
version on (issue 33). Datasette's shape: each step named, applied once, in
order, in a transaction of its own that also sets ``PRAGMA user_version``
to its number, so a crash between two steps leaves a database at the
earlier one, whole.

A new table or column is a new step at the end of :data:`STEPS`, never a
change to one released; a database whose version is past the last step was
written by a newer referee and is refused (:class:`SchemaError`).

The databases written before this list (0.2.0 and before) kept their
schema by two mechanisms: a base made again at every open (``CREATE TABLE
IF NOT EXISTS`` and columns added where missing, unnumbered) and numbered
steps after it (``user_version`` 1 and 2). Their number says little about
which tables they hold, so a database at version :data:`LEGACY_LAST` or
below is looked at: it goes on from its first step missing. Every step up
to :data:`LEGACY_STEPS` is therefore made of :class:`Table`,
:class:`Index` and :class:`Column` changes that skip what is there already.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec

from .base import transaction


class SchemaError(RuntimeError):
    """A database this code cannot use (written by a newer referee)."""


class Table(msgspec.Struct, frozen=True):
    """A new table (``CREATE TABLE IF NOT EXISTS``)."""

    name: str
    sql: str


class Index(msgspec.Struct, frozen=True):
    """A new index (``CREATE INDEX IF NOT EXISTS``)."""

    name: str
    sql: str


class Column(msgspec.Struct, frozen=True):
    """A new column of an existing table, with its definition."""

    table: str
    name: str
    definition: str


Change = Table | Index | Column


class Step(msgspec.Struct, frozen=True):
    #: What the step is for, and since when (the commit or issue that made it).
    name: str
    changes: tuple[Change, ...]


STEPS: tuple[Step, ...] = (
    Step(
        "1: the first schema (referee serve, c6974f8): competitions, teams, their submissions, runs",
        (
            Table(
                "service_meta",
                "CREATE TABLE IF NOT EXISTS service_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            ),
            Table(
                "competitions",
                """CREATE TABLE IF NOT EXISTS competitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL
)""",
            ),
            Table(
                "teams",
                """CREATE TABLE IF NOT EXISTS teams (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    name TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    UNIQUE (competition_id, name)
)""",
            ),
            Table(
                "submissions",
                """CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    kind TEXT NOT NULL,            -- 'url' or 'image'
    url TEXT,
    image TEXT,
    secret TEXT,
    note TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
)""",
            ),
            Index(
                "submissions_team",
                "CREATE INDEX IF NOT EXISTS submissions_team ON submissions(team_id, created_at)",
            ),
            Table(
                "runs",
                """CREATE TABLE IF NOT EXISTS runs (
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
)""",
            ),
            Index(
                "runs_competition", "CREATE INDEX IF NOT EXISTS runs_competition ON runs(competition_id, id)"
            ),
        ),
    ),
    Step(
        "2: submissions check themselves, a team signs in (issue 14)",
        (
            Table(
                "sessions",
                """CREATE TABLE IF NOT EXISTS sessions (
    id_sha256 TEXT PRIMARY KEY,    -- the cookie's value is never stored, only its hash
    team_id INTEGER NOT NULL REFERENCES teams(id),
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
)""",
            ),
            # an older database's submissions, unchecked then, stay in play as 'accepted'
            Column("submissions", "status", "TEXT NOT NULL DEFAULT 'accepted'"),
            Column("submissions", "reason", "TEXT"),
            Column("submissions", "report", "TEXT"),
            Column("submissions", "log", "TEXT"),
            Column("submissions", "image_id", "TEXT"),
            Column("submissions", "address", "TEXT"),
            Column("submissions", "upload", "TEXT"),
            Column("submissions", "updated_at", "REAL"),
            Column("runs", "secrets_from", "TEXT"),
        ),
    ),
    Step(
        "3: the admin signs in on its pages (issue 15)",
        (
            Table(
                "admin_sessions",
                """CREATE TABLE IF NOT EXISTS admin_sessions (
    id_sha256 TEXT PRIMARY KEY,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
)""",
            ),
        ),
    ),
    Step(
        "4: a competition's phases, its ladder and final (issue 15)",
        (
            Column("runs", "kind", "TEXT NOT NULL DEFAULT 'run'"),
            Column("competitions", "phase", "TEXT NOT NULL DEFAULT 'setup'"),
            Column("competitions", "ladder_concurrency", "INTEGER"),
            Column("competitions", "frozen_at", "REAL"),
        ),
    ),
    Step(
        "5: a team's one upload in flight (issue 24)",
        (
            Table(
                "upload_slots",
                """CREATE TABLE IF NOT EXISTS upload_slots (   -- a team's one upload in flight (issue 24)
    team_id INTEGER PRIMARY KEY REFERENCES teams(id),
    token TEXT NOT NULL,
    created_at REAL NOT NULL
)""",
            ),
        ),
    ),
    Step(
        "6: every league file a competition had, the one each run played; teams withdrawn (issue 25)",
        (
            Table(
                "league_versions",
                """CREATE TABLE IF NOT EXISTS league_versions (   -- every league file a competition had (issue 25)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    version INTEGER NOT NULL,      -- 1, 2, ... per competition
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL,
    who TEXT NOT NULL,             -- 'admin (page)', 'admin (API)', 'at creation'
    UNIQUE (competition_id, version)
)""",
            ),
            # league_versions.id it played (NULL: before versions were kept)
            Column("runs", "league_version", "INTEGER"),
            Column("teams", "withdrawn_at", "REAL"),
        ),
    ),
    Step(
        "7: a service fault's submission waits until retry_at (issue 25)",
        (Column("submissions", "retry_at", "REAL"),),
    ),
    Step(
        "8: practice games (issue 26)",
        (
            Table(
                "practice_games",
                """CREATE TABLE IF NOT EXISTS practice_games (   -- a team's unrated, private practice game (issue 26)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    team_id INTEGER NOT NULL REFERENCES teams(id),
    seats TEXT NOT NULL,           -- JSON: the bots as picked (referee.service.store.practice.Seat)
    status TEXT NOT NULL,          -- queued, playing, finished, failed
    error TEXT,
    out_dir TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    results TEXT                   -- JSON: each game played (referee.service.store.practice.Result)
)""",
            ),
            Index("practice_team", "CREATE INDEX IF NOT EXISTS practice_team ON practice_games(team_id, id)"),
        ),
    ),
    Step(
        "9: freeze_at/final_at set on the admin page (f8a5f4c)",
        (Column("competitions", "deadlines", "TEXT"),),
    ),
    Step(
        "10: alerts, an automatic step that could not go on (issue 34)",
        (
            Table(
                "alerts",
                """CREATE TABLE IF NOT EXISTS alerts (   -- an automatic step that could not go on (issue 34)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER REFERENCES competitions(id),   -- NULL: the whole service (admission)
    step TEXT NOT NULL,            -- freeze, final, ladder, admission
    cause TEXT NOT NULL,
    action TEXT NOT NULL,          -- what the teacher does
    public TEXT NOT NULL,          -- what the leaderboard says (nothing private)
    first_at REAL NOT NULL,
    last_at REAL NOT NULL,
    resolved_at REAL               -- NULL: it stands
)""",
            ),
            Index(
                "alerts_standing",
                "CREATE INDEX IF NOT EXISTS alerts_standing ON alerts(competition_id, step, resolved_at)",
            ),
        ),
    ),
)

#: The schema version this code writes.
SCHEMA_VERSION = len(STEPS)
#: The last ``user_version`` the two mechanisms of 0.2.0 wrote: at this
#: version or below, a database goes on from its first step missing.
LEGACY_LAST = 2
#: The steps a database of the old mechanisms may hold in part (each change
#: skips what is there): all of those above. A step added later runs once.
LEGACY_STEPS = 9


def version(db: sqlite3.Connection) -> int:
    """The schema version of the database (``PRAGMA user_version``)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def newer_than_known(found: int, path: Path) -> str | None:
    """The refusal of a database at schema version `found`, when this code does not know it."""
    if found <= SCHEMA_VERSION:
        return None
    return (
        f"{path}: the database is at schema version {found}, written by a newer referee; this one "
        f"knows versions up to {SCHEMA_VERSION}: run the newer referee, or restore a backup made by "
        "this version (referee restore)"
    )


def tables(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Every table of the database with its columns, in order (``PRAGMA table_info``)."""
    names = [
        str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    ]
    return {t: [str(c[1]) for c in db.execute(f'PRAGMA table_info("{t}")')] for t in names}


def _present(db: sqlite3.Connection, change: Change) -> bool:
    if isinstance(change, Column):
        return change.name in {str(c[1]) for c in db.execute(f'PRAGMA table_info("{change.table}")')}
    kind = "table" if isinstance(change, Table) else "index"
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, change.name))
    return found.fetchone() is not None


def _first_missing(db: sqlite3.Connection) -> int:
    """The index in :data:`STEPS` of the first step the database lacks a part of
    (a database of the old mechanisms); :data:`LEGACY_STEPS` when it has them all."""
    for at, step in enumerate(STEPS[:LEGACY_STEPS]):
        if not all(_present(db, c) for c in step.changes):
            return at
    return LEGACY_STEPS


def apply_step(db: sqlite3.Connection, step: Step) -> None:
    """The changes of `step`, each skipped when it is there already (no transaction, no version: :func:`upgrade` does those)."""
    for change in step.changes:
        if _present(db, change):  # a database of the old mechanisms has some parts already
            continue
        if isinstance(change, Column):
            db.execute(f'ALTER TABLE "{change.table}" ADD COLUMN "{change.name}" {change.definition}')
        else:
            db.execute(change.sql)


def upgrade(db: sqlite3.Connection) -> None:
    """Apply the steps the database lacks, each in its own transaction with
    its version. Another connection upgrading it meanwhile is seen (each
    transaction reads the version again)."""
    while True:
        with transaction(db):
            found = version(db)
            at = _first_missing(db) if found <= LEGACY_LAST else found
            if at >= SCHEMA_VERSION:
                if found != at:
                    db.execute(f"PRAGMA user_version = {at}")
                return
            apply_step(db, STEPS[at])
            db.execute(f"PRAGMA user_version = {at + 1}")
