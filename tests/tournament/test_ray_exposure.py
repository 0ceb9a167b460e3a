"""Who can reach the Ray cluster: a cluster of the executor's own listens on
loopback only and refuses a driver without its token; joining a cluster
that listens beyond loopback warns once, naming what must protect it."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

import pytest

from referee.tournament.executors import EXPOSURE_WARNED, RAY_AUTH_VARIABLES, exposed_ports

ROOT = Path(__file__).resolve().parents[2]
WARNING = "listens beyond loopback"

#: A stranger's driver: joins the cluster at argv[1] and runs a task there.
STRANGER = """
import os, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
print("JOINED as uid", ray.get(ray.remote(lambda: os.getuid()).remote()), flush=True)
"""

#: The service joining a cluster (``--address``), as ``referee serve`` does at start.
JOIN = """
import asyncio, sys
from referee.tournament.executors import RayExecutor
executor = RayExecutor(address=sys.argv[1], workers=0)
print("JOINED", flush=True)
asyncio.run(executor.close())
"""

#: A cluster as Ray starts one by default (today's code did the same): on the
#: machine's own address, no token. Prints its GCS address; ends at stdin's end.
EXPOSED = """
import logging, sys, ray
ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.WARNING,
         log_to_driver=False, _temp_dir=sys.argv[1])
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
ray.shutdown()
"""


def _env(**extra: str) -> dict[str, str]:
    """This environment without Ray's credentials and switches (a stranger's), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in (*RAY_AUTH_VARIABLES, EXPOSURE_WARNED)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


