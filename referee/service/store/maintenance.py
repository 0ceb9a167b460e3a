"""The statements that look after database files rather than serve the
competition: a read-only look for the checks of :mod:`referee.service.db_check`
(integrity, version, the paths and leagues the rows hold), and the copies
and path rewriting of :mod:`referee.service.backup`. They work on any SQLite
file the service keeps (its own database, a run's ``tournament.sqlite``),
reading the schema from the file, never assuming it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from .base import BUSY_TIMEOUT_S
from .schema import tables

#: A connection to a database file, as the functions below take it.
Connection = sqlite3.Connection


def open_read_only(path: Path, *, immutable: bool = False) -> Connection:
    """The database `path`, read only. `immutable`: read as it is, no lock,
    no -wal/-shm made beside it: only for a file no one writes (a backup's
    copy being restored); a live database is read through its -wal."""
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    return sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True, timeout=BUSY_TIMEOUT_S)


def integrity(db: Connection, *, thorough: bool) -> list[str]:
    """SQLite's own check of the file (``["ok"]`` when whole): the full
    ``integrity_check`` when `thorough`, else ``quick_check``; at most 5 problems."""
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        return [str(r[0]) for r in db.execute(f"PRAGMA {pragma}(5)")]
    except sqlite3.DatabaseError as e:
        return [str(e)]


def columns(db: Connection) -> dict[str, set[str]]:
    """Every table of the database with the names of its columns."""
    return {t: set(cols) for t, cols in tables(db).items()}


def text_rows(db: Connection, table: str, column: str) -> Iterator[tuple[int, str]]:
    """(row id, value as text) of every row whose `column` is not NULL."""
    for rid, value in db.execute(f'SELECT id, "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL'):
        yield int(rid), str(value)


def competition_leagues(db: Connection) -> list[tuple[int, str, str]]:
    """(id, name, league file) of every competition, by id."""
    rows = db.execute("SELECT id, name, league_toml FROM competitions ORDER BY id")
    return [(int(cid), str(name), str(text)) for cid, name, text in rows]


def run_leagues(db: Connection, cid: int) -> list[tuple[int, str, str, str]]:
    """(id, kind, status, stored league) of every run of competition `cid`,
    newest first (a database from before run kinds: each a 'run')."""
    kind = "kind" if "kind" in columns(db).get("runs", set()) else "'run'"
    rows = db.execute(
        f"SELECT id, {kind}, status, league_json FROM runs WHERE competition_id = ? ORDER BY id DESC", (cid,)
    ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


def schema_version_of(path: Path) -> int:
    """The schema version of the database file `path` (``PRAGMA user_version``), read only."""
    db = open_read_only(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def copy_database(src: Path, dst: Path) -> list[str]:
    """A consistent copy of the live database `src` at `dst` (SQLite's
    online backup: the writers go on meanwhile), one file (no -wal); its
    ``integrity_check`` (``["ok"]`` when whole)."""
    source = open_read_only(src)
    try:
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")  # one file, whole
            return [str(r[0]) for r in target.execute("PRAGMA integrity_check")]
        finally:
            target.close()
    finally:
        source.close()


def replace_in_text(path: Path, old: str, new: str) -> None:
    """Every text value in every table of the database `path` that holds
    `old` holds `new` there instead (one transaction; no -wal left beside it)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=DELETE")  # no -wal beside the staged copy
        db.execute("BEGIN IMMEDIATE")
        names = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in names:
            for col in db.execute(f'PRAGMA table_info("{table}")').fetchall():
                name, kind = str(col[1]), str(col[2]).upper()
                if "TEXT" in kind or kind == "":
                    db.execute(
                        f'UPDATE "{table}" SET "{name}" = replace("{name}", ?, ?) '
                        f'WHERE typeof("{name}") = \'text\' AND instr("{name}", ?) > 0',
                        (old, new, old),
                    )
        db.execute("COMMIT")
    finally:
        db.close()
