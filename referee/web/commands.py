"""The service's click commands, registered on ``referee.cli.main``:

- ``referee serve --db PATH [--host H --port P]``: the classroom service;
- ``referee start --db PATH COMPETITION [--resume]``: play a competition's
  run from the command line (the served pages follow it live);
- ``referee replay GAME [--html OUT]``: a replay file as the viewer, in one
  self-contained HTML file;
- ``referee backup --db PATH OUT``, ``referee restore OUT --db PATH
  [--force]``: a consistent copy of the service while it runs, and back
  (:mod:`referee.web.backup`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from referee import engine_status
from referee.cli_options import checked_registry, executor_options

if TYPE_CHECKING:  # generic in click 8.2 and newer only
    from ..service.store import ServiceDB

    _IntParam = click.ParamType[int]
else:
    _IntParam = click.ParamType


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


@click.command()
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The service database (created on first start); run folders go beside it.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port.")
@click.option("--reset-admin-token", is_flag=True, help="Replace the admin token and print the new one.")
@click.option(
    "--max-submissions",
    default=5,
    show_default=True,
    type=click.IntRange(min=1),
    help="Submissions a team may make per --window seconds.",
)
@click.option(
    "--window",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="The submission rate limit's window, in seconds.",
)
@click.option(
    "--bot-networks",
    default="",
    metavar="CIDR,...",
    help="Networks where teams' URL bots may be although not public (a class LAN: "
    "192.168.1.0/24). Loopback, link-local and this server's own addresses are refused "
    "unless listed here.",
)
@click.option(
    "--trusted-proxies",
    default="",
    metavar="CIDR,...",
    help="Reverse proxies in front of this server (127.0.0.1 for one on this host): a request "
    "from one of them comes from the client its X-Forwarded-For names (the live-stream "
    "cap per client counts by that address). Without it the header is ignored.",
)
@click.option(
    "--allow-house-commands",
    is_flag=True,
    help="Let league files sent through the web start commands and open unix sockets on this "
    "server (house bots). Off: only URL and image house bots.",
)
@click.option(
    "--house-urls-anywhere",
    is_flag=True,
    help="Let a league file's house URL bots be at any address (loopback, this server's, a private "
    "network). Off: they are under the teams' address policy (--bot-networks).",
)
@click.option(
    "--max-upload",
    default="1g",
    show_default=True,
    type=Size(1),
    help="The largest upload (docker save or source archive): bytes, or with k/m/g.",
)
@click.option(
    "--max-build-growth",
    default="64m",
    show_default=True,
    type=Size(1024**2, "1m"),
    help="The most a source bot's build may add to its base image (its files and their "
    "compiled form), with k/m/g; a bigger one is refused.",
)
@click.option(
    "--max-image-unpacked",
    default="2g",
    show_default=True,
    type=Size(1024**2, "1m"),
    help="The most a docker save upload's layers may unpack to, all together (with k/m/g): "
    "counted before the Docker daemon sees the archive; a bigger one is refused.",
)
@click.option(
    "--min-free-disk",
    default="1g",
    show_default=True,
    type=Size(),
    help="Uploads are refused (507) while the data folder's disk has less than this free "
    "(with k/m/g; 0: no floor).",
)
@click.option(
    "--team-image-quota",
    default="2g",
    show_default=True,
    type=Size(),
    help="What a team's images, waiting uploads and the upload in flight may weigh in all "
    "(with k/m/g; 0: no quota); superseded versions nothing needs are pruned.",
)
@click.option(
    "--live-rate",
    default="4m",
    show_default=True,
    type=Size(1024, "1k a second"),
    help="Bytes a second the live pages' updates send in all, at most (with k/m/g): with more "
    "viewers, each is updated less often (at most once a second).",
)
@click.option(
    "--secure-cookies", is_flag=True, help="Send the team session cookie over HTTPS only (behind TLS)."
)
@executor_options(
    runs="Where runs, ladders and finals play their games",
    workers="worker actors per run",
    registry="every node must share this machine's Docker daemon",
)
@click.option(
    "--check-budget",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="The longest admission check, in all (its compliance checks and validation games): a bot "
    "slower than that is refused as too slow, and the next team's check starts.",
)
@click.option(
    "--runtime",
    metavar="NAME",
    help="Run every team's container (admission checks, runs, the ladder) under this runtime of "
    "the Docker daemon, over the league files' [containers] runtime: runsc for gVisor.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a connection has to send its request line and headers (then 408, closed).",
)
@click.option(
    "--body-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="A request body must arrive at --min-body-rate over each stretch of this many seconds "
    "(else the connection is cut).",
)
@click.option(
    "--min-body-rate",
    default="1k",
    show_default=True,
    type=Size(1),
    help="Bytes a second a request body must arrive at, at least (with k/m/g).",
)
@click.option(
    "--idle-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds an idle kept-alive connection stays open.",
)
@click.option(
    "--max-conns-per-client",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections open at once from one client address (IPv6: one /64; trusted proxies exempt).",
)
@click.option(
    "--max-connections",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Connections open at once in all; 0: the open-file limit less 512 kept for the service "
    "(and for connections being accepted).",
)
@click.option(
    "--fault-retry",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="A submission the service itself could not check (Docker unreachable, the disk full) waits "
    "this long before it is tried again, doubled each time up to 600 s; Docker is pinged as "
    "often, and once it answers every waiting submission goes on.",
)
@click.option(
    "--practice-per-hour",
    default=20,
    show_default=True,
    type=click.IntRange(min=0),
    help="Practice games a team may ask for in an hour (one in flight at a time; 0: none).",
)
@click.option(
    "--practice-timeout",
    default=900.0,
    show_default=True,
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="A practice game running longer than this is stopped, failed as the "
    "service's (each plays in a process of its own at the lowest priority).",
)
def serve(
    db_path: Path,
    host: str,
    port: int,
    reset_admin_token: bool,
    max_submissions: int,
    window: float,
    bot_networks: str,
    trusted_proxies: str,
    allow_house_commands: bool,
    house_urls_anywhere: bool,
    max_upload: int,
    live_rate: int,
    secure_cookies: bool,
    executor: str,
    address: str | None,
    workers: int,
    registry: str | None,
    max_build_growth: int,
    max_image_unpacked: int,
    min_free_disk: int,
    team_image_quota: int,
    check_budget: float,
    runtime: str | None,
    header_timeout: float,
    body_timeout: float,
    min_body_rate: int,
    idle_timeout: float,
    max_conns_per_client: int,
    max_connections: int,
    fault_retry: float,
    practice_per_hour: int,
    practice_timeout: float = 900.0,
) -> None:
    """Serve the classroom service over the database DB.

    On the first start (or with --reset-admin-token) the admin token is
    printed, once: only its hash is stored.
    """
    if runtime is not None:
        use_runtime(runtime)
    from ..bots.netpolicy import AddressPolicy, parse_networks
    from .app import make_app
    from .app_state import Settings

    try:
        networks = parse_networks(bot_networks) if bot_networks.strip() else ()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bot-networks") from None
    try:
        proxies = parse_networks(trusted_proxies) if trusted_proxies.strip() else ()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--trusted-proxies") from None
    policy = AddressPolicy.for_service(networks, listen=[(host, port)])
    # Slow clients (issue 24, item 5): timeouts and connection caps, more files, a log without floods.
    from . import server

    files_before, files = server.raise_file_limit()
    limits = server.Limits(
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        min_body_rate=min_body_rate,
        idle_timeout_s=idle_timeout,
        max_per_client=max_conns_per_client,
        max_connections=max_connections or server.default_max_connections(files),
        trusted_proxies=proxies,
    )

    registry = checked_registry(executor, registry)
    db = open_service_db(db_path)  # first: a database the service cannot use stops it before anything starts
    if executor == "ray":
        from ..tournament.executors import ExecutorError
        from .run_start import start_ray

        try:
            start_ray(address)
        except ExecutorError as e:
            db.close()
            raise click.ClickException(str(e)) from None
    try:
        token = db.ensure_admin_token(reset=reset_admin_token)
        # This install's id on the Docker daemon (kept in the database): in its image tags,
        # container names and labels; `referee cleanup --db DB` removes only its containers.
        from ..bots.sandbox.instance import current, use
        from .admission_queue import service_instance

        outer = current()
        instance = use(service_instance(db))
        click.get_current_context().call_on_close(lambda: use(outer))  # a command run in a test's process
        refuse_house_commands(db, allow_house_commands)
    finally:
        db.close()
    if token is not None:
        click.echo(f"admin token (shown once, keep it): {token}")
    click.echo(
        f"instance {instance.id}: images referee-{instance.id}-team-*, {instance.base_tag}; "
        f"containers labelled referee.instance={instance.id}",
        err=True,
    )
    app = make_app(
        db_path,
        Settings(
            submissions_per_window=max_submissions,
            window_s=window,
            bot_policy=policy,
            allow_house_commands=allow_house_commands,
            max_upload=max_upload,
            secure_cookies=secure_cookies,
            executor=executor,
            executor_address=address,
            executor_workers=workers,
            executor_registry=registry,
            trusted_proxies=proxies,
            live_bytes_per_s=live_rate,
            max_build_growth=max_build_growth,
            max_image_unpacked=max_image_unpacked,
            min_free_disk=min_free_disk,
            team_image_quota=team_image_quota,
            check_budget_s=check_budget,
            house_urls_anywhere=house_urls_anywhere,
            fault_retry_s=fault_retry,
            practice_per_hour=practice_per_hour,
            practice_timeout_s=practice_timeout,
        ),
    )
    click.echo(f"referee serve: http://{host}:{port}/  (database {db_path.resolve()})", err=True)
    click.echo(engine_status(), err=True)
    raised = f" (raised from {files_before})" if files > files_before else ""
    click.echo(
        f"open files: at most {files}{raised}; connections: at most {limits.max_connections} in all, "
        f"{limits.max_per_client} per client",
        err=True,
    )
    server.run(app, host=host, port=port, limits=limits, repeat=server.setup_logging())


@click.command()
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The service database.",
)
@click.argument("competition")
@click.option("--resume", is_flag=True, help="Continue the competition's last run (interrupted or failed).")
@click.option(
    "--runtime",
    metavar="NAME",
    help="Run the teams' containers under this runtime of the Docker daemon (runsc: gVisor).",
)
@click.option(
    "--allow-house-commands",
    is_flag=True,
    help="Play a league whose house bots start commands or open unix sockets on this machine "
    "(as referee serve --allow-house-commands). Off: such a league is refused.",
)
def start(
    db_path: Path,
    competition: str,
    resume: bool,
    runtime: str | None = None,
    allow_house_commands: bool = False,
) -> None:
    """Play a run of COMPETITION (its id or name) here, with the teams'
    latest bots; a server over the same database shows it live."""
    if runtime is not None:
        use_runtime(runtime)
    from ..bots.sandbox.instance import current, use
    from ..service.errors import ServiceError
    from .admission_queue import retag_pinned, service_instance
    from .run_start import play_run, prepare_run
    from .validation import parse_id

    db = open_service_db(db_path)
    try:
        outer = current()
        instance = use(service_instance(db))  # the service's instance: its names, labels, pins
        click.get_current_context().call_on_close(lambda: use(outer))
        retag_pinned(instance, db.pinned_images())
        cid = parse_id(competition)  # a name may be all digits too; an id past SQLite's range is none
        comp = db.competition(cid) if cid is not None else None
        comp = comp or db.competition_named(competition)
        if comp is None:
            click.echo(f"error: no competition {competition!r}", err=True)
            sys.exit(2)
        try:
            run, league = prepare_run(db, comp.id, resume=resume, allow_commands=allow_house_commands)
        except ServiceError as e:
            click.echo(f"error: {e.message}", err=True)
            sys.exit(2)
        click.echo(
            f"{comp.name}: run {run.id}, {len(league.bots)} bots, {run.total_games} games -> {run.out_dir}",
            err=True,
        )
        status = play_run(db, run, league, resume=resume)
    finally:
        db.close()
    click.echo(f"run {run.id}: {status}")
    if not status.startswith("finished"):
        sys.exit(130 if status.startswith("interrupted") else 2)


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
        click.echo(
            f"game {data['game_id']}, seed {data['seed']}, {steps} steps; no result recorded "
            "(the game did not finish)"
        )
    if html_out is not None:
        html_out.write_text(standalone_html(data, title=f"replay {game.name}"), encoding="utf-8")
        click.echo(f"viewer written to {html_out}")


@click.command("backup")
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The service database (the one referee serve --db uses).",
)
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def backup_command(db_path: Path, out: Path) -> None:
    """Copy the service database and its data folder into the new folder
    OUT, consistently, while the service runs (SQLite's online backup for
    every database, each copy checked); OUT/manifest.json lists every file
    with its size and SHA-256."""
    from ..service.store import StoreError
    from .backup import BackupError, backup
    from .db_check import explain

    try:
        backup(db_path, out, say=click.echo)
    except BackupError as e:
        raise click.ClickException(str(e)) from None
    except StoreError as e:
        raise click.ClickException(f"{explain(db_path, e)} (no backup was made)") from None


@click.command("restore")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--db",
    "db_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the service database goes (its data folder beside it).",
)
@click.option("--force", is_flag=True, help="Replace the database and data folder that are there.")
@click.option(
    "--allow-house-commands",
    is_flag=True,
    help="Accept a backup whose leagues have house bots that start commands or open unix sockets "
    "(for a service run with referee serve --allow-house-commands). Off: such a backup is refused.",
)
def restore_command(folder: Path, db_path: Path, force: bool, allow_house_commands: bool = False) -> None:
    """Restore the backup FOLDER (made by referee backup) as the service
    database --db and its data folder, after checking every file against
    its manifest and the database as the service would (whole, a schema
    this referee knows, every path inside the data folder, no house command
    unless --allow-house-commands); a database that is there is replaced
    only with --force (stop the service first). A backup is untrusted
    input: a link in it, or a file outside it, refuses it whole."""
    from .backup import BackupError, restore

    try:
        restore(folder, db_path, force=force, allow_house_commands=allow_house_commands, say=click.echo)
    except BackupError as e:
        raise click.ClickException(str(e)) from None


def open_service_db(db_path: Path) -> ServiceDB:
    """The service database, checked (:func:`~referee.web.db_check.check_database`:
    SQLite, whole, a schema this referee knows, writable, every path it holds
    inside its data folder) and upgraded to this code's schema. A database
    that fails stops the command with one line (what, the file, what to do),
    before anything reads a row of it."""
    from ..service.store import SchemaError, ServiceDB, StoreError
    from .db_check import DatabaseProblem, check_database, check_writable, explain

    try:
        if db_path.exists():
            check_writable(db_path)
            check_database(db_path)
        return ServiceDB(db_path)
    except (DatabaseProblem, SchemaError) as e:
        raise click.ClickException(str(e)) from None
    except (StoreError, OSError) as e:
        raise click.ClickException(explain(db_path, e)) from None


def refuse_house_commands(db: ServiceDB, allowed: bool) -> list[str]:
    """At the service's start: one line (said on stderr) for each competition
    whose league, or a stored league a run would resume with, has a house
    bot that is a command or a unix socket while the service runs without
    ``--allow-house-commands`` (a league made under the flag, restored, or
    edited by hand): its runs, ladder, final and practice games are refused
    (:func:`~referee.web.run_start.check_house_commands`), not played."""
    from .db_check import house_command_leagues

    if allowed:
        return []
    lines = [f"refused: {h.line()}" for h in house_command_leagues(db.db)]
    for line in lines:
        click.echo(line, err=True)
    return lines


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


COMMANDS = (serve, start, replay, backup_command, restore_command)
