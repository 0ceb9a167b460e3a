"""Options and parameter types the ``referee`` commands share, declared once.

- ``--move-ms``, ``--runtime``, ``--log-dir`` (:data:`MOVE_MS`, :data:`RUNTIME`,
  :data:`LOG_DIR`): the commands that talk to bots;
- where their games run: ``referee tournament`` and ``referee serve`` both take
  ``--executor``, with Ray's ``--address``, ``--workers`` and ``--registry``;
  :func:`executor_options` declares the four once (each command says in its
  own words what runs there) and :func:`checked_registry` checks ``--registry``
  the same way for both;
- :class:`Size` (``64m``) and :func:`use_runtime` (``--runtime`` of the
  service's commands, checked against the daemon).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from protocol.messages import Timeouts

__all__ = ["LOG_DIR", "MOVE_MS", "RUNTIME", "Size", "checked_registry", "executor_options", "use_runtime"]

F = TypeVar("F", bound=Callable[..., object])

if TYPE_CHECKING:  # generic in click 8.2 and newer only
    _IntParam = click.ParamType[int]
else:
    _IntParam = click.ParamType


#: Options shared by the commands that talk to bots.
MOVE_MS = click.option(
    "--move-ms",
    type=click.IntRange(min=1),
    default=Timeouts().move_ms,
    show_default=True,
    help="Time for each /act reply, round trip included.",
)
RUNTIME = click.option(
    "--runtime",
    metavar="NAME",
    help="Run every container bot under this runtime of the Docker daemon, over the league file's "
    "[containers] runtime: runsc for gVisor (registered in the daemon: see docs/containers.md).",
)
LOG_DIR = click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where command bots' (cmd:COMMAND) stdout and stderr go (default: a new temporary folder).",
)


def executor_options(*, runs: str, workers: str, registry: str) -> Callable[[F], F]:
    """``--executor local|ray``, ``--address``, ``--workers`` and ``--registry``.

    `runs` names what plays there ("Where games run"), `workers` what the
    worker actors serve, `registry` what a node without the registry must
    have instead; the rest of the help is the same for every command."""
    options = [
        click.option(
            "--executor",
            type=click.Choice(["local", "ray"]),
            default="local",
            show_default=True,
            help=f"{runs}: this process, or Ray workers (pip install -e '.[ray]').",
        ),
        click.option(
            "--address",
            help="With --executor ray: an existing cluster ('auto', 'ray://HOST:10001'); default: a local one.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=2,
            show_default=True,
            help=f"With --executor ray: {workers}.",
        ),
        click.option(
            "--registry",
            metavar="HOST:PORT",
            help="With --executor ray: the Docker registry the images are pushed to (by digest) for the "
            f"nodes to pull; without it {registry}.",
        ),
    ]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def checked_registry(executor: str, registry: str | None) -> str | None:
    """``--registry`` as given (None without it), checked: ``HOST:PORT``, and
    for ``--executor ray`` only; else a :class:`click.BadParameter` saying so."""
    if registry is None:
        return None
    if executor != "ray":
        raise click.BadParameter(
            "a registry serves the nodes of --executor ray only", param_hint="--registry"
        )
    from ..bots.cluster.registry import check_registry

    try:
        return check_registry(registry)
    except ValueError as e:
        raise click.BadParameter(str(e).removeprefix("--registry: "), param_hint="--registry") from None


class Size(_IntParam):
    """A size option: bytes, or with k/m/g (``"64m"``), at least `minimum`
    (`shown`: how the message says it); the value is the count of bytes."""

    name = "SIZE"

    def __init__(self, minimum: int = 0, shown: str = "") -> None:
        self.minimum = minimum
        self.shown = shown or f"{minimum} bytes"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from ..bots.sandbox.container_limits import parse_size

        try:
            size = parse_size(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        if size < self.minimum:
            self.fail(f"at least {self.shown}, got {value!r}", param, ctx)
        return size


def use_runtime(runtime: str) -> None:
    """``--runtime``: every container of this process runs under `runtime`
    (:func:`~referee.bots.sandbox.docker_daemon.set_runtime`), checked against the
    daemon now, so a runtime it lacks stops the command before anything runs."""
    from ..bots.base import BotError
    from ..bots.sandbox.docker_daemon import check_runtime, set_runtime

    try:
        check_runtime(runtime.strip(), field="--runtime")
    except BotError as e:
        raise click.BadParameter(str(e).removeprefix("--runtime: "), param_hint="--runtime") from None
    previous = set_runtime(runtime.strip())
    click.get_current_context().call_on_close(lambda: set_runtime(previous))
    click.echo(f"team containers run under the runtime {runtime.strip()!r}", err=True)
