"""Two Ray nodes on one machine, each with its own Docker daemon, and a registry.

The services these tests need are started here and stopped at the end:

- a second ``dockerd`` with its own data root, exec root, pidfile, socket
  and bridge (a bridge of its own made with ``ip link``: a second daemon
  started with ``--bridge none`` deletes the first daemon's ``docker0``, see
  MACHINE-NOTES), iptables left alone, gVisor registered as on the first;
- Debian's ``docker-registry`` (distribution) on a free loopback port,
  storage in the test's folder (Docker talks plain HTTP to loopback);
- a Ray cluster of two nodes (``ray.cluster_utils.Cluster``): the head's
  workers use the machine's daemon, the second node's ``DOCKER_HOST`` is the
  second daemon.

Without root, a daemon, the registry or Ray, the tests skip and say why; with
``CI=true`` they fail instead (CI must run them).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import (
    FIGURES,
    WHY_SKIPPED,
    RegistryProcess,
    SecondDaemon,
    TwoNodes,
    has_link,
    missing,
    ray_head,
    skip_or_fail,
)
from tests.support.mounts import unmount_under


@pytest.fixture(scope="session")
def needs() -> None:
    if (why := missing()) is not None:
        skip_or_fail(why)


@pytest.fixture(scope="session")
def scratch(needs: None) -> Iterator[Path]:
    # Short: the second daemon's socket path must fit a unix socket address.
    folder = Path(tempfile.mkdtemp(prefix="rfcl-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def registry(scratch: Path) -> Iterator[RegistryProcess]:
    folder = scratch / "registry"
    folder.mkdir()
    reg = RegistryProcess(folder)
    reg.start()
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def second_daemon(scratch: Path) -> Iterator[SecondDaemon]:
    had_docker0 = has_link("docker0")
    folder = scratch / "d2"
    folder.mkdir()
    daemon = SecondDaemon(folder)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        # The first daemon's bridge is untouched by the second.
        assert has_link("docker0") == had_docker0, "the second dockerd took the first daemon's docker0"


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """{"greedy": tag, "tactician": tag} on the machine's daemon, built or reused."""
    from referee.bots.images.baseimage import build_bot_image
    from referee.bots.sandbox.docker_daemon import docker_client

    client = docker_client()
    t0 = time.perf_counter()
    found = {bot: build_bot_image(bot, client) for bot in ("greedy", "tactician")}
    FIGURES["sample images ready (built or reused)"] = f"{time.perf_counter() - t0:.1f} s"
    return found


@pytest.fixture(scope="session")
def two_nodes(
    scratch: Path, second_daemon: SecondDaemon, registry: RegistryProcess, images: dict[str, str]
) -> Iterator[TwoNodes]:
    """A Ray cluster of two nodes on this machine, the driver connected to it."""
    t0 = time.perf_counter()
    with ray_head(scratch / "ray") as cluster:
        nodes = TwoNodes(cluster, None, second_daemon, registry)
        nodes.add_second()
        FIGURES["two Ray nodes up"] = f"{time.perf_counter() - t0:.1f} s"
        yield nodes


@pytest.fixture(autouse=True)
def no_mounts_left(tmp_path: Path) -> Iterator[None]:
    """Nothing a test's bots mounted (their socket folders' tmpfs) outlives it, whatever failed."""
    yield
    unmount_under(tmp_path)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for reason in WHY_SKIPPED:
        terminalreporter.write_line(f"SKIPPED cluster tests: {reason}", yellow=True)
    if FIGURES:
        terminalreporter.write_line("cluster figures: " + "; ".join(f"{k}: {v}" for k, v in FIGURES.items()))
