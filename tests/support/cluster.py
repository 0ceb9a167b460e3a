"""What the cluster tests share (a module of its own: conftest is not importable),
and ``benchmarks/cluster.py`` too (as ``tests.support.cluster``): a
second Docker daemon, a registry, a Ray cluster of one or two nodes on this
machine, a league of container bots and how to play it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from referee.bots import free_port
from referee.bots.sandbox.docker_daemon import DockerUnavailable, docker_client, docker_module
from referee.tournament.league import parse_league
from referee.tournament.runner import DETERMINISTIC_FIELDS, Tournament

#: Why the cluster tests were skipped (printed at the end of the run).
WHY_SKIPPED: list[str] = []
#: Measured figures, printed at the end of the run.
FIGURES: dict[str, str] = {}

RUNSC_CONFIG = (
    '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none", "--host-uds=create"]}}}\n'
)


def skip_or_fail(reason: str) -> None:
    import pytest

    reason = f"two-node cluster tests: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the cluster tests must run, but: {reason}", pytrace=False)
    if reason not in WHY_SKIPPED:
        WHY_SKIPPED.append(reason)
    pytest.skip(reason)


def missing() -> str | None:
    """Why this machine cannot run two nodes (the tests, benchmarks/cluster.py), or None."""
    if os.geteuid() != 0:
        return "it starts a second Docker daemon and a bridge: run it as root"
    for tool, package in (
        ("dockerd", "docker.io"),
        ("docker-registry", "docker-registry"),
        ("ip", "iproute2"),
    ):
        if shutil.which(tool) is None:
            return f"no {tool} here: apt-get install {package}"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed: pip install -e '.[ray]'"
    try:
        docker_client()
    except DockerUnavailable as e:
        return f"no Docker daemon answers: {e}"
    return None


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def has_link(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True, check=False).returncode == 0


class SecondDaemon:
    """A dockerd of its own (data root, exec root, pidfile, socket, bridge)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.bridge = f"rfbr{os.getpid() % 100000}"
        self.socket = folder / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.log = folder / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "172.31.251.1/24", "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        config = self.folder / "daemon.json"
        runsc = shutil.which("runsc")
        config.write_text(RUNSC_CONFIG % runsc if runsc else "{}\n")
        args = [
            "dockerd",
            "--config-file",
            str(config),
            "--data-root",
            str(self.folder / "data"),
            "--exec-root",
            str(self.folder / "exec"),
            "--pidfile",
            str(self.folder / "docker.pid"),
            "-H",
            self.host,
            "--bridge",
            self.bridge,
            "--iptables=false",
            "--ip-masq=false",
            "--ip-forward=false",
        ]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the second dockerd exited:\n{self.log.read_text()[-3000:]}")
            try:
                return bool(docker_module().DockerClient(base_url=self.host, timeout=5).ping())
            except Exception:
                return False

        wait_until(up, 60, "the second dockerd did not answer")

    def client(self) -> Any:
        return docker_module().DockerClient(base_url=self.host, timeout=60)

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                client = self.client()
                for c in client.containers.list(all=True):
                    c.remove(force=True)
            stop_process(self.proc, 60)
        if has_link(self.bridge):
            subprocess.run(["ip", "link", "delete", self.bridge], check=False)
        subprocess.run(["umount", "-R", str(self.folder / "exec")], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


class RegistryProcess:
    """Debian's docker-registry on 127.0.0.1:<free port>, storage in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.config = folder / "registry.yml"
        self.config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {folder / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.address}\n"
        )

    def start(self) -> None:
        log = (self.folder / "registry.log").open("ab")
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the registry exited:\n{(self.folder / 'registry.log').read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
                return True
            return False

        wait_until(up, 30, "the registry did not listen")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


class TwoNodes:
    """The cluster: `head` and `second` are Ray nodes (the second's workers on
    `daemon`; None until :meth:`add_second`)."""

    def __init__(self, cluster: Any, second: Any, daemon: SecondDaemon, registry: RegistryProcess) -> None:
        self.cluster = cluster
        self.second = second
        self.daemon = daemon
        self.registry = registry

    def node_ids(self) -> list[str]:
        import ray

        return [n["NodeID"] for n in cast(Any, ray).nodes() if n["Alive"]]

    def kill_second(self) -> None:
        """The second node dies at once (its raylet and workers killed)."""
        self.cluster.remove_node(self.second, allow_graceful=False)

    def add_second(self) -> None:
        self.second = self.cluster.add_node(num_cpus=1, env_vars={"DOCKER_HOST": self.daemon.host})
        self.cluster.wait_for_nodes()


@contextlib.contextmanager
def ray_head(temp: Path) -> Iterator[Any]:
    """A Ray cluster (``ray.cluster_utils.Cluster``) of one node of one CPU on
    this machine, its workers on the machine's Docker daemon, this process its
    driver; Ray's files under `temp`. Add nodes with :class:`TwoNodes`."""
    import ray
    from ray.cluster_utils import Cluster

    (temp / "ray").mkdir(parents=True, exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_TMPDIR")}
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_TMPDIR"] = str(temp)
    cluster: Any = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "temp_dir": str(temp),
                "env_vars": {"DOCKER_HOST": os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"},
            },
        )
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ------------------------------------------------------------ a league of container bots


def league_text(images: dict[str, str], *, rounds: int, name: str = "two nodes") -> str:
    """Three container bots (two of one image, one of another), 2-player tables: 6 games a round."""
    return f"""
[tournament]
name = "{name}"
seed = 11
table_size = 2
rounds = {rounds}
concurrency = 4

[timeouts]
move_ms = 2000

[containers]
memory = "96m"
pids = 48

[[bots]]
name = "greedy-a"
image = "{images["greedy"]}"

[[bots]]
name = "greedy-b"
image = "{images["greedy"]}"
env = {{ NOTE = "b" }}

[[bots]]
name = "tactician"
image = "{images["tactician"]}"
"""


def standings_of(out: Path) -> list[dict[str, Any]]:
    """A run's standings (OUT/standings.json), the fields that do not depend on timing."""
    rows = json.loads((out / "standings.json").read_text())
    return [{k: r[k] for k in DETERMINISTIC_FIELDS} for r in rows]


def play_league(text: str, out: Path, executor: Any, *, resume: bool = False) -> Tournament:
    """Play the league `text` into `out` on `executor` (closed afterwards)."""
    league = parse_league(text, str(out.parent / "league.toml"))
    t = Tournament(league, out, progress=False, log=lambda msg: None, executor=executor, resume=resume)

    async def go() -> None:
        try:
            await t.run()
        finally:
            await executor.close()

    asyncio.run(go())
    return t


def no_containers_left(two_nodes: TwoNodes) -> None:
    """No container of a node's pool is left on either daemon."""
    for client in (docker_client(), two_nodes.daemon.client()):
        left = [c.name for c in client.containers.list(all=True, filters={"label": "referee.node"})]
        assert left == [], left
