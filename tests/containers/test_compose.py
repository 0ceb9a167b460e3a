"""docker/'s two compose files, run as a teacher runs them, with Debian's
``docker-compose`` (1.29) (issue 28, item 4).

- ``docker/compose.service.yaml``, the deployment of docs/deploy.md: up (the
  service's image built from docker/Dockerfile), the admin token read from
  the service's log, then everything else through Caddy over HTTPS only,
  verified against the root certificate of Caddy's local CA taken from its
  container: a competition, two teams, a team signed in (its cookie Secure),
  the starter kit downloaded and uploaded by each team, checked and
  accepted, a run played; a backup while it runs and its restore; then down,
  leaving nothing (containers, volumes, networks, the images it built, the
  service's own images and containers).
- ``docker/compose.yaml``, the sample league with every bot a container: up
  until the referee exits, its standings written; then down.

No registry here: the images are built FROM base images made on this
machine (``REFEREE_BASE_IMAGE``: this Python with the referee's dependencies
and pip, told to use no index; ``REFEREE_CADDY_IMAGE``: Debian's caddy
binary; ``REFEREE_NODE_BASE_IMAGE``: the machine's node), kept for the next
run as the other container tests keep theirs. Ports are published
on 127.0.0.1 only, on ports the daemon picks; every request goes to
127.0.0.1. Skipped (failed under ``CI=true``) without ``docker-compose``,
``caddy`` or ``node``; skipped under ``REFEREE_TEST_RUNTIME``: compose starts
its containers under the daemon's default runtime, nothing of gVisor's is
tested here.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import io
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from referee.bots.sandbox.instance import Instance, current
from tests.support.containers import FIGURES, WHY_SKIPPED, remove_instance_images, skip_under_runtime

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "docker"
#: The name the class would type; resolved to 127.0.0.1 by the test's client alone.
HOSTNAME = "referee.test"
#: Where Caddy keeps its local CA's root certificate (XDG_DATA_HOME=/data).
CA_ROOT = "/data/caddy/pki/authorities/local/root.crt"
ADMIN_LINE = re.compile(r"admin token \(shown once, keep it\): (\S+)")
INSTANCE_LINE = re.compile(r"instance ([a-z0-9]+): images")
LEAGUE = """\
[tournament]
name = "class"
seed = 7
table_size = 2
rounds = 1

[timeouts]
move_ms = 2000
"""
#: pip inside the build of docker/Dockerfile, offline: every dependency is in
#: the base already. (pip reads a negated option's variable backwards:
#: PIP_NO_BUILD_ISOLATION=0 is what turns the isolated build environment off.)
PIP_OFFLINE = ("ENV PIP_NO_INDEX=1", "ENV PIP_NO_BUILD_ISOLATION=0")
#: What pip needs to install the referee editable, with no index (python:3.11-slim has them).
PIP_ITSELF = ("pip", "setuptools", "wheel")


def needed(why: str) -> NoReturn:
    """Skip saying `why`; under CI=true, fail: CI must run these tests."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the compose tests must run, but: {why}", pytrace=False)
    reason = f"the compose tests: {why}"
    if reason not in WHY_SKIPPED:  # printed at the end of the run, with the other container suites'
        WHY_SKIPPED.append(reason)
    pytest.skip(why)


def _figure(name: str, since: float) -> None:
    FIGURES[name] = f"{time.perf_counter() - since:.0f} s"


# ------------------------------------------------------------------ images


