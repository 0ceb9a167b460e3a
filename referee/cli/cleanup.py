"""``referee cleanup``: remove the bot containers a crashed referee left behind.

Registered on ``referee.cli.main`` as ``cleanup``.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..bots.base import BotError
from ..bots.sandbox.docker_daemon import MANAGED_LABEL, cleanup_containers, find_containers
from ..bots.sandbox.instance import INSTANCE_LABEL, Instance, check_instance_id, current


@click.command("cleanup")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Only the containers of the tournament with this output folder.",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Also the containers of referees still running (default: only those whose referee is gone).",
)
@click.option(
    "--instance",
    "instance_id",
    metavar="ID",
    help="Only this install's containers (default: REFEREE_INSTANCE, else this user's, u<uid>).",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Only the containers of the service with this database (its instance id).",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed, remove nothing.")
def containers_cleanup(
    out: Path | None, everything: bool, instance_id: str | None, db_path: Path | None, dry_run: bool
) -> None:
    """Remove bot containers left by a referee that crashed or was killed.

    Every container the referee starts is labelled referee.managed=1 and
    referee.instance=ID (the install: a service's id is kept in its
    database), with the output folder (referee.out) and the referee's process
    (referee.pid, referee.host). Only one instance's containers are ever
    touched, never another install's on the same daemon; by default only
    those whose referee process no longer runs on this host.
    """
    if instance_id is not None and db_path is not None:
        raise click.UsageError("give --instance or --db, not both")
    try:
        if db_path is not None:
            from ..service.store import ServiceDB

            db = ServiceDB(db_path)
            try:
                instance_id = db.instance_id()
            finally:
                db.close()
        inst = Instance(check_instance_id(instance_id)) if instance_id is not None else current()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--instance") from None
    labels = {"referee.out": str(out.resolve())} if out is not None else None
    try:
        if dry_run:
            from ..bots.sandbox.docker_daemon import referee_alive

            found = find_containers(labels, instance=inst)
            names = [str(c.name) for c in found if everything or not referee_alive(c.labels or {})]
        else:
            names = cleanup_containers(labels, orphans_only=not everything, instance=inst)
    except BotError as e:
        raise click.ClickException(str(e)) from None
    verb = "would remove" if dry_run else "removed"
    if not names:
        click.echo(
            f"no stray containers (label {MANAGED_LABEL}=1, {INSTANCE_LABEL}={inst.id}"
            + (f", referee.out={labels['referee.out']}" if labels else "")
            + ")"
        )
        return
    for name in names:
        click.echo(f"{verb} {name}")
    click.echo(f"{verb} {len(names)} container(s)")
