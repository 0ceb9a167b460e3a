"""A copy of the service to keep, made while it runs, and its restore
(issue 25, item 9): ``referee backup --db PATH OUT``, ``referee restore
OUT --db PATH``.

A backup is a folder::

    OUT/manifest.json      what it holds: each file's size and SHA-256
    OUT/service.sqlite     the service database
    OUT/data/...           the data folder (runs, teams' folders)

Every SQLite database (the service's, each run's ``tournament.sqlite``) is
copied with SQLite's online backup API, so the copy is consistent although
the service writes on meanwhile, and checked with ``PRAGMA
integrity_check``; the service database first, then the data folder (a game
a run's copy records has its replay in the copy). Other files are copied as
they are; SQLite's ``-wal``/``-shm``/``-journal`` files are not (the copies
hold their contents).

A restore checks the manifest (every file there, of its size and hash) and
the schema version before it touches anything, refuses to replace a
database that is there unless ``--force``, and writes the database and the
data folder beside their places first, then moves them in. The folders the
database names (a run's ``out_dir``) are rewritten to the new place.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec

from .db import SCHEMA_VERSION, data_dir_of

MANIFEST = "manifest.json"
DB_NAME = "service.sqlite"
DATA_NAME = "data"
#: The manifest's format.
FORMAT = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SKIP_SUFFIXES = ("-wal", "-shm", "-journal")


class BackupError(Exception):
    """A backup or restore that cannot be made; the message says why and what to do."""


class FileEntry(msgspec.Struct):
    path: str  # relative to the backup folder, with /
    size: int
    sha256: str


class Manifest(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    made_at: str
    #: The database's schema version (``PRAGMA user_version``).
    schema_version: int
    #: Where the data folder was (the database's paths are rewritten from it on restore).
    data_dir: str
    files: list[FileEntry]


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of the live database `src` (SQLite's online backup), checked."""
    source = sqlite3.connect(src.resolve().as_uri() + "?mode=ro", uri=True, timeout=30)
    try:
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")  # one file, whole
            check = [str(r[0]) for r in target.execute("PRAGMA integrity_check")]
        finally:
            target.close()
    finally:
        source.close()
    if check != ["ok"]:
        raise BackupError(
            f"{src}: its copy fails SQLite's integrity check ({'; '.join(check[:3])}): the "
            "database may be damaged; nothing was kept"
        )


def schema_version_of(path: Path) -> int:
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def backup(db_path: Path, out: Path, say: Callable[[str], None] = lambda _m: None) -> Manifest:
    """Copy the service database `db_path` and its data folder into the new folder `out`."""
    if not db_path.is_file():
        raise BackupError(
            f"{db_path}: no service database there (referee backup --db PATH: the one "
            "referee serve --db uses)"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupError(f"{out}: exists and is not an empty folder: name a new folder for the backup")
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the teams' secrets and the token hashes are in it: the service's user only
    data = data_dir_of(db_path)
    files: list[FileEntry] = []

    def keep(rel: str) -> None:
        path = out / rel
        files.append(FileEntry(path=rel, size=path.stat().st_size, sha256=_sha256(path)))

    copy_sqlite(db_path, out / DB_NAME)
    keep(DB_NAME)
    version = schema_version_of(out / DB_NAME)
    if data.is_dir():
        for root, dirs, names in os.walk(data):
            dirs.sort()
            for name in sorted(names):
                src = Path(root) / name
                if name.endswith(_SKIP_SUFFIXES) or not src.is_file() or src.is_symlink():
                    continue
                rel = f"{DATA_NAME}/{src.relative_to(data).as_posix()}"
                dst = out / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if _is_sqlite(src):
                        copy_sqlite(src, dst)
                    else:
                        shutil.copyfile(src, dst)
                except FileNotFoundError:  # removed meanwhile (a pruned upload)
                    continue
                keep(rel)
    manifest = Manifest(
        made_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        schema_version=version,
        data_dir=str(data.resolve()),
        files=files,
    )
    (out / MANIFEST).write_bytes(msgspec.json.format(msgspec.json.encode(manifest)))
    say(f"backup {out}: {len(files)} files, {sum(f.size for f in files)} bytes, schema version {version}")
    return manifest


def read_manifest(folder: Path) -> Manifest:
    """The backup's manifest, its files checked (each there, of its size and hash)."""
    try:
        manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=Manifest)
    except FileNotFoundError:
        raise BackupError(f"{folder}: no {MANIFEST}: not a backup made by referee backup") from None
    except (OSError, msgspec.DecodeError) as e:
        raise BackupError(f"{folder / MANIFEST}: unreadable ({e}): the backup is damaged") from None
    if manifest.format != FORMAT:
        raise BackupError(
            f"{folder}: a backup of format {manifest.format}; this referee reads format {FORMAT}"
        )
    names = {f.path for f in manifest.files}
    if DB_NAME not in names:
        raise BackupError(f"{folder}: its manifest lists no {DB_NAME}: the backup is damaged")
    for f in manifest.files:
        path = folder / f.path
        if ".." in Path(f.path).parts or Path(f.path).is_absolute():
            raise BackupError(f"{folder}: the manifest names {f.path!r}, outside the backup")
        if not path.is_file():
            raise BackupError(f"{folder}: {f.path} is missing: the backup is incomplete")
        if path.stat().st_size != f.size or _sha256(path) != f.sha256:
            raise BackupError(
                f"{folder}: {f.path} differs from the manifest (size or SHA-256): the backup "
                "is damaged; restore another one"
            )
    if manifest.schema_version > SCHEMA_VERSION:
        raise BackupError(
            f"{folder}: its database is at schema version {manifest.schema_version}, newer than "
            f"this referee's ({SCHEMA_VERSION}): restore it with the referee that made it"
        )
    return manifest


