"""``referee match --bot SPEC --bot SPEC [...] --seed N``: play one game and
print the result, the faults and the latencies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

import click
import msgspec

from protocol.messages import Rules, Timeouts

from .. import engine_status
from ..bots import Bot, BotError, make_session
from ..config import ConfigError, load_toml_struct
from ..match import play_match
from ..record import FaultPolicy, MatchResult
from ..report import format_result
from ..textsafe import for_terminal, json_for_terminal
from .bots import echo, log_folder, make_bot
from .options import LOG_DIR, MOVE_MS

__all__ = ["match"]


@click.command()
@click.option(
    "--bot",
    "specs",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="A bot, once per seat in seat order: http://HOST:PORT, unix:/PATH, or 'cmd:COMMAND --port {port}'.",
)
@click.option("--seed", type=int, required=True, help="The deal's seed.")
@click.option(
    "--rules",
    "rules_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML file with a [rules] table (deck, variants, turn_limit).",
)
@MOVE_MS
@click.option(
    "--bank-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Time bank per game: time over --move-ms is taken from it.",
)
@click.option(
    "--strikes",
    type=int,
    default=FaultPolicy().strikes,
    show_default=True,
    help="Disqualify at the N-th fault (0: never).",
)
@click.option("--forfeit-on-first", is_flag=True, help="Disqualify at the first fault.")
@click.option("--secret", help="Sign every request with this secret.")
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the replay record here (gzip JSON lines).",
)
@LOG_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def match(
    specs: tuple[str, ...],
    seed: int,
    rules_path: Path | None,
    move_ms: int,
    bank_ms: int,
    strikes: int,
    forfeit_on_first: bool,
    secret: str | None,
    replay_path: Path | None,
    log_dir: Path | None,
    as_json: bool,
) -> None:
    """Play one game and print the result, faults and latencies.

    Bots are given once per seat, in seat order. Exit code 0 whenever the game
    completes (a bot's faults are in the output); 1 if a bot cannot be reached
    or started; 2 for bad options or a bad rules file.
    """
    rules = Rules()
    if rules_path is not None:
        try:
            rules = load_toml_struct(rules_path, "rules", Rules)
        except ConfigError as e:
            raise click.UsageError(str(e)) from None
    try:
        rules.validate(len(specs))
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    timeouts = Timeouts(move_ms=move_ms, bank_ms=bank_ms)
    policy = FaultPolicy(strikes=strikes, forfeit_on_first=forfeit_on_first)
    logs = log_folder(log_dir)
    echo(engine_status(), err=True)
    result = asyncio.run(_match(specs, seed, rules, timeouts, policy, secret, replay_path, logs))
    if as_json:
        click.echo(json_for_terminal(msgspec.json.encode(result).decode()))
        return
    echo(format_result(result))
    if replay_path is not None:
        echo(f"replay written to {replay_path}")
    if any(isinstance(s, str) and s.startswith("cmd:") for s in specs):
        echo(f"command bots' logs in {logs}")


async def _match(
    specs: Sequence[str],
    seed: int,
    rules: Rules,
    timeouts: Timeouts,
    policy: FaultPolicy,
    secret: str | None,
    replay_path: Path | None,
    log_dir: Path,
) -> MatchResult:
    async with contextlib.AsyncExitStack() as stack:
        session = make_session()
        stack.push_async_callback(session.close)
        bots: list[Bot] = []
        for spec in specs:
            bot = make_bot(spec, session=session, log_dir=log_dir, secret=secret)
            stack.push_async_callback(bot.close)
            bots.append(bot)
        ready = await asyncio.gather(*(b.handshake() for b in bots), return_exceptions=True)
        problems = [
            f"seat {seat} ({spec}): {outcome}"
            for seat, (spec, outcome) in enumerate(zip(specs, ready))
            if isinstance(outcome, BaseException)
        ]
        for outcome in ready:
            if isinstance(outcome, BaseException) and not isinstance(outcome, BotError):
                raise outcome
        if problems:
            raise click.ClickException(for_terminal("cannot start the game:\n" + "\n".join(problems)))
        return await play_match(bots, seed, rules=rules, timeouts=timeouts, policy=policy, replay=replay_path)
