"""A service database checked before the service (or a restore) trusts it
(issue 32, items 3 and 12).

A database may come from anywhere: a backup folder someone else could
write, a file edited by hand, a disk that lost pages, a mount that became
read-only. Before ``referee serve`` or ``referee start`` open one, and
before ``referee restore`` puts one in place, :func:`check_database` makes
sure that:

- it is a SQLite file (its header), whole (``PRAGMA quick_check`` at a
  start, the full ``PRAGMA integrity_check`` in a restore), at a schema
  version this referee knows, and (at a start) writable;
- every path it holds (:data:`PATH_COLUMNS`: a run's folder, a practice
  game's folder, an upload waiting to be built) lies inside its data folder,
  so a hostile row cannot make the service remove, write or serve a folder
  elsewhere.

Each refusal is a :class:`DatabaseProblem` of one line: what is wrong, the
file, what to do. :func:`house_command_leagues` finds the competitions whose
league (or a stored league a run would resume with) needs
``--allow-house-commands``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ..tournament.league import LeagueError
from .runs import check_league_text, decode_league, house_command_refusal
from .store import DatabaseError, StoreError, data_dir_of
from .store.maintenance import (
    Connection,
    columns,
    competition_leagues,
    integrity,
    open_read_only,
    run_leagues,
    text_rows,
)
from .store.schema import newer_than_known
from .store.schema import version as schema_version

_SQLITE_MAGIC = b"SQLite format 3\x00"

#: (table, column): the columns of the service database that hold a path
#: on this machine (each a folder or file inside the data folder).
PATH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("runs", "out_dir"),
    ("practice_games", "out_dir"),
    ("submissions", "upload"),
)

#: What to do with a database that is damaged.
_RESTORE = "restore the latest good backup (referee restore BACKUP --db PATH --force)"


class DatabaseProblem(Exception):
    """A database the service will not use; the message is one line: what, the file, what to do."""


def _looks_sqlite(path: Path, label: Path) -> None:
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except IsADirectoryError:
        raise DatabaseProblem(
            f"{label}: a folder, not a database file: name the service's .sqlite file"
        ) from None
    except PermissionError:
        raise DatabaseProblem(
            f"{label}: the database cannot be read (permission denied): run the service as the user "
            "that owns it, or give that user the file"
        ) from None
    except OSError as e:
        raise DatabaseProblem(
            f"{label}: the database cannot be read ({e.strerror}): check the disk"
        ) from None
    if head and head != _SQLITE_MAGIC:  # an empty file is a new database, as SQLite takes it
        raise DatabaseProblem(
            f"{label}: not a SQLite database (its first bytes are {head[:8]!r}): name the service's "
            f"database file, or {_RESTORE}"
        )


def _integrity(db: Connection, path: Path, *, thorough: bool) -> None:
    found = integrity(db, thorough=thorough)
    if found != ["ok"]:
        pragma = "integrity_check" if thorough else "quick_check"
        raise DatabaseProblem(
            f"{path}: the database is damaged (SQLite's {pragma}: {'; '.join(found[:2])[:200]}): "
            f"{_RESTORE}; keep the damaged file aside for the admin to look at"
        )


def _version(db: Connection, path: Path) -> int:
    found = schema_version(db)
    refusal = newer_than_known(found, path)
    if refusal is not None:
        raise DatabaseProblem(refusal)
    return found


def inside(path: str, data_dir: Path) -> bool:
    """Whether `path` (as the service would use it: relative to the working
    folder, through any link that is there) is the data folder or inside it."""
    real, base = os.path.realpath(path), os.path.realpath(data_dir)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def stray_paths(db: Connection, data_dir: Path) -> Iterator[str]:
    """Each path of :data:`PATH_COLUMNS` outside `data_dir`: "table T, row N: column C is 'PATH'"."""
    tables = columns(db)
    for table, column in PATH_COLUMNS:
        if column not in tables.get(table, set()):
            continue
        for rid, text in text_rows(db, table, column):
            if text == "":  # a row whose folder is not named yet (a run being made)
                continue
            if "\x00" in text or not inside(text, data_dir):
                yield f"table {table}, row {rid}: {column} is {text!r}"


def check_paths(db: Connection, path: Path, data_dir: Path) -> None:
    stray = next(stray_paths(db, data_dir), None)
    if stray is not None:
        raise DatabaseProblem(
            f"{path}: {stray}, outside the data folder {data_dir}: the database was edited or comes from "
            f"elsewhere; nothing was touched: {_RESTORE}, or correct that row"
        )


def check_database(
    path: Path,
    *,
    data_dir: Path | None = None,
    thorough: bool = False,
    immutable: bool = False,
    paths: bool = True,
    shown: str | None = None,
) -> int:
    """Check the database file `path` as described above (read only,
    nothing written); its schema version. `data_dir`: where its paths must
    lie (the data folder beside it by default; `paths` False: not looked
    at); `thorough`: SQLite's full integrity check; `immutable`: a copy no
    one writes (a restore's); `shown`: the file the messages name (a
    restore's staged copy is the backup's file). Raises :class:`DatabaseProblem`."""
    label = Path(shown) if shown is not None else path
    _looks_sqlite(path, label)
    try:
        db = open_read_only(path, immutable=immutable)
    except StoreError as e:
        raise DatabaseProblem(f"{label}: the database cannot be opened ({e}): {_RESTORE}") from None
    try:
        _integrity(db, label, thorough=thorough)
        version = _version(db, label)
        if paths:
            check_paths(db, label, data_dir if data_dir is not None else data_dir_of(path))
        return version
    except DatabaseError as e:
        raise DatabaseProblem(f"{label}: the database is damaged ({e}): {_RESTORE}") from None
    finally:
        db.close()


def check_paths_of(path: Path, data_dir: Path, *, shown: str | None = None) -> None:
    """Only the paths of the database `path` (checked whole before): each inside `data_dir`."""
    label = Path(shown) if shown is not None else path
    db = open_read_only(path)
    try:
        check_paths(db, label, data_dir)
    finally:
        db.close()


def _writable(path: Path) -> bool:
    """Whether `path` (a file or a folder) can be written: not on a read-only
    mount, and this user may (root may write anything, except on a read-only mount)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return not (st.f_flag & os.ST_RDONLY) and os.access(path, os.W_OK)