def service_packages() -> list[str]:
    """The distributions the referee image needs, from pyproject.toml: its
    dependencies, the containers extra, and pip's own."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["containers"]]
    names = [Requirement(text).name for text in wanted] + list(PIP_ITSELF)
    missing = []
    for name in names:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        needed(
            f"the referee image is built offline FROM this Python's packages, and {missing} are not installed"
        )
    return names


@pytest.fixture(scope="module")
def compose_exe() -> str:
    skip_under_runtime(
        {
            "runsc": "compose starts its containers under the daemon's default runtime: nothing of gVisor's here"
        }
    )
    exe = shutil.which("docker-compose")
    if exe is None:
        needed("docker-compose is not installed (apt-get install docker-compose)")
    return exe


@pytest.fixture(scope="module")
def service_base(docker_client: Any, compose_exe: str) -> str:
    """The tag of python:3.11-slim's stand-in: this Python, the referee's dependencies, pip."""
    from referee.bots.images.baseimage import build_base_image

    t0 = time.perf_counter()
    tag = f"referee-compose-base:{current().id}"
    build_base_image(docker_client, tag=tag, extra_packages=service_packages(), extra_changes=PIP_OFFLINE)
    _figure("compose base image ready (built or reused)", t0)
    return tag


@pytest.fixture(scope="module")
def caddy_image(docker_client: Any, compose_exe: str) -> str:
    """The tag of caddy:2's stand-in: Debian's caddy binary, run as the official image runs it."""
    from referee.bots.images.baseimage import build_program_image

    caddy = shutil.which("caddy")
    if caddy is None:
        needed("caddy is not installed (apt-get install caddy): Caddy's image is made from it")
    tag = f"referee-compose-caddy:{current().id}"
    build_program_image(
        docker_client,
        tag,
        {"usr/bin/caddy": Path(caddy)},
        [
            "ENV XDG_CONFIG_HOME=/config",
            "ENV XDG_DATA_HOME=/data",
            "WORKDIR /srv",
            'CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]',
        ],
    )
    return tag


@pytest.fixture(scope="module")
def node_base(docker_client: Any, compose_exe: str) -> str:
    """The tag of node:20-slim's stand-in, made from this machine's node."""
    from referee.bots.images.baseimage import build_node_base_image

    if shutil.which("node") is None:
        needed("the sample league's Node bot is built FROM this machine's node: there is none")
    build_node_base_image(docker_client)
    return current().node_base_tag


# ----------------------------------------------------------------- compose


class Project:
    """One compose project: `file` of docker/, under a name of its own, with `variables`."""

    def __init__(self, exe: str, file: str, name: str, variables: dict[str, str], env_file: Path) -> None:
        self.file = DOCKER_DIR / file
        self.name = name
        self.is_down = False
        # The variables in an env file, as a teacher's docker/.env holds them
        # (given with --env-file, so that a docker/.env of this checkout is not
        # read), and none of the caller's environment.
        env_file.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
        self.argv = [exe, "--env-file", str(env_file), "-p", name, "-f", str(self.file)]
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("REFEREE_", "COMPOSE_"))}
        # the legacy builder: no BuildKit here (and its buildx is missing)
        self.env = {**keep, "DOCKER_BUILDKIT": "0", "COMPOSE_DOCKER_CLI_BUILD": "0"}

    def __call__(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args], env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )

    def check(self, *args: str, timeout: float = 600) -> str:
        done = self(*args, timeout=timeout)
        assert done.returncode == 0, (
            f"docker-compose {' '.join(args)} failed ({done.returncode}):\n"
            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
        return done.stdout

    def down(self) -> None:
        """`down -v --rmi local`: its containers, networks, volumes and the images it built."""
        self.check("down", "-v", "--rmi", "local", "--remove-orphans", "-t", "30", timeout=300)
        self.is_down = True

    def logs(self, service: str) -> str:
        return self("logs", "--no-color", service).stdout

    def port(self, service: str, port: int) -> int:
        """The host port published for `service`'s `port`: on 127.0.0.1, never elsewhere."""
        host, _, number = self.check("port", service, str(port)).strip().rpartition(":")
        assert host == "127.0.0.1", f"{service}:{port} is published on {host!r}, not loopback only"
        return int(number)

    def container(self, client: Any, service: str) -> Any:
        return client.containers.get(self.check("ps", "-q", service).strip())

    def leftovers(self, client: Any) -> list[str]:
        """What of the project is still on the daemon (containers, volumes, networks)."""
        label = f"com.docker.compose.project={self.name}"
        found = [f"container {c.name}" for c in client.containers.list(all=True, filters={"label": label})]
        found += [f"volume {v.name}" for v in client.volumes.list(filters={"label": label})]
        found += [f"network {n.name}" for n in client.networks.list(filters={"label": label})]
        return found


@pytest.fixture
def compose(compose_exe: str, docker_client: Any, tmp_path: Path) -> Iterator[Callable[..., Project]]:
    """Makes projects; each is brought down (-v, its images) afterwards and must leave nothing."""
    made: list[Project] = []

    def make(file: str, **variables: str) -> Project:
        env_file = tmp_path / f"compose-{len(made)}.env"
        project = Project(compose_exe, file, f"referee-test-{os.getpid()}-{len(made)}", variables, env_file)
        made.append(project)
        return project

    yield make
    for project in made:
        if not project.is_down:
            project.down()
        left = project.leftovers(docker_client)
        assert not left, f"docker-compose down left {left}"


# ------------------------------------------------------------------ client


