"""What every table group of the service database shares: the connection,
its transactions, the file's names, the tokens' hashes.

The service database is one SQLite file (WAL) given by ``referee serve --db
PATH``; its data folder (the runs' output folders, the teams' folders) lies
beside it, ``<db stem>-data/``.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...tournament.store import use_wal

#: The service database's file name in a backup folder (:mod:`referee.service.backup`).
SERVICE_DB_NAME = "service.sqlite"

#: Any error SQLite gives (a damaged file, a locked database, ...): what the
#: callers above the store catch, without importing sqlite3 themselves.
StoreError = sqlite3.Error
#: A file that is not a database, or a damaged one.
DatabaseError = sqlite3.DatabaseError

#: How long a connection waits for another's lock before it gives up (seconds).
BUSY_TIMEOUT_S = 30.0


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's "database is locked" (or busy): another
    connection held it longer than :data:`BUSY_TIMEOUT_S`."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


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


def connect(path: Path) -> sqlite3.Connection:
    """The service's connection to the database `path`: autocommit (each
    transaction is explicit, :func:`transaction`), WAL, foreign keys on."""
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    use_wal(db, BUSY_TIMEOUT_S)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (taken at once, so two writers never deadlock
    on an upgrade of their read locks): committed when the block ends,
    rolled back when it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class Tables:
    """The connection every table group's methods use (:class:`~referee.service.store.db.ServiceDB`
    composes the groups). One connection per instance, used only by the
    thread that opened it (sqlite3 refuses any other)."""

    path: Path
    db: sqlite3.Connection

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with transaction(self.db) as db:
            yield db

    @property
    def data_dir(self) -> Path:
        return data_dir_of(self.path)

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
