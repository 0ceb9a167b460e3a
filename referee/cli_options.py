"""Options the ``referee`` commands share: where their games run.

``referee tournament`` and ``referee serve`` both take ``--executor``, with
Ray's ``--address``, ``--workers`` and ``--registry``; :func:`executor_options`
declares the four once (each command says in its own words what runs there)
and :func:`checked_registry` checks ``--registry`` the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

__all__ = ["checked_registry", "executor_options"]

F = TypeVar("F", bound=Callable[..., object])


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
    from .bots.cluster.registry import check_registry

    try:
        return check_registry(registry)
    except ValueError as e:
        raise click.BadParameter(str(e).removeprefix("--registry: "), param_hint="--registry") from None