def _python(
    code: str, *args: str, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


# ------------------------------------------------------- the sockets of a process tree


def descendants(root: int) -> set[int]:
    """`root` and every process below it (Ray's GCS, raylet, agents, workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} print each 32-bit word of the address in host (little-endian) order.
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def listening(pids: set[int]) -> list[tuple[int, str, int]]:
    """Every TCP socket in the LISTEN state that one of `pids` holds: (pid, address, port)."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    found: list[tuple[int, str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                found.append((inodes[cols[9]], *_address(cols[1])))
    return found


def _not_loopback(sockets: list[tuple[int, str, int]]) -> list[str]:
    return [
        f"pid {pid} on {host}:{port}"
        for pid, host, port in sockets
        if not ipaddress.ip_address(host).is_loopback
    ]


# ------------------------------------------------------------------------ a cluster


#: The service's own cluster (no --address), started as ``referee serve`` starts
#: one, in a process of its own (so that no cluster an earlier test of this
#: process left behind is joined instead): prints its GCS address, then the
#: Ray variables it set (JSON), and keeps it up until stdin ends.
OWN = """
import asyncio, json, os, sys
import ray
from referee.tournament.executors import RAY_AUTH_VARIABLES, RayExecutor
executor = RayExecutor(workers=1)
assert ray.get(executor.workers[0].pid.remote(), timeout=120) > 0  # a worker actor is up, with its port
print(ray.get_runtime_context().gcs_address, flush=True)
print(json.dumps({k: os.environ[k] for k in RAY_AUTH_VARIABLES if k in os.environ}), flush=True)
sys.stdin.read()
asyncio.run(executor.close())
"""


class OwnCluster(NamedTuple):
    gcs: str
    #: The process that started it (the service).
    pid: int
    #: What it set in its environment for its cluster: what its practice processes inherit.
    env: dict[str, str]


@contextlib.contextmanager
def cluster_process(
    code: str, *args: str, env: dict[str, str], log: Path
) -> Iterator[tuple[int, IO[str], str]]:
    """A Python process running `code` that starts a Ray cluster, prints its GCS
    address first and keeps the cluster up until its stdin ends: (its pid, its
    stdout, the GCS address). Its stderr goes to `log`."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=ROOT,
        )
    try:
        assert proc.stdout is not None
        gcs = proc.stdout.readline().strip()
        assert gcs, f"the cluster did not start: {log.read_text()[-2000:]}"
        yield proc.pid, proc.stdout, gcs
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[OwnCluster]:
    """A cluster started as the service starts one (no --address)."""
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")
    with cluster_process(OWN, env=_env(), log=tmp_path / "own.log") as (pid, out, gcs):
        yield OwnCluster(gcs, pid, json.loads(out.readline()))


@pytest.mark.slow
def test_own_cluster_listens_on_loopback_only(own_cluster: OwnCluster) -> None:
    sockets = listening(descendants(own_cluster.pid))
    ports = {port for _, _, port in sockets}
    assert int(own_cluster.gcs.rpartition(":")[2]) in ports, f"the GCS's socket was not found among {sockets}"
    assert len(sockets) >= 4, f"too few Ray sockets found to check: {sockets}"
    assert _not_loopback(sockets) == []


@pytest.mark.slow
def test_a_stranger_driver_cannot_join_the_own_cluster(own_cluster: OwnCluster) -> None:
    from referee.tournament import executors

    if not executors.ray_has_token_auth():
        pytest.skip("this Ray has no token authentication (2.52 on): loopback is its only guard")
    # The token is the cluster's own, in a file and folder only this user reads.
    token = Path(own_cluster.env["RAY_AUTH_TOKEN_PATH"])
    assert (stat.S_IMODE(token.stat().st_mode), stat.S_IMODE(token.parent.stat().st_mode)) == (0o600, 0o700)
    # The stranger keeps a loopback address as given (else Ray swaps it for the machine's).
    stranger = _python(
        STRANGER, own_cluster.gcs, env=_env(RAY_AUTH_MODE="disabled", **{executors.RAY_ONE_MACHINE: "0"})
    )
    assert "JOINED" not in stranger.stdout, f"a driver without the token ran a task: {stranger.stdout}"
    assert stranger.returncode != 0
    assert "Authentication token is missing or incorrect" in stranger.stderr, stranger.stderr[-2000:]


@pytest.mark.slow
def test_joining_the_own_cluster_works_and_does_not_warn(own_cluster: OwnCluster) -> None:
    """A practice game's process joins the service's cluster with the environment it inherits."""
    join = _python(JOIN, own_cluster.gcs, env=_env(**own_cluster.env))
    assert "JOINED" in join.stdout, join.stderr[-2000:]
    assert WARNING not in join.stderr


@pytest.mark.slow
def test_joining_a_cluster_reachable_beyond_loopback_warns_once(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")
    # Ray's socket paths must stay short (108 bytes): not under pytest's tmp_path.
    folder = tempfile.mkdtemp(prefix="referee-ray-test-")
    try:
        with cluster_process(
            EXPOSED, folder, env=_env(RAY_AUTH_MODE="disabled"), log=tmp_path / "exposed.log"
        ) as (_, _, gcs):
            if ipaddress.ip_address(gcs.rpartition(":")[0].strip("[]")).is_loopback:
                pytest.skip(f"this machine has no address beyond loopback (Ray chose {gcs})")
            join = _python(JOIN, gcs, env=_env(RAY_AUTH_MODE="disabled"))
            assert "JOINED" in join.stdout, join.stderr[-2000:]
            assert join.stderr.count(WARNING) == 1, join.stderr[-2000:]
            line = next(line for line in join.stderr.splitlines() if WARNING in line)
            assert f"{gcs} (GCS)" in line
            for words in ("private network", "firewall", "token", "docs/scale-out.md"):
                assert words in line
            # Its practice processes inherit that it was said: not again.
            again = _python(JOIN, gcs, env=_env(RAY_AUTH_MODE="disabled", **{EXPOSURE_WARNED: "1"}))
            assert "JOINED" in again.stdout and WARNING not in again.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_exposed_ports_lists_what_is_not_loopback() -> None:
    nodes = [
        {"Alive": True, "NodeManagerAddress": "10.0.0.6", "NodeManagerPort": 41, "ObjectManagerPort": 42},
        {"Alive": True, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": 43, "ObjectManagerPort": 44},
        {"Alive": False, "NodeManagerAddress": "10.0.0.7", "NodeManagerPort": 45},
    ]
    assert exposed_ports("127.0.0.1:6379", nodes) == ["10.0.0.6:41 (raylet)", "10.0.0.6:42 (object manager)"]
    assert exposed_ports("[::1]:6379", nodes[1:2]) == []
    assert exposed_ports("head.example:6379", []) == ["head.example:6379 (GCS)"]
    assert exposed_ports("ray://10.0.0.5:10001", []) == ["ray://10.0.0.5:10001 (GCS)"]
