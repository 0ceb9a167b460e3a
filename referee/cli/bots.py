"""What the commands that talk to bots share: a bot SPEC made into its
transport, the folder for command bots' logs, and the one way they print.

A bot SPEC is a base URL (``http://127.0.0.1:8001``), a unix socket
(``unix:/path/to/bot.sock``), or ``cmd:`` and a command the referee starts,
with ``{port}`` where the port goes (``cmd:python -m sample_bots.random --port
{port}``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import aiohttp
import click

from ..bots import Bot
from ..bots.factory import BotFactory, parse_spec
from ..textsafe import for_terminal

__all__ = ["echo", "log_folder", "make_bot"]


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """click.echo for every line these commands print: it may quote a bot (its
    self-declared name, its output, its errors), so no control character
    reaches the terminal as one (:func:`referee.textsafe.for_terminal`)."""
    click.echo(for_terminal(text), err=err, nl=nl)


def log_folder(log_dir: Path | None) -> Path:
    """The folder for command bots' logs: `log_dir`, else a new temporary one."""
    return log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="referee-logs-"))


def make_bot(
    spec: str,
    *,
    session: aiohttp.ClientSession | None,
    log_dir: Path,
    secret: str | None = None,
    param_hint: str = "--bot",
) -> Bot:
    """The transport for a bot SPEC (:func:`referee.bots.factory.parse_spec`)."""
    try:
        return BotFactory(log_dir=log_dir, session=session).make(parse_spec(spec, secret=secret))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=param_hint) from None
