"""``referee tournament LEAGUE_FILE``: play a league and print its standings;
``referee standings OUT``: print them again from the output folder."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from .. import engine_status
from ..report import format_h2h, format_settled, format_table
from ..textsafe import json_for_terminal
from .bots import echo
from .options import RUNTIME, checked_registry, executor_options

__all__ = ["standings", "tournament"]


@click.command()
@click.argument("league_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder (default: the league file's [tournament] output).",
)
@click.option("--concurrency", type=click.IntRange(min=1), help="Games played at once (1 to 256).")
@click.option("--resume", is_flag=True, help="Continue the tournament recorded in the output folder.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--no-replays", is_flag=True, help="Do not write a replay file per game.")
@executor_options(
    runs="Where games run",
    workers="how many worker actors",
    registry="every node must have the image bots' images on its own daemon",
)
@RUNTIME
def tournament(
    league_file: Path,
    out: Path | None,
    concurrency: int | None,
    resume: bool,
    no_progress: bool,
    no_replays: bool,
    executor: str,
    address: str | None,
    workers: int,
    registry: str | None,
    runtime: str | None,
) -> None:
    """Play the league described in LEAGUE_FILE and print the standings.

    Round-robin over every combination of table_size bots, each deal played
    once per seat rotation (duplicate deals), TrueSkill ratings applied in
    schedule order. Results go to a SQLite database in the output folder, with
    standings.json, standings.csv and head_to_head.json. Stopped (Ctrl-C, a
    crash, a reboot)? Run the same command with --resume.
    """
    from referee.tournament.executors import (
        Executor,
        ExecutorError,
        LocalExecutor,
        RayExecutor,
    )
    from referee.tournament.league import CONCURRENCY, LeagueError, load_league
    from referee.tournament.runner import Interrupted, Tournament

    if concurrency is not None and not CONCURRENCY.low <= concurrency <= CONCURRENCY.high:
        raise click.BadParameter(
            f"must be from {CONCURRENCY.low:g} to {CONCURRENCY.high:g} ({CONCURRENCY.what}), "
            "as a league file's [tournament] concurrency",
            param_hint="--concurrency",
        )
    if runtime is not None:
        from referee.bots.sandbox.docker_daemon import set_runtime

        if not runtime.strip():
            raise click.BadParameter("must name a runtime (runsc for gVisor)", param_hint="--runtime")
        previous = set_runtime(runtime.strip())  # checked against the daemon before any game
        click.get_current_context().call_on_close(lambda: set_runtime(previous))
    try:
        league = load_league(league_file)
        registry = checked_registry(executor, registry)
        if executor == "ray" and address is not None:
            local_only = [b.name for b in league.bots if b.command is not None and b.image is None]
            if local_only:
                raise LeagueError(
                    f"{league_file}: --executor ray on a remote cluster reaches bots by URL, or starts "
                    f"image bots on its nodes; {', '.join(local_only)} would run on this machine "
                    "(command bots): run them as services the workers can reach and give their url, "
                    "or submit them as images"
                )
        ex: Executor = (
            RayExecutor(address=address, workers=workers, registry=registry)
            if executor == "ray"
            else LocalExecutor()
        )
        t = Tournament(
            league,
            out,
            concurrency=concurrency,
            resume=resume,
            progress=not no_progress,
            replays=not no_replays,
            executor=ex,
        )
        echo(engine_status(), err=True)
        echo(
            f"{league.tournament.name}: {len(league.bots)} bots, {_games(t)}, "
            f"{league.tournament.table_size} per table, concurrency {t.concurrency} -> {t.out}",
            err=True,
        )

        async def run() -> list[Any]:
            try:
                return await t.run()
            finally:
                await ex.close()

        standings = asyncio.run(run())
    except (LeagueError, ExecutorError) as e:
        echo(f"error: {e}", err=True)
        sys.exit(2)
    except Interrupted as e:
        cmd = f"referee tournament {shlex.quote(str(league_file))} --out {shlex.quote(str(t.out))} --resume"
        echo(f"\n{e}. To continue:\n  {cmd}", err=True)
        sys.exit(130)
    echo(format_table(standings))
    echo(format_settled(standings, t.confidence))
    echo("")
    echo(format_h2h([s.bot for s in standings], t.head_to_head))
    echo(f"\nstandings: {t.out / 'standings.json'}", err=True)


def _games(t: Any) -> str:
    """How many games a tournament plays, as its first line says it."""
    scheduler = t.scheduler
    if scheduler.total is not None:
        return f"{scheduler.total} games ({t.league.tournament.schedule})"
    return f"adaptive: until settled, at most {scheduler.limit} games"


@click.command()
@click.argument("out", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print standings.json as it is.")
def standings(out: Path, as_json: bool) -> None:
    """Print the standings of the tournament whose output folder is OUT."""
    from referee.tournament.league import LeagueError
    from referee.tournament.runner import load_confidence, load_h2h, load_standings

    try:
        rows = load_standings(out)
    except LeagueError as e:
        echo(f"error: {e}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json_for_terminal((out / "standings.json").read_text()), nl=False)
        return
    echo(format_table(rows))
    echo(format_settled(rows, load_confidence(out)))
    echo("")
    echo(format_h2h([s.bot for s in rows], load_h2h(out)))
