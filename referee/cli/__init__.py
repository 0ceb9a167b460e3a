"""The ``referee`` command line: the :func:`main` group, and one module per
command group, each registered below.

- ``referee match`` (:mod:`.match`): play one game, print the result;
- ``referee check`` (:mod:`.check`): a bot's compliance check;
- ``referee tournament``, ``referee standings`` (:mod:`.tournament`): a league
  from a league file, and its standings;
- ``referee serve`` (:mod:`.serve`): the classroom service; ``referee start``
  (:mod:`.start`): a competition's run from the command line;
- ``referee replay`` (:mod:`.replay`): a replay file, as a summary or the viewer;
- ``referee backup``, ``referee restore`` (:mod:`.backup`): the service's data;
- ``referee cleanup`` (:mod:`.cleanup`): the containers a crashed referee left.

What they share: :mod:`.options` (options and parameter types declared once),
:mod:`.bots` (a bot SPEC made into its transport, the terminal-safe echo),
:mod:`.service_db` (the service database, checked before a command uses it).
A command module defines a plain ``click.command`` and never imports this
package; :func:`_register` adds it to :func:`main`, so a new command is a
module and one line there.
"""

from __future__ import annotations

import click

from .. import __version__, engine_status
from .bots import make_bot

__all__ = ["main", "make_bot"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, prog_name="referee", message="%(prog)s %(version)s\n" + engine_status().replace("%", "%%")
)
@click.option(
    "--instance",
    "instance_id",
    metavar="ID",
    help="This install's id on the Docker daemon: in the tags of the images it builds and the "
    "names and labels of the containers it starts (default: REFEREE_INSTANCE, else one per "
    "user, u<uid>; `referee serve` and `referee start` use the id kept in their database).",
)
def main(instance_id: str | None) -> None:
    """Referee for 3UP 3DOWN bot tournaments."""
    if instance_id is not None:
        from ..bots.sandbox.instance import cli_instance, use

        try:
            use(cli_instance(instance_id))
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--instance") from None


def _register() -> None:
    """Every command on :func:`main`, in the order ``referee --help`` lists
    them (alphabetical: click sorts them)."""
    from .backup import backup_command, restore_command
    from .check import check
    from .cleanup import containers_cleanup
    from .match import match
    from .play import play
    from .replay import replay
    from .serve import serve
    from .start import start
    from .tournament import standings, tournament

    # Bots and games on this machine.
    main.add_command(match)
    main.add_command(check)
    main.add_command(play)
    main.add_command(tournament)
    main.add_command(standings)
    # The classroom service.
    main.add_command(serve)
    main.add_command(start)
    main.add_command(replay)
    main.add_command(backup_command)
    main.add_command(restore_command)
    # Container clean-up.
    main.add_command(containers_cleanup, "cleanup")


_register()
