"""``referee replay GAME [--html OUT]``: a replay file as a summary, or as the
viewer in one self-contained HTML file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["replay"]


@click.command()
@click.argument("game", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the replay viewer, self-contained, to this file.",
)
def replay(game: Path, html_out: Path | None) -> None:
    """Show the replay file GAME (a game-NNNNNN.jsonl.gz): a summary, or with
    --html the step-by-step viewer as one self-contained HTML file."""
    from ..replay import ReplayError, frames
    from ..replay import read as read_replay
    from ..report import format_result
    from ..web.viewer import standalone_html

    try:
        record = read_replay(game)
        data = frames(record)
    except ReplayError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    steps = len(data["frames"]) - 1
    if record.result is not None:
        # The same table as `referee match`: places, points, faults, latencies.
        click.echo(f"{game.name}: {steps} steps")
        click.echo(format_result(record.result))
    else:
        click.echo(
            f"game {data['game_id']}, seed {data['seed']}, {steps} steps; no result recorded "
            "(the game did not finish)"
        )
    if html_out is not None:
        html_out.write_text(standalone_html(data, title=f"replay {game.name}"), encoding="utf-8")
        click.echo(f"viewer written to {html_out}")
