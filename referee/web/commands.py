"""The service's click commands, registered on ``referee.cli.main``:

- ``referee serve --db PATH [--host H --port P]``: the classroom service;
- ``referee start --db PATH COMPETITION [--resume]``: play a competition's
  run from the command line (the served pages follow it live);
- ``referee replay GAME [--html OUT]``: a replay file as the viewer, in one
  self-contained HTML file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from referee import engine_status


@click.command()
@click.option("--db", "db_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The service database (created on first start); run folders go beside it.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port.")
@click.option("--reset-admin-token", is_flag=True, help="Replace the admin token and print the new one.")
@click.option("--max-submissions", default=5, show_default=True, type=click.IntRange(min=1),
              help="Submissions a team may make per --window seconds.")
@click.option("--window", default=60.0, show_default=True, type=click.FloatRange(min=1),
              help="The submission rate limit's window, in seconds.")
@click.option("--bot-networks", default="", metavar="CIDR,...",
              help="Networks where teams' URL bots may be although not public (a class LAN: "
                   "192.168.1.0/24). Loopback, link-local and this server's own addresses are refused "
                   "unless listed here.")
@click.option("--trusted-proxies", default="", metavar="CIDR,...",
              help="Reverse proxies in front of this server (127.0.0.1 for one on this host): a request "
                   "from one of them comes from the client its X-Forwarded-For names (the live-stream "
                   "cap per client counts by that address). Without it the header is ignored.")
@click.option("--allow-house-commands", is_flag=True,
              help="Let league files sent through the web start commands and open unix sockets on this "
                   "server (house bots). Off: only URL and image house bots.")
@click.option("--max-upload", default="1g", show_default=True, metavar="SIZE",
              help="The largest upload (docker save or source archive): bytes, or with k/m/g.")
@click.option("--live-rate", default="4m", show_default=True, metavar="SIZE",
              help="Bytes a second the live pages' updates send in all, at most (with k/m/g): with more "
                   "viewers, each is updated less often (at most once a second).")
@click.option("--secure-cookies", is_flag=True, help="Send the team session cookie over HTTPS only (behind TLS).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where runs, ladders and finals play their games: this process, or Ray workers "
                   "(pip install -e '.[ray]').")
@click.option("--address", help="With --executor ray: an existing cluster ('auto', 'ray://HOST:10001'); "
                                "default: a local one.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="With --executor ray: worker actors per run.")
@click.option("--header-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds a connection has to send its request line and headers (then 408, closed).")
@click.option("--body-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="A request body must arrive at --min-body-rate over each stretch of this many seconds "
                   "(else the connection is cut).")
@click.option("--min-body-rate", default="1k", show_default=True, metavar="SIZE",
              help="Bytes a second a request body must arrive at, at least (with k/m/g).")
@click.option("--idle-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds an idle kept-alive connection stays open.")
@click.option("--max-conns-per-client", default=64, show_default=True, type=click.IntRange(min=1),
              help="Connections open at once from one client address (IPv6: one /64; trusted proxies exempt).")
@click.option("--max-connections", default=0, show_default=True, type=click.IntRange(min=0),
              help="Connections open at once in all; 0: the open-file limit less 512 kept for the service "
                   "(and for connections being accepted).")
def serve(db_path: Path, host: str, port: int, reset_admin_token: bool, max_submissions: int,
          window: float, bot_networks: str, trusted_proxies: str, allow_house_commands: bool, max_upload: str,
          live_rate: str, secure_cookies: bool, executor: str, address: str | None, workers: int,
          header_timeout: float, body_timeout: float, min_body_rate: str, idle_timeout: float,
          max_conns_per_client: int, max_connections: int) -> None:
    """Serve the classroom service over the database DB.

    On the first start (or with --reset-admin-token) the admin token is
    printed, once: only its hash is stored.
    """
    from ..bots.container import parse_size
    from ..bots.netpolicy import AddressPolicy, parse_networks
    from .app import make_app
    from .db import ServiceDB
    from .state import Settings

    try:
        networks = parse_networks(bot_networks) if bot_networks.strip() else ()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bot-networks") from None
    try:
        proxies = parse_networks(trusted_proxies) if trusted_proxies.strip() else ()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--trusted-proxies") from None
    try:
        upload_cap = parse_size(max_upload)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--max-upload") from None
    try:
        live_bytes = parse_size(live_rate)
        if live_bytes < 1024:
            raise ValueError(f"at least 1k a second, got {live_rate!r}")
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--live-rate") from None
    policy = AddressPolicy.for_service(networks, listen=[(host, port)])
    # Slow clients (issue 24, item 5): timeouts and connection caps, more files, a log without floods.
    from . import server

    try:
        body_rate = parse_size(min_body_rate)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--min-body-rate") from None
    files_before, files = server.raise_file_limit()
    limits = server.Limits(header_timeout_s=header_timeout, body_timeout_s=body_timeout, min_body_rate=body_rate,
                           idle_timeout_s=idle_timeout, max_per_client=max_conns_per_client,
                           max_connections=max_connections or server.default_max_connections(files),
                           trusted_proxies=proxies)

    if executor == "ray":
        from ..tournament.executors import ExecutorError
        from .runs import start_ray

        try:
            start_ray(address)
        except ExecutorError as e:
            raise click.ClickException(str(e)) from None
    db = ServiceDB(db_path)
    try:
        token = db.ensure_admin_token(reset=reset_admin_token)
    finally:
        db.close()
    if token is not None:
        click.echo(f"admin token (shown once, keep it): {token}")
    app = make_app(db_path, Settings(submissions_per_window=max_submissions, window_s=window, bot_policy=policy,
                                     allow_house_commands=allow_house_commands, max_upload=upload_cap,
                                     secure_cookies=secure_cookies, executor=executor,
                                     executor_address=address, executor_workers=workers,
                                     trusted_proxies=proxies, live_bytes_per_s=live_bytes))
    click.echo(f"referee serve: http://{host}:{port}/  (database {db_path.resolve()})", err=True)
    click.echo(engine_status(), err=True)
    raised = f" (raised from {files_before})" if files > files_before else ""
    click.echo(f"open files: at most {files}{raised}; connections: at most {limits.max_connections} in all, "
               f"{limits.max_per_client} per client", err=True)
    server.run(app, host=host, port=port, limits=limits, repeat=server.setup_logging())


@click.command()
@click.option("--db", "db_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The service database.")
@click.argument("competition")
@click.option("--resume", is_flag=True, help="Continue the competition's last run (interrupted or failed).")
def start(db_path: Path, competition: str, resume: bool) -> None:
    """Play a run of COMPETITION (its id or name) here, with the teams'
    latest bots; a server over the same database shows it live."""
    from .db import ServiceDB
    from .runs import StartError, play_run, prepare_run

    db = ServiceDB(db_path)
    try:
        comp = db.competition(int(competition)) if competition.isdigit() else None
        comp = comp or db.competition_named(competition)
        if comp is None:
            click.echo(f"error: no competition {competition!r}", err=True)
            sys.exit(2)
        try:
            run, league = prepare_run(db, comp.id, resume=resume)
        except StartError as e:
            click.echo(f"error: {e.message}", err=True)
            sys.exit(2)
        click.echo(f"{comp.name}: run {run.id}, {len(league.bots)} bots, {run.total_games} games -> {run.out_dir}",
                   err=True)
        status = play_run(db, run, league, resume=resume)
    finally:
        db.close()
    click.echo(f"run {run.id}: {status}")
    if not status.startswith("finished"):
        sys.exit(130 if status.startswith("interrupted") else 2)


@click.command()
@click.argument("game", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the replay viewer, self-contained, to this file.")
def replay(game: Path, html_out: Path | None) -> None:
    """Show the replay file GAME (a game-NNNNNN.jsonl.gz): a summary, or with
    --html the step-by-step viewer as one self-contained HTML file."""
    from ..report import format_result
    from ..replay import ReplayError, frames
    from ..replay import read as read_replay
    from .viewer import standalone_html

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
        click.echo(f"game {data['game_id']}, seed {data['seed']}, {steps} steps; no result recorded "
                   "(the game did not finish)")
    if html_out is not None:
        html_out.write_text(standalone_html(data, title=f"replay {game.name}"), encoding="utf-8")
        click.echo(f"viewer written to {html_out}")


COMMANDS = (serve, start, replay)
