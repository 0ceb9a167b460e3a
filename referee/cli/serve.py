"""``referee serve --db PATH [--host H --port P]``: the classroom service."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import engine_status
from ..admission import CHECK_BUDGET_S
from .options import Size, checked_registry, executor_options, use_runtime
from .service_db import open_service_db

if TYPE_CHECKING:
    from ..service.store import ServiceDB

__all__ = ["LISTENING", "refuse_house_commands", "serve"]

#: How the line on stderr that ``referee serve`` says once it listens begins
#: (then its address, ``http://HOST:PORT/``, the port bound when --port is 0).
LISTENING = "referee serve: listening on "


def _admission_workers(value: int | None) -> int | None:
    """``--admission-workers``: a count of 1 or more (None: the default), else a BadParameter saying so."""
    if value is not None and value < 1:
        raise click.BadParameter(
            f"expected 1 or more submissions built and checked at once, got {value} "
            "(leave it out for the default: 1 here, one per node on the cluster)",
            param_hint="--admission-workers",
        )
    return value


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
    "server (house bots). Off: only URL and image house bots. The built-in house bots "
    '(builtin = "greedy"...) are the service\'s own programs: they play without it.',
)
@click.option(
    "--house-images/--no-house-images",
    default=True,
    show_default=True,
    help="At start, build the built-in house bots' images (random, greedy, tactician) from the "
    "service's own base image when Docker answers, and play them as images. Off, or without "
    "Docker: they play as the service's own programs.",
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
    "--admission-workers",
    type=int,
    default=None,
    metavar="N",
    callback=lambda ctx, param, value: _admission_workers(value),
    help="Submissions built and checked at the same time. Default: 1 on this machine; with "
    "--executor ray --registry, one per live node of the cluster (counted when the service joins it).",
)
@click.option(
    "--check-budget",
    default=CHECK_BUDGET_S,
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
    house_images: bool,
    house_urls_anywhere: bool,
    max_upload: int,
    live_rate: int,
    secure_cookies: bool,
    executor: str,
    address: str | None,
    workers: int,
    admission_workers: int | None,
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
    from ..web.app import make_app
    from ..web.app_state import Settings

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
    from ..web import server

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
        from ..service.runs import start_ray
        from ..tournament.executors import ExecutorError

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
        from ..service.pipeline import service_instance

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
    for line in uploads_status():
        click.echo(line, err=True)
    app = make_app(
        db_path,
        Settings(
            submissions_per_window=max_submissions,
            window_s=window,
            bot_policy=policy,
            allow_house_commands=allow_house_commands,
            house_images=house_images,
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
            admission_workers=admission_workers,
            house_urls_anywhere=house_urls_anywhere,
            fault_retry_s=fault_retry,
            practice_per_hour=practice_per_hour,
            practice_timeout_s=practice_timeout,
        ),
    )
    click.echo(engine_status(), err=True)
    raised = f" (raised from {files_before})" if files > files_before else ""
    click.echo(
        f"open files: at most {files}{raised}; connections: at most {limits.max_connections} in all, "
        f"{limits.max_per_client} per client",
        err=True,
    )
    database = db_path.resolve()

    def listening(bound: int) -> None:
        # Said once the socket listens and the service started: a script may wait for this line.
        click.echo(f"{LISTENING}http://{host}:{bound}/  (database {database})", err=True)

    server.run(app, host=host, port=port, limits=limits, repeat=server.setup_logging(), listening=listening)


def uploads_status() -> list[str]:
    """What ``referee serve`` says at start of the teams' uploads, in one
    block: ready (and the runtime their containers run under), or exactly
    what is missing and what the organiser installs (blocking: it asks the
    Docker daemon)."""
    from ..bots.sandbox.container_limits import ContainerLimits
    from ..bots.sandbox.docker_daemon import effective_runtime, is_gvisor
    from ..service.health import UPLOADS_INSTALL, docker_ok, uploads_missing

    missing = uploads_missing()
    if missing is not None:
        return [
            "uploads: NOT READY. The teams' uploads (source and docker save archives) are refused, each "
            "team told that the service is not ready (URL bots are taken).",
            f"  missing: {missing}",
            f"  a service that takes uploads needs Docker Engine running and {UPLOADS_INSTALL} "
            "(docs/service.md)",
        ]
    daemon = docker_ok()
    if daemon is not None:
        return [
            "uploads: WAITING FOR DOCKER. Uploads are taken but wait, unchecked, until the Docker daemon "
            "answers; they go on by themselves then.",
            f"  {daemon}",
            "  install Docker Engine (docs.docker.com/engine/install) and start it (systemctl start docker), "
            "or point DOCKER_HOST at it; the service's user needs its socket (the docker group)",
        ]
    runtime, where = effective_runtime(ContainerLimits())
    if is_gvisor(runtime):
        how = f"under gVisor ({runtime or 'the daemon default'}{', ' + where if where else ''})"
        return [f"uploads: ready (the teams' containers run {how})"]
    return [
        f"uploads: ready (the teams' containers run under {runtime or 'the daemon default runtime'}, not "
        "gVisor, unless a league's [containers] runtime says so: for gVisor's sandbox over every league, "
        "install runsc, register it with Docker and pass --runtime runsc; see docs/containers.md)"
    ]


def refuse_house_commands(db: ServiceDB, allowed: bool) -> list[str]:
    """At the service's start: one line (said on stderr) for each competition
    whose league, or a stored league a run would resume with, has a house
    bot that is a command or a unix socket while the service runs without
    ``--allow-house-commands`` (a league made under the flag, restored, or
    edited by hand): its runs, ladder, final and practice games are refused
    (:func:`~referee.service.runs.check_house_commands`), not played."""
    from ..service.db_check import house_command_leagues

    if allowed:
        return []
    lines = [f"refused: {h.line()}" for h in house_command_leagues(db.db)]
    for line in lines:
        click.echo(line, err=True)
    return lines
