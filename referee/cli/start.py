"""``referee start --db PATH COMPETITION [--resume]``: play a competition's run
from the command line (the served pages follow it live)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import use_runtime
from .service_db import open_service_db

__all__ = ["start"]


@click.command()
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The service database.",
)
@click.argument("competition")
@click.option("--resume", is_flag=True, help="Continue the competition's last run (interrupted or failed).")
@click.option(
    "--runtime",
    metavar="NAME",
    help="Run the teams' containers under this runtime of the Docker daemon (runsc: gVisor).",
)
@click.option(
    "--allow-house-commands",
    is_flag=True,
    help="Play a league whose house bots start commands or open unix sockets on this machine "
    "(as referee serve --allow-house-commands). Off: such a league is refused.",
)
def start(
    db_path: Path,
    competition: str,
    resume: bool,
    runtime: str | None = None,
    allow_house_commands: bool = False,
) -> None:
    """Play a run of COMPETITION (its id or name) here, with the teams'
    latest bots; a server over the same database shows it live."""
    if runtime is not None:
        use_runtime(runtime)
    from ..bots.sandbox.instance import current, use
    from ..service.errors import ServiceError
    from ..service.pipeline import retag_pinned, service_instance
    from ..service.runs import play_run, prepare_run
    from ..web.validation import parse_id

    db = open_service_db(db_path)
    try:
        outer = current()
        instance = use(service_instance(db))  # the service's instance: its names, labels, pins
        click.get_current_context().call_on_close(lambda: use(outer))
        retag_pinned(instance, db.pinned_images())
        cid = parse_id(competition)  # a name may be all digits too; an id past SQLite's range is none
        comp = db.competition(cid) if cid is not None else None
        comp = comp or db.competition_named(competition)
        if comp is None:
            click.echo(f"error: no competition {competition!r}", err=True)
            sys.exit(2)
        try:
            run, league = prepare_run(db, comp.id, resume=resume, allow_commands=allow_house_commands)
        except ServiceError as e:
            click.echo(f"error: {e.message}", err=True)
            sys.exit(2)
        click.echo(
            f"{comp.name}: run {run.id}, {len(league.bots)} bots, {run.total_games} games -> {run.out_dir}",
            err=True,
        )
        status = play_run(db, run, league, resume=resume)
    finally:
        db.close()
    click.echo(f"run {run.id}: {status}")
    if not status.startswith("finished"):
        sys.exit(130 if status.startswith("interrupted") else 2)