def _in_use(db_path: Path) -> bool:
    """Whether a service (or any program) seems to have the database open:
    SQLite keeps its ``-wal`` file while a connection in WAL mode is open."""
    return (
        db_path.with_name(db_path.name + "-wal").exists() or db_path.with_name(db_path.name + "-shm").exists()
    )


def _rewrite_paths(path: Path, old: str, new: str) -> None:
    """Every text in the database `path` that names the old data folder names the new one."""
    if old == new:
        return
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        tables = [
            str(r[0])
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
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


def restore(
    folder: Path, db_path: Path, *, force: bool = False, say: Callable[[str], None] = lambda _m: None
) -> Manifest:
    """Put the backup `folder` in place as the service database `db_path` and its data folder."""
    manifest = read_manifest(folder)
    data = data_dir_of(db_path)
    if db_path.exists() and not force:
        live = (
            " and seems in use (its -wal file is there): stop referee serve first,"
            if _in_use(db_path)
            else ""
        )
        raise BackupError(
            f"{db_path}: a database is there already{live} refusing to overwrite it: restore to "
            "another --db, or add --force to replace it and its data folder"
        )
    if not db_path.exists() and data.exists() and any(data.iterdir()) and not force:
        raise BackupError(f"{data}: a data folder is there already: add --force to replace it")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    stage_db = db_path.with_name(db_path.name + ".restoring")
    stage_data = data.with_name(data.name + ".restoring")
    for leftover in (stage_db,):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(stage_data, ignore_errors=True)
    shutil.copyfile(folder / DB_NAME, stage_db)
    stage_data.mkdir(mode=0o700)
    new_data = str(data.resolve())
    for f in manifest.files:
        if not f.path.startswith(DATA_NAME + "/"):
            continue
        dst = stage_data / f.path.removeprefix(DATA_NAME + "/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / f.path, dst)
        if _is_sqlite(dst):
            _rewrite_paths(dst, manifest.data_dir, new_data)
    _rewrite_paths(stage_db, manifest.data_dir, new_data)
    # In place: the old data folder out of the way, then the new one and the database.
    if data.exists():
        old = data.with_name(data.name + ".replaced")
        shutil.rmtree(old, ignore_errors=True)
        data.rename(old)
        shutil.rmtree(old, ignore_errors=True)
    stage_data.rename(data)
    for suffix in ("-wal", "-shm"):
        db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
    os.replace(stage_db, db_path)
    os.chmod(db_path, 0o600)
    say(
        f"restored {folder} (made {manifest.made_at}, schema version {manifest.schema_version}) to {db_path}, "
        f"data folder {data}"
    )
    return manifest
