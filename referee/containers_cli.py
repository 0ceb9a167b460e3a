"""``referee cleanup``: remove the bot containers a crashed referee left behind.

Register it with ``main.add_command(containers_cleanup, "cleanup")``.
"""

from __future__ import annotations

from pathlib import Path

import click

from .bots.base import BotError
from .bots.container import MANAGED_LABEL, cleanup_containers, find_containers


@click.command("cleanup")
@click.option(
    "--out", "out", type=click.Path(file_okay=False, path_type=Path),
    help="Only the containers of the tournament with this output folder.",
)
@click.option(
    "--all", "everything", is_flag=True,
    help="Also the containers of referees still running (default: only those whose referee is gone).",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed, remove nothing.")
def containers_cleanup(out: Path | None, everything: bool, dry_run: bool) -> None:
    """Remove bot containers left by a referee that crashed or was killed.

    Every container the referee starts is labelled referee.managed=1, with the
    output folder (referee.out) and the referee's process (referee.pid,
    referee.host). By default only containers whose referee process no longer
    runs on this host are removed.
    """
    labels = {"referee.out": str(out.resolve())} if out is not None else None
    try:
        if dry_run:
            from .bots.container import _referee_alive

            found = find_containers(labels)
            names = [str(c.name) for c in found if everything or not _referee_alive(c.labels or {})]
        else:
            names = cleanup_containers(labels, orphans_only=not everything)
    except BotError as e:
        raise click.ClickException(str(e)) from None
    verb = "would remove" if dry_run else "removed"
    if not names:
        click.echo(f"no stray containers (label {MANAGED_LABEL}=1"
                   + (f", referee.out={labels['referee.out']}" if labels else "") + ")")
        return
    for name in names:
        click.echo(f"{verb} {name}")
    click.echo(f"{verb} {len(names)} container(s)")