class Loopback(AbstractResolver):
    """Resolves HOSTNAME, and only it, to 127.0.0.1: the client talks to Caddy's
    published port by the name its certificate is for."""

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        if host != HOSTNAME:
            raise OSError(f"this test resolves {HOSTNAME} only, not {host}")
        return [
            ResolveResult(hostname=host, host="127.0.0.1", port=port, family=socket.AF_INET, proto=0, flags=0)
        ]

    async def close(self) -> None:
        return None


def ca_root(client: Any, project: Project) -> str:
    """Caddy's local CA root certificate (PEM), taken from its container, as
    `docker compose cp caddy:/data/caddy/pki/authorities/local/root.crt .` does."""
    deadline = time.monotonic() + 60
    while True:
        try:
            stream, _ = project.container(client, "caddy").get_archive(CA_ROOT)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.extractfile("root.crt")
                assert member is not None
                return member.read().decode()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def until(what: str, probe: Callable[[], Any], timeout: float) -> Any:
    """`await probe()` until it is truthy (then its value), at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def log_line(project: Project, service: str, pattern: re.Pattern[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = project.logs(service)
        if m := pattern.search(text):
            return m.group(1)
        assert time.monotonic() < deadline, f"no {pattern.pattern!r} in {service}'s log:\n{text[-3000:]}"
        time.sleep(0.5)


# ------------------------------------------------------------------- tests


async def test_the_service_deployment_plays_a_run_behind_caddy(
    compose: Callable[..., Project],
    docker_client: Any,
    service_base: str,
    caddy_image: str,
    tmp_path: Path,
) -> None:
    data = tmp_path / "srv"  # REFEREE_DATA: made beforehand, as the deployment's steps say
    data.mkdir()
    project = compose(
        "compose.service.yaml",
        REFEREE_HOSTNAME=HOSTNAME,
        REFEREE_DATA=str(data),
        REFEREE_HTTP="127.0.0.1:",  # loopback only, a port the daemon picks
        REFEREE_HTTPS="127.0.0.1:",
        REFEREE_BASE_IMAGE=service_base,
        REFEREE_CADDY_IMAGE=caddy_image,
        REFEREE_SERVE_OPTIONS="--practice-per-hour 0",
    )
    instance = None
    try:
        t0 = time.perf_counter()
        project.check("up", "-d", "--build", timeout=900)
        _figure("compose service: up --build", t0)
        admin = log_line(project, "service", ADMIN_LINE)  # what the teacher greps for
        instance = log_line(project, "service", INSTANCE_LINE)
        args = project.container(docker_client, "service").attrs["Args"]
        assert "--secure-cookies" in args and args[args.index("--trusted-proxies") + 1] == "127.0.0.1"
        assert "--practice-per-hour" in args, args  # REFEREE_SERVE_OPTIONS reaches the command
        https, http = project.port("caddy", 443), project.port("caddy", 80)
        tls = ssl.create_default_context(cadata=ca_root(docker_client, project))
        base = f"https://{HOSTNAME}:{https}"
        connector = aiohttp.TCPConnector(ssl=tls, resolver=Loopback())
        t1 = time.perf_counter()
        async with aiohttp.ClientSession(connector=connector) as http_client:
            await _a_run_through_caddy(http_client, base, http, admin)
            _figure("compose service: two uploads and a run through Caddy", t1)
            # docs/deploy.md's backup while it runs, and its restore
            t3 = time.perf_counter()
            db, backup = f"{data}/class.sqlite", f"{data}/backups/after-the-run"
            project.check("exec", "-T", "service", "referee", "backup", "--db", db, backup)
            assert (data / "backups" / "after-the-run" / "manifest.json").is_file()
            project.check("stop", "service")
            project.check("run", "--rm", "service", "restore", backup, "--db", db, "--force")
            project.check("up", "-d", "service")
            await until("the service answers again", lambda: _home(http_client, base), timeout=120)
            async with http_client.get(f"{base}/api/competitions/1/runs/1/games") as r:
                assert r.status == 200 and await r.json(), await r.text()  # the restored run's games
            _figure("compose service: backup, restore, up again", t3)
    finally:
        t2 = time.perf_counter()
        try:
            project.down()
            _figure("compose service: down", t2)
        finally:
            if instance is not None:  # what the service made through the socket
                left = docker_client.containers.list(
                    all=True, filters={"label": f"referee.instance={instance}"}
                )
                remove_instance_images(docker_client, Instance(instance, pins_file=tmp_path / "pins.json"))
                assert not left, f"the service left containers: {[c.name for c in left]}"


async def _home(client: aiohttp.ClientSession, base: str) -> bool:
    """Whether the home page answers 200 (502 from Caddy until the service listens)."""
    try:
        async with client.get(f"{base}/") as r:
            return r.status == 200
    except aiohttp.ClientConnectionError:
        return False


async def _a_run_through_caddy(client: aiohttp.ClientSession, base: str, http_port: int, admin: str) -> None:
    await until("the service answers through Caddy", lambda: _home(client, base), timeout=120)
    async with client.get(f"{base}/") as r:
        assert "Caddy" in r.headers.getall("Server"), r.headers
    # plain HTTP is sent to HTTPS
    async with client.get(f"http://{HOSTNAME}:{http_port}/", allow_redirects=False) as r:
        assert r.status in (301, 308) and r.headers["Location"].startswith(f"https://{HOSTNAME}"), r.headers
    # the admin: a competition and two teams
    async with client.post(
        f"{base}/api/competitions", json={"name": "class", "league": LEAGUE}, headers=auth(admin)
    ) as r:
        assert r.status == 201, await r.text()
        cid = (await r.json())["id"]
    teams = []
    for name in ("Team Ada", "Team Grace"):
        async with client.post(
            f"{base}/api/competitions/{cid}/teams", json={"name": name}, headers=auth(admin)
        ) as r:
            assert r.status == 201, await r.text()
            body = await r.json()
            teams.append((int(body["id"]), str(body["token"])))
    # a team signs in as its browser does: the session cookie is Secure (HTTPS only)
    tid, token = teams[0]
    async with client.post(
        f"{base}/login", data={"token": token}, headers={"Origin": base}, allow_redirects=False
    ) as r:
        assert r.status == 303, await r.text()
        cookie = next(c for c in r.headers.getall("Set-Cookie") if c.startswith("referee_session="))
        assert "Secure" in cookie and "HttpOnly" in cookie, cookie
    async with client.get(f"{base}/team/kit/python.zip") as r:  # the team page's download
        assert r.status == 200, await r.text()
        kit = await r.read()
    # each team uploads the starter kit; the service builds and checks it through the Docker socket
    uploads = []
    for tid, token in teams:
        async with client.post(
            f"{base}/api/competitions/{cid}/teams/{tid}/uploads?kind=source",
            data=kit,
            headers={**auth(token), "X-Note": "the starter kit, through Caddy"},
        ) as r:
            assert r.status == 201, await r.text()
            uploads.append((tid, token, (await r.json())["id"]))
    for tid, token, sid in uploads:

        async def settled(tid: int = tid, token: str = token, sid: int = sid) -> dict[str, Any] | None:
            async with client.get(
                f"{base}/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token)
            ) as r:
                assert r.status == 200, await r.text()
                detail: dict[str, Any] = await r.json()
            return detail if detail["submission"]["status"] in ("accepted", "refused") else None

        done = await until(f"team {tid}'s upload is checked", settled, timeout=400)
        assert done["submission"]["status"] == "accepted", json.dumps(done)[:3000]
    # the admin starts a run: the two teams' bots play, as containers
    async with client.post(f"{base}/api/competitions/{cid}/runs", headers=auth(admin)) as r:
        assert r.status == 202, await r.text()

    async def finished() -> dict[str, Any] | None:
        async with client.get(f"{base}/api/competitions/{cid}") as r:
            body: dict[str, Any] = await r.json()
        return body if body["run"]["status"] != "running" else None

    run = (await until("the run finishes", finished, timeout=300))["run"]
    assert run["status"] == "finished", run
    async with client.get(f"{base}/api/competitions/{cid}/runs/{run['id']}/games") as r:
        assert r.status == 200, await r.text()
        games = await r.json()
    assert games and all(sorted(g["seats"]) == ["Team Ada", "Team Grace"] for g in games), games
    assert all(g["faults"] == 0 and g["has_replay"] for g in games), games


def test_the_sample_league_compose_writes_its_standings(
    compose: Callable[..., Project], service_base: str, node_base: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    project = compose(
        "compose.yaml",
        REFEREE_BASE_IMAGE=service_base,
        REFEREE_NODE_BASE_IMAGE=node_base,
        REFEREE_OUT=str(out),
    )
    t0 = time.perf_counter()
    # the command of docker/compose.yaml's comment
    project.check("up", "--build", "--abort-on-container-exit", "--exit-code-from", "referee", timeout=1200)
    _figure("compose sample league: up until its standings", t0)
    standings = json.loads((out / "sample-league-containers" / "standings.json").read_text())
    assert sorted(row["bot"] for row in standings) == ["greedy", "node", "random", "searcher", "tactician"]
    assert all(row["games"] > 0 for row in standings), standings
