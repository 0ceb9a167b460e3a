"""``referee backup --db PATH OUT``, ``referee restore OUT --db PATH [--force]``:
a consistent copy of the service while it runs, and back (:mod:`referee.service.backup`)."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["backup_command", "restore_command"]


@click.command("backup")
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The service database (the one referee serve --db uses).",
)
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def backup_command(db_path: Path, out: Path) -> None:
    """Copy the service database and its data folder into the new folder
    OUT, consistently, while the service runs (SQLite's online backup for
    every database, each copy checked); OUT/manifest.json lists every file
    with its size and SHA-256."""
    from ..service.backup import BackupError, backup
    from ..service.db_check import explain
    from ..service.store import StoreError

    try:
        backup(db_path, out, say=click.echo)
    except BackupError as e:
        raise click.ClickException(str(e)) from None
    except StoreError as e:
        raise click.ClickException(f"{explain(db_path, e)} (no backup was made)") from None


@click.command("restore")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the service database goes (its data folder beside it).",
)
@click.option("--force", is_flag=True, help="Replace the database and data folder that are there.")
@click.option(
    "--allow-house-commands",
    is_flag=True,
    help="Accept a backup whose leagues have house bots that start commands or open unix sockets "
    "(for a service run with referee serve --allow-house-commands). Off: such a backup is refused.",
)
def restore_command(folder: Path, db_path: Path, force: bool, allow_house_commands: bool = False) -> None:
    """Restore the backup FOLDER (made by referee backup) as the service
    database --db and its data folder, after checking every file against
    its manifest and the database as the service would (whole, a schema
    this referee knows, every path inside the data folder, no house command
    unless --allow-house-commands); a database that is there is replaced
    only with --force (stop the service first). A backup is untrusted
    input: a link in it, or a file outside it, refuses it whole."""
    from ..service.backup import BackupError, restore

    try:
        restore(folder, db_path, force=force, allow_house_commands=allow_house_commands, say=click.echo)
    except BackupError as e:
        raise click.ClickException(str(e)) from None
