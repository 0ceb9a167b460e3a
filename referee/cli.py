"""The ``referee`` command line (a click group; add commands with ``@main.command()``).

- ``referee match --bot SPEC --bot SPEC [...] --seed N``: play one game and print
  the result, the faults and the latencies.
- ``referee check URL``: a compliance check for bot authors: handshake, every
  request kind, timing, legal answers to scripted states.

A bot SPEC is a base URL (``http://127.0.0.1:8001``), a unix socket
(``unix:/path/to/bot.sock``), or ``cmd:`` and a command the referee starts,
with ``{port}`` where the port goes (``cmd:python -m sample_bots.random --port
{port}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import click
import msgspec

from protocol.messages import (
    Rules,
    Timeouts,
)
from referee import __version__, engine_status
from referee.bots import Bot, BotError, CommandBot, make_session
from referee.bots.factory import BotFactory, parse_spec
from referee.check import CheckLine, OutputProbe, run_checks
from referee.cli_options import checked_registry, executor_options
from referee.config import ConfigError, load_toml_struct
from referee.match import play_match
from referee.record import FaultPolicy, MatchResult
from referee.report import format_h2h, format_result, format_settled, format_table
from referee.textsafe import for_terminal, json_for_terminal

__all__ = ["main", "make_bot"]


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


def _echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """click.echo for every line these commands print: it may quote a bot (its
    self-declared name, its output, its errors), so no control character
    reaches the terminal as one (:func:`referee.textsafe.for_terminal`)."""
    click.echo(for_terminal(text), err=err, nl=nl)


def _logs(log_dir: Path | None) -> Path:
    """The folder for command bots' logs: `log_dir`, else a new temporary one."""
    return log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="referee-logs-"))


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
        from .bots.sandbox.instance import cli_instance, use

        try:
            use(cli_instance(instance_id))
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--instance") from None


# --------------------------------------------------------------------- bots


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


# -------------------------------------------------------------------- match


@main.command()
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
    logs = _logs(log_dir)
    _echo(engine_status(), err=True)
    result = asyncio.run(_match(specs, seed, rules, timeouts, policy, secret, replay_path, logs))
    if as_json:
        click.echo(json_for_terminal(msgspec.json.encode(result).decode()))
        return
    _echo(format_result(result))
    if replay_path is not None:
        _echo(f"replay written to {replay_path}")
    if any(isinstance(s, str) and s.startswith("cmd:") for s in specs):
        _echo(f"command bots' logs in {logs}")


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


@main.command()
@click.argument("url")
@click.option("--secret", help="The bot's secret: requests are signed, and a forged one must be refused.")
@MOVE_MS
@LOG_DIR
def check(url: str, secret: str | None, move_ms: int, log_dir: Path | None) -> None:
    """Check that the bot at URL follows the protocol.

    URL is the bot's address (http://127.0.0.1:8001, unix:/path/to.sock), or
    cmd:COMMAND with {port} where the port goes: the referee starts the bot,
    checks it and stops it (cmd:python mybot.py --port {port}).

    Handshake, /start, /act on scripted positions (set-up choice, a plain play,
    a forced pick-up, a 3DOWN flip, an extra action with a draw, the V6 swap),
    unknown fields, timing, the signature (with --secret), /end. One line per
    check, PASS or FAIL with what to fix; exit code 1 on any failure.
    """
    timeouts = Timeouts(move_ms=move_ms)
    if url.startswith("cmd:"):
        logs = _logs(log_dir)
        bot = make_bot(url, session=None, log_dir=logs, secret=secret, param_hint="URL")
        assert isinstance(bot, CommandBot)
        _echo(f"starting {url[len('cmd:') :]}")
        lines = asyncio.run(_check_command(bot, secret, timeouts))
        where = f"the bot's stdout and stderr: {bot.stdout_path}, {bot.stderr_path}"
    else:
        try:
            parse_spec(url)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="URL") from None
        _echo(f"checking {url}")
        lines = asyncio.run(run_checks(url, secret=secret, timeouts=timeouts))
        where = ""
    for line in lines:
        _echo(line.render())
    failed = sum(1 for line in lines if not line.ok)
    _echo(f"{len(lines) - failed} passed, {failed} failed")
    if where:
        _echo(where)
    if failed:
        sys.exit(1)


async def _check_command(bot: CommandBot, secret: str | None, timeouts: Timeouts) -> list[CheckLine]:
    """Start the command bot, check it at its address, stop it."""
    begun = time.perf_counter()
    try:
        await bot.launch()
    except BotError as e:
        return [CheckLine(False, "start", str(e), "run the command by hand and read its errors")]
    try:
        took = (time.perf_counter() - begun) * 1000
        started = CheckLine(True, "start", f"answered GET / at {bot.url} {took:.0f} ms after starting")
        assert bot.url is not None
        probe = OutputProbe([bot.stdout_path, bot.stderr_path])
        return [started, *await run_checks(bot.url, secret=secret, timeouts=timeouts, output=probe)]
    finally:
        await bot.stop()


# ------------------------------------------------------------- tournaments


@main.command()
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
        _echo(engine_status(), err=True)
        _echo(
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
        _echo(f"error: {e}", err=True)
        sys.exit(2)
    except Interrupted as e:
        cmd = f"referee tournament {shlex.quote(str(league_file))} --out {shlex.quote(str(t.out))} --resume"
        _echo(f"\n{e}. To continue:\n  {cmd}", err=True)
        sys.exit(130)
    _echo(format_table(standings))
    _echo(format_settled(standings, t.confidence))
    _echo("")
    _echo(format_h2h([s.bot for s in standings], t.head_to_head))
    _echo(f"\nstandings: {t.out / 'standings.json'}", err=True)


def _games(t: Any) -> str:
    """How many games a tournament plays, as its first line says it."""
    scheduler = t.scheduler
    if scheduler.total is not None:
        return f"{scheduler.total} games ({t.league.tournament.schedule})"
    return f"adaptive: until settled, at most {scheduler.limit} games"


@main.command()
@click.argument("out", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print standings.json as it is.")
def standings(out: Path, as_json: bool) -> None:
    """Print the standings of the tournament whose output folder is OUT."""
    from referee.tournament.league import LeagueError
    from referee.tournament.runner import load_confidence, load_h2h, load_standings

    try:
        rows = load_standings(out)
    except LeagueError as e:
        _echo(f"error: {e}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json_for_terminal((out / "standings.json").read_text()), nl=False)
        return
    _echo(format_table(rows))
    _echo(format_settled(rows, load_confidence(out)))
    _echo("")
    _echo(format_h2h([s.bot for s in rows], load_h2h(out)))


# ------------------------------- the classroom service and container clean-up


def _register() -> None:
    from referee.containers_cli import containers_cleanup
    from referee.web.commands import COMMANDS

    for command in COMMANDS:
        main.add_command(command)
    main.add_command(containers_cleanup, "cleanup")


_register()


if __name__ == "__main__":
    main()
