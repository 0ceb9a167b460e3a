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

A restore takes the backup folder as untrusted input (issue 32, item 3):
it refuses a folder that holds a link (or anything but files and folders)
and a manifest that names a file outside it, checks the manifest (every
file there, of its size and hash; each file is copied through a descriptor
that follows no link, and its hash checked again as it is copied), refuses
to replace a database that is there unless ``--force``, and writes the
database and the data folder beside their places first (``*.restoring``).
The folders the database names (a run's ``out_dir``) are rewritten to the
new place; then the copy is checked as the service would check it
(:func:`~referee.service.db_check.check_database`: SQLite's full integrity
check, its own schema version, every path it holds inside the new data
folder) and no competition's league may start commands on the server
unless ``--allow-house-commands``. Only then are they moved in; a restore
that fails leaves the database and data folder that were there as they
were, and no ``*.restoring`` file.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from .store import SCHEMA_VERSION, SERVICE_DB_NAME, StoreError, data_dir_of
from .store.maintenance import copy_database, replace_in_text, schema_version_of

MANIFEST = "manifest.json"
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
    check = copy_database(src, dst)
    if check != ["ok"]:
        raise BackupError(
            f"{src}: its copy fails SQLite's integrity check ({'; '.join(check[:3])}): the "
            "database may be damaged; nothing was kept"
        )


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

    copy_sqlite(db_path, out / SERVICE_DB_NAME)
    keep(SERVICE_DB_NAME)
    version = schema_version_of(out / SERVICE_DB_NAME)
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


def _only_files(folder: Path) -> None:
    """A backup folder holds files and folders only: a link (to a file or a
    folder, inside it or not), a FIFO or a device in it is refused, named."""
    for root, dirs, names in os.walk(folder):
        for name in sorted(dirs + names):
            path = Path(root) / name
            mode = path.lstat().st_mode
            rel = path.relative_to(folder).as_posix()
            if stat.S_ISLNK(mode):
                raise BackupError(
                    f"{folder}: {rel} is a link (to {os.readlink(path)}): a backup made by referee backup "
                    "holds no links; refusing it (nothing was changed): restore a backup you made"
                )
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BackupError(
                    f"{folder}: {rel} is not a file nor a folder: refusing the backup (nothing was changed)"
                )


def _entry_path(folder: Path, entry: str) -> Path:
    """The manifest's `entry` in the backup folder; refused when it leaves it."""
    rel = Path(entry)
    if not entry or ".." in rel.parts or rel.is_absolute() or "\x00" in entry:
        raise BackupError(
            f"{folder}: the manifest names {entry!r}, outside the backup: refusing it (nothing was changed)"
        )
    return folder / rel


def read_manifest(folder: Path) -> Manifest:
    """The backup's manifest, its files checked (each there, inside the
    folder, a file and no link, of its size and hash)."""
    _only_files(folder)
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
    if SERVICE_DB_NAME not in names:
        raise BackupError(f"{folder}: its manifest lists no {SERVICE_DB_NAME}: the backup is damaged")
    for f in manifest.files:
        path = _entry_path(folder, f.path)
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


def _copy_checked(src: Path, dst: Path, entry: FileEntry) -> None:
    """Copy the backup's file `src` to `dst` through a descriptor that
    follows no link, checking its size and hash as it is read (the file
    cannot be swapped after the manifest was checked)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise BackupError(
            f"{src}: cannot be read without following a link ({e.strerror}): refusing it"
        ) from None
    h = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as f, dst.open("xb") as out:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise BackupError(f"{src}: not a file: refusing it")
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if size != entry.size or h.hexdigest() != entry.sha256:
        raise BackupError(f"{src}: changed while it was restored (size or SHA-256): the backup is damaged")


@contextlib.contextmanager
def _staged(*paths: Path) -> Iterator[None]:
    """Remove the staged copies (and SQLite's files beside them) unless the block ends well."""
    try:
        yield
    except BaseException:
        for path in paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            for suffix in ("", "-journal", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    path.with_name(path.name + suffix).unlink()
        raise


def _check_copy(folder: Path, stage_db: Path, stage_data: Path) -> None:
    """The staged copy, before anything is written to it, as the service
    would check it: each database a SQLite file, whole (SQLite's full
    integrity check) and of a schema this referee knows."""
    from .db_check import DatabaseProblem, check_database

    try:
        check_database(
            stage_db, thorough=True, paths=False, immutable=True, shown=str(folder / SERVICE_DB_NAME)
        )
        for root, _dirs, names in os.walk(stage_data):
            for name in names:
                path = Path(root) / name
                if _is_sqlite(path):
                    rel = f"{DATA_NAME}/{path.relative_to(stage_data).as_posix()}"
                    check_database(path, thorough=True, paths=False, immutable=True, shown=str(folder / rel))
    except DatabaseProblem as e:
        raise BackupError(f"{e}; refusing the backup (nothing was changed)") from None


def _check_rows(folder: Path, stage_db: Path, data: Path, allow_house_commands: bool) -> None:
    """The staged database, its paths rewritten: every path it holds inside
    the data folder `data`, and no league that starts commands unless allowed."""
    from .db_check import DatabaseProblem, check_paths_of, house_commands_in

    shown = str(folder / SERVICE_DB_NAME)
    try:
        check_paths_of(stage_db, data, shown=shown)
    except DatabaseProblem as e:
        raise BackupError(f"{e}; refusing the backup (nothing was changed)") from None
    if not allow_house_commands:
        found = house_commands_in(stage_db)
        if found:
            h = found[0]
            raise BackupError(
                f"{shown}: competition {h.competition_id} ({h.name!r}), {h.where}: {h.refusal}; refusing "
                "the backup (nothing was changed): add --allow-house-commands if the service that will "
                "serve it runs with that flag and you trust this backup"
            )


def _in_use(db_path: Path) -> bool:
    """Whether a service (or any program) seems to have the database open:
    SQLite keeps its ``-wal`` file while a connection in WAL mode is open."""
    return (
        db_path.with_name(db_path.name + "-wal").exists() or db_path.with_name(db_path.name + "-shm").exists()
    )


def _rewrite_paths(path: Path, old: str, new: str) -> None:
    """Every text in the database `path` that names the old data folder names the new one."""
    if old != new:
        replace_in_text(path, old, new)


def restore(
    folder: Path,
    db_path: Path,
    *,
    force: bool = False,
    allow_house_commands: bool = False,
    say: Callable[[str], None] = lambda _m: None,
) -> Manifest:
    """Put the backup `folder` in place as the service database `db_path`
    and its data folder, once all of it is checked (see the module's
    documentation); :class:`BackupError` when it cannot be, with nothing changed."""
    folder = folder.resolve()
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
    by_path = {f.path: f for f in manifest.files}
    stage_db = db_path.with_name(db_path.name + ".restoring")
    stage_data = data.with_name(data.name + ".restoring")
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        with _staged(stage_db, stage_data):
            for leftover in (stage_db,):
                leftover.unlink(missing_ok=True)
            shutil.rmtree(stage_data, ignore_errors=True)
            _copy_checked(folder / SERVICE_DB_NAME, stage_db, by_path[SERVICE_DB_NAME])
            stage_data.mkdir(mode=0o700)
            new_data = str(data.resolve())
            copied: list[Path] = []
            for f in manifest.files:
                if not f.path.startswith(DATA_NAME + "/"):
                    continue
                dst = stage_data / f.path.removeprefix(DATA_NAME + "/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                _copy_checked(_entry_path(folder, f.path), dst, f)
                copied.append(dst)
            _check_copy(folder, stage_db, stage_data)
            for dst in copied:
                if _is_sqlite(dst):
                    _rewrite_paths(dst, manifest.data_dir, new_data)
            _rewrite_paths(stage_db, manifest.data_dir, new_data)
            _check_rows(folder, stage_db, data, allow_house_commands)
            _swap(stage_db, stage_data, db_path, data)
    except StoreError as e:
        from .db_check import explain

        raise BackupError(
            f"{explain(folder / SERVICE_DB_NAME, e)}; refusing the backup (nothing was changed)"
        ) from None
    except OSError as e:
        raise BackupError(
            f"{db_path}: cannot write the restored copy ({e.strerror}: {e.filename}): nothing was changed; "
            "restore to a folder the service's user may write, on a read-write mount"
        ) from None
    os.chmod(db_path, 0o600)
    say(
        f"restored {folder} (made {manifest.made_at}, schema version {manifest.schema_version}) to {db_path}, "
        f"data folder {data}"
    )
    return manifest


def _swap(stage_db: Path, stage_data: Path, db_path: Path, data: Path) -> None:
    """In place: the old data folder aside, the new one and the database in;
    the old data folder back when a step fails (nothing half-restored)."""
    old = data.with_name(data.name + ".replaced")
    shutil.rmtree(old, ignore_errors=True)
    moved = False
    if data.exists():
        data.rename(old)
        moved = True
    try:
        stage_data.rename(data)
        try:
            for suffix in ("-wal", "-shm"):
                db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
            os.replace(stage_db, db_path)
        except BaseException:
            data.rename(stage_data)
            raise
    except BaseException:
        if moved:
            old.rename(data)
        raise
    shutil.rmtree(old, ignore_errors=True)
