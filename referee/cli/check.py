"""``referee check URL``: the service's admission check, on the author's machine.

The same code as the service's (:func:`referee.admission.admit`): the
compliance check (handshake, every request kind, timing, legal answers to
scripted states) and then the validation games against the same house bot,
with the rules, timeouts, fault policy, table and time budget of a league
file (``--league``) or of a running competition (``--competition URL --token
T``, from ``GET /api/competitions/{cid}/admission``). Exit code 1 exactly
when the service would refuse the bot, with the reason its report gives.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import aiohttp
import click
import msgspec

from protocol.messages import Timeouts

from ..admission import AdmissionReport, AdmissionSettings, admit
from ..bots.factory import parse_spec
from .bots import echo, log_folder
from .options import LOG_DIR, MOVE_MS

__all__ = ["check", "competition_api", "fetch_admission"]

#: The bot's name at its tables in a local check (the service uses the team's).
SEAT_NAME = "you"


class FetchError(click.ClickException):
    """The competition's settings could not be fetched: no verdict on the bot (exit code 2)."""

    exit_code = 2


def competition_api(url: str) -> str:
    """``…/api/competitions/{cid}/admission`` for a competition's URL: its
    page (``http://host/c/3``, what the team page links), or its API URL
    (``http://host/api/competitions/3``). Raises ``ValueError`` saying which
    URLs are meant."""
    m = re.fullmatch(r"(https?://[^/?#]+(?:/[^?#]*?)?)/(?:c|api/competitions)/(\d+)(?:/[^?#]*)?", url.strip())
    if m is None:
        raise ValueError(
            f"{url!r}: give the competition's page (http://HOST:PORT/c/ID, as the team page links it)"
        )
    return f"{m.group(1)}/api/competitions/{m.group(2)}/admission"


async def fetch_admission(url: str, token: str) -> AdmissionSettings:
    """The admission check's settings of the competition at `url`, asked with
    the team's `token`; a :class:`FetchError` saying what went wrong."""
    api = competition_api(url)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            session.get(api, headers={"Authorization": f"Bearer {token}"}) as r,
        ):
            body = await r.read()
            status = r.status
    except (aiohttp.ClientError, TimeoutError) as e:
        raise FetchError(f"cannot reach the competition at {api}: {e or type(e).__name__}") from None
    if status != 200:
        try:
            why = str(msgspec.json.decode(body)["error"])
        except (msgspec.DecodeError, KeyError, TypeError):
            why = body[:200].decode("utf-8", "replace")
        hint = " (is --token your team's token for this competition?)" if status in (401, 403) else ""
        raise FetchError(f"{api} answered HTTP {status}: {why}{hint}")
    try:
        return msgspec.json.decode(body, type=AdmissionSettings)
    except msgspec.DecodeError as e:
        raise FetchError(f"{api}: not the admission settings of a referee service: {e}") from None


def _settings(
    ctx: click.Context, league: Path | None, competition: str | None, token: str | None, move_ms: int
) -> AdmissionSettings:
    """The check's settings: the league file's, the competition's, or a league
    file with nothing in it (and --move-ms)."""
    if league is not None and competition is not None:
        raise click.UsageError("give --league or --competition, not both")
    if (competition is None) != (token is None):
        raise click.UsageError("--competition and --token go together (the team's token, from the teacher)")
    if ctx.get_parameter_source("move_ms") == click.core.ParameterSource.COMMANDLINE and (
        league is not None or competition is not None
    ):
        raise click.UsageError("--move-ms is the league's [timeouts] move_ms with --league or --competition")
    from ..tournament.league import League, LeagueError, load_league

    if competition is not None:
        assert token is not None
        try:
            competition_api(competition)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--competition") from None
        return asyncio.run(fetch_admission(competition, token))
    if league is not None:
        try:
            return AdmissionSettings.of_league(load_league(league, bots_to_come=True))
        except LeagueError as e:
            raise click.UsageError(str(e)) from None
    return AdmissionSettings.of_league(League(timeouts=Timeouts(move_ms=move_ms)))


@click.command()
@click.argument("url")
@click.option("--secret", help="The bot's secret: requests are signed, and a forged one must be refused.")
@click.option(
    "--league",
    "league_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Play the validation games with this league file's rules, timeouts, faults and table.",
)
@click.option(
    "--competition",
    metavar="URL",
    help="Play them as this competition of a running service does (its page, http://HOST:PORT/c/ID).",
)
@click.option("--token", metavar="TOKEN", help="With --competition: the team's token.")
@MOVE_MS
@LOG_DIR
@click.pass_context
def check(
    ctx: click.Context,
    url: str,
    secret: str | None,
    league_path: Path | None,
    competition: str | None,
    token: str | None,
    move_ms: int,
    log_dir: Path | None,
) -> None:
    """Check the bot at URL as the service's admission check does.

    URL is the bot's address (http://127.0.0.1:8001, unix:/path/to.sock), or
    cmd:COMMAND with {port} where the port goes: the referee starts the bot,
    checks it and stops it (cmd:python mybot.py --port {port}).

    Handshake, /start, /act on scripted positions (set-up choice, a plain play,
    a forced pick-up, a 3DOWN flip, an extra action with a draw, the V6 swap),
    unknown fields, timing, the signature (with --secret), /end; then the
    validation games against the house bot, with the rules, timeouts and
    table of --league or --competition (default: a league file's defaults),
    in the service's time budget. One line per check, PASS or FAIL with what
    to fix; exit code 1 exactly when the service would refuse the bot, with
    its reason; 2 for bad options or a competition that cannot be asked.
    """
    settings = _settings(ctx, league_path, competition, token, move_ms)
    try:
        spec = parse_spec(url, secret=secret, name=SEAT_NAME)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="URL") from None
    folder = log_folder(log_dir)
    if spec.command is not None:
        echo(f"starting {url[len('cmd:') :]}")
    else:
        echo(f"checking {url}")
    report: AdmissionReport = asyncio.run(admit(spec, out_dir=folder, settings=settings))
    for line in report.lines:
        echo(line.render())
    if report.validation:
        echo(f"the validation games' replays (referee replay FILE): {folder / 'games'}")
    if report.output:
        echo("the bot's stdout and stderr: " + ", ".join(str(folder / o) for o in report.output))
    failed = sum(1 for line in report.lines if not line.ok)
    echo(f"{len(report.lines) - failed} passed, {failed} failed")
    if not report.ok:
        echo(f"the service would refuse this bot: {report.reason}")
        sys.exit(1)