def check_writable(path: Path) -> None:
    """The database and its folder (SQLite writes its -wal and -shm beside it) can be written."""
    for where, what in ((path, "the database"), (path.parent, "its folder")):
        if where.exists() and not _writable(where):
            ro = os.path.exists(where) and bool(os.statvfs(where).f_flag & os.ST_RDONLY)
            why = "is on a read-only mount" if ro else "is not writable by this user"
            raise DatabaseProblem(
                f"{path}: {what} {why}: the service writes to it (and a -wal file beside it); mount it "
                "read-write, or run the service as the user that owns it"
            )


def explain(path: Path, e: BaseException) -> str:
    """One line for an error SQLite or the system gave while opening the database `path`."""
    if isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (
            f"{path}: cannot write there ({e.strerror}): the service writes to the database, its folder "
            "and its data folder; mount them read-write, or run the service as the user that owns them"
        )
    text = str(e)
    if "readonly" in text or "read-only" in text:
        return (
            f"{path}: the database is read-only ({text}): mount it read-write, or run the service as "
            "the user that owns it"
        )
    if "unable to open" in text:
        return f"{path}: the database cannot be opened ({text}): check the path and its folder's permissions"
    if isinstance(e, DatabaseError):
        return f"{path}: the database is damaged ({text}): {_RESTORE}"
    return f"{path}: the database cannot be used ({type(e).__name__}: {text})"


# ------------------------------------------------------- house commands


class HouseCommands(msgspec.Struct, frozen=True):
    """A competition whose league needs ``--allow-house-commands``."""

    competition_id: int
    name: str
    #: Which league: "its league file", "run 4's stored league"...
    where: str
    #: :func:`~referee.service.runs.house_command_refusal`'s words.
    refusal: str

    def line(self) -> str:
        if self.where.startswith("ladder"):
            return (
                f"competition {self.competition_id} ({self.name!r}): {self.where}: {self.refusal}; "
                "that ladder plays the house bots it was opened with: freeze the competition now, "
                "or restart with the flag if you trust this league"
            )
        return (
            f"competition {self.competition_id} ({self.name!r}): {self.where}: {self.refusal}; its runs, "
            "ladder, final and practice games will not play it: restart with the flag if you trust this "
            "league, or replace the league (its admin page) and start a new run"
        )


def house_command_leagues(db: Connection) -> list[HouseCommands]:
    """The competitions of the database whose league file, or a stored league
    a run, ladder or final would play again (not finished, or the latest
    ladder), has a house bot that is a command or a unix socket."""
    out: list[HouseCommands] = []
    tables = columns(db)
    if "competitions" not in tables:
        return out
    for cid, name, text in competition_leagues(db):
        found: tuple[str, str] | None = None
        try:
            refusal = house_command_refusal(check_league_text(text))
        except LeagueError:
            refusal = None  # what reads it next says why
        if refusal is not None:
            found = ("its league file", refusal)
        elif "runs" in tables:
            rows = run_leagues(db, cid)
            latest_ladder = next((r[0] for r in rows if r[1] == "ladder"), None)
            for rid, rkind, status, league_json in rows:
                if status == "finished" and rid != latest_ladder:
                    continue
                try:
                    refusal = house_command_refusal(decode_league(league_json))
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if refusal is not None:
                    found = (f"{rkind} {rid}'s stored league", refusal)
                    break
        if found is not None:
            out.append(HouseCommands(competition_id=cid, name=name, where=found[0], refusal=found[1]))
    return out


def house_commands_in(path: Path, *, immutable: bool = False) -> list[HouseCommands]:
    """:func:`house_command_leagues` of the database file `path` (read only)."""
    db = open_read_only(path, immutable=immutable)
    try:
        return house_command_leagues(db)
    finally:
        db.close()


__all__ = [
    "PATH_COLUMNS",
    "DatabaseProblem",
    "HouseCommands",
    "check_database",
    "check_paths_of",
    "check_writable",
    "explain",
    "house_command_leagues",
    "house_commands_in",
    "inside",
    "stray_paths",
]
