"""Container bots for real: a Docker daemon, local images (no registry).

Every test here needs the daemon. Without one they skip, and the reason is
printed at the end of the run; with ``CI=true`` in the environment they fail
instead (CI must run them). The images (the local base image, the greedy
sample bot, the hostile bot) are built once per session, or reused when
their inputs did not change.

``REFEREE_TEST_RUNTIME=runsc`` runs the whole session's containers under that
runtime of the daemon (gVisor: ``.ci/run`` does a second pass so), as
``--runtime`` would; a daemon without it fails the session at the first
container test. A test that cannot hold under a runtime for a reason of the
runtime's own is skipped there by ``tests.support.containers.skip_under_runtime``, the reason stated.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.base import BotError
from referee.bots.sandbox import docker_daemon
from referee.bots.sandbox.instance import current
from referee.web.app_state import ROOM
from tests.support import PROGRAMS
from tests.support.containers import (
    FIGURES,
    TEST_RUNTIME,
    WHY_SKIPPED,
    remove_instance_images,
)
from tests.support.web import new_admin_token

#: This install's (a pytest-xdist worker is one of its own: tests/conftest.py).
HOSTILE_IMAGE = f"referee-hostile:{current().id}"
HOSTILE_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY hostile.py /app/hostile.py
ENV HOSTILE=probe
CMD ["python", "/app/hostile.py"]
"""


def _docker_or_skip() -> Any:
    try:
        return docker_daemon.docker_client()
    except docker_daemon.DockerUnavailable as e:
        reason = f"container tests need a Docker daemon: {e}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so the container tests must run, but: {reason}", pytrace=False)
        if reason not in WHY_SKIPPED:
            WHY_SKIPPED.append(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def session_runtime() -> Iterator[str | None]:
    """Every container of the session under ``$REFEREE_TEST_RUNTIME`` (when set),
    checked against the daemon first."""
    if TEST_RUNTIME is None:
        yield None
        return

    client = _docker_or_skip()
    try:
        docker_daemon.check_runtime(TEST_RUNTIME, client, field="REFEREE_TEST_RUNTIME")
    except BotError as e:
        pytest.fail(str(e), pytrace=False)
    FIGURES["runtime"] = TEST_RUNTIME
    previous = docker_daemon.set_runtime(TEST_RUNTIME)
    yield TEST_RUNTIME
    docker_daemon.set_runtime(previous)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return _docker_or_skip()


@pytest.fixture(scope="session")
def images(docker_client: Any) -> dict[str, str]:
    """{"greedy": tag, "hostile": tag}, built or reused."""
    from referee.bots.images.baseimage import build_base_image, build_bot_image, build_image

    t0 = time.perf_counter()
    base_id = build_base_image(docker_client)
    FIGURES["base image ready (built or reused)"] = f"{time.perf_counter() - t0:.1f} s"
    t1 = time.perf_counter()
    greedy = build_bot_image("greedy", docker_client)
    FIGURES["greedy image ready (built or reused)"] = f"{time.perf_counter() - t1:.1f} s"
    greedy_id = str(docker_client.images.get(greedy).id)
    build_image(
        docker_client,
        HOSTILE_IMAGE,
        HOSTILE_DOCKERFILE,
        {"hostile.py": PROGRAMS / "hostile.py"},
        buildargs={"BASE": greedy},
        base_id=greedy_id,
    )
    del base_id
    found = {"greedy": greedy, "hostile": HOSTILE_IMAGE}
    if shutil.which("node"):  # the Node sample bot, FROM the machine's own node binary
        found["node"] = build_bot_image("node", docker_client)
    return found


@pytest.fixture
def out(tmp_path: Path) -> Iterator[Path]:
    """A tournament output folder; every container labelled with it is gone afterwards."""
    folder = tmp_path / "out"
    folder.mkdir()
    yield folder
    try:
        left = docker_daemon.cleanup_containers({"referee.out": str(folder.resolve())})
    except docker_daemon.DockerUnavailable:
        return
    assert not left, f"containers left behind: {left}"


@pytest.fixture
async def service_client(
    aiohttp_client: Callable[..., Awaitable[Any]], tmp_path: Path, docker_client: Any
) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """``await service_client(**settings)``: a test client of the service on a
    new database (``tmp_path / "service.sqlite"``), as the container tests run
    it: any bot address allowed (``bot_policy=AddressPolicy()``), two
    validation games, and `settings` over those. The client carries the
    database's admin token as ``.admin`` and its path as ``.db_path``.
    Afterwards every image of each such service's instance (base, SDK, the
    teams') is removed: that install's own, never another's."""
    from referee.bots.netpolicy import AddressPolicy
    from referee.web import Settings, make_app

    made: list[Any] = []

    async def make(**settings: Any) -> Any:
        db_path = tmp_path / "service.sqlite"
        token = new_admin_token(db_path)
        wanted = {"bot_policy": AddressPolicy(), "validation_games": 2, **settings}
        client = await aiohttp_client(make_app(db_path, Settings(**wanted)))
        client.admin = token
        client.db_path = db_path
        made.append(client)
        return client

    yield make
    for client in made:
        remove_instance_images(docker_client, client.app[ROOM].pipeline.instance)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for reason in WHY_SKIPPED:
        terminalreporter.write_line(f"SKIPPED container tests: {reason}", yellow=True)
    if FIGURES:
        terminalreporter.write_line(
            "container figures: " + "; ".join(f"{k}: {v}" for k, v in FIGURES.items())
        )


@pytest.fixture(scope="module")
def runsc(docker_client: Any) -> str:
    """ "runsc", when the daemon has it (else a skip, or a failure under CI)."""
    import os

    known, _ = docker_daemon.daemon_runtimes(docker_client)
    if "runsc" not in known:
        reason = (
            f"the Docker daemon has no runtime runsc (it has {', '.join(known)}): register gVisor "
            "in daemon.json (docs/containers.md)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so the gVisor tests must run, but: {reason}", pytrace=False)
        if reason not in WHY_SKIPPED:
            WHY_SKIPPED.append(reason)
        pytest.skip(reason)
    return "runsc"


@pytest.fixture
def no_override() -> Iterator[None]:
    """The test decides the runtime itself (not the session's ``REFEREE_TEST_RUNTIME``)."""
    previous = docker_daemon.set_runtime(None)
    yield
    docker_daemon.set_runtime(previous)
