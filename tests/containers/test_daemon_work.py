"""What a team's upload makes the Docker daemon do (issue 32, items 5, 6 and 9).

- An uploaded image's ``HEALTHCHECK`` never runs: the daemon would exec it
  every interval on the host's CPU, outside every limit of the container (a
  1 ms interval cost 0.63 host cores). The admission's load clears it from
  the image (and resets ``STOPSIGNAL``); ``docker run`` of every bot
  container disables it too, for images that came another way (an admin's).
- The disk floor (``--min-free-disk``) counts what an archive unpacks to:
  a small gzip upload of zeros that would unpack past the floor is never
  given to the daemon; its submission waits (the server's disk, not the
  team's fault).
- Under ``--runtime runsc`` a source build's compile step runs under gVisor,
  as the bots do (a build's ``RUN`` step runs under the daemon's default, runc).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.images.image_archive import load_image_archive
from referee.bots.images.source_build import build_source
from referee.bots.sandbox import docker_daemon
from referee.bots.sandbox.container import ContainerBot
from referee.service.disk import free_bytes
from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from tests.support.api import auth, new_competition, new_team
from tests.support.builds import MiB, image_archive, layer_files, make_zip, python_bot_files, save_image
from tests.support.containers import FIGURES, image_exists, remove_prefixed_images

pytestmark = pytest.mark.slow

PREFIX = "referee-test-daemon-work"


def tag(name: str) -> str:
    return f"{PREFIX}-{name}:1"


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    yield docker_client
    remove_prefixed_images(docker_client, PREFIX)


# ------------------------------------------------------------ item 5: HEALTHCHECK

HEALTHCHECK_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
HEALTHCHECK --interval=1ms --timeout=1s CMD ["python", "-c", "pass"]
STOPSIGNAL SIGSTOP
"""


@pytest.fixture(scope="module")
def healthcheck_image(client: Any, images: dict[str, str]) -> str:
    """The greedy bot with a health check every millisecond (and a stop signal that freezes)."""
    from referee.bots.images.baseimage import build_image

    image = tag("healthcheck")
    build_image(
        client,
        image,
        HEALTHCHECK_DOCKERFILE,
        {},
        buildargs={"BASE": images["greedy"]},
        base_id=str(client.images.get(images["greedy"]).id),
    )
    health = client.images.get(image).attrs["Config"]["Healthcheck"]
    assert health["Interval"] == 1_000_000 and health["Test"][0] == "CMD", health
    return image


@pytest.mark.runtime_sensitive  # a container of the session's runtime: see .ci/run's runsc pass
async def test_an_uploaded_images_healthcheck_never_runs(
    client: Any, healthcheck_image: str, tmp_path: Path, out: Path
) -> None:
    """The upload's load clears the image's HEALTHCHECK and STOPSIGNAL; its
    bot container, and one of the raw image (as an admin could name it), runs
    with no health check: the daemon never execs one, the container has no
    health state."""
    archive = save_image(client, healthcheck_image, tmp_path / "hc.tar")
    r = load_image_archive(archive, tag=tag("hc-loaded"), client=client)
    assert r.ok and r.image_id is not None, r.log
    config = client.images.get(r.image_id).attrs["Config"]
    assert config["Healthcheck"]["Test"] == ["NONE"], config.get("Healthcheck")
    assert config["StopSignal"] == "SIGTERM", config.get("StopSignal")
    for image, name in ((r.image_id, "admitted"), (healthcheck_image, "admin-named")):
        async with ContainerBot(image, out_dir=out, name=name) as bot:
            assert (await bot.handshake()).name
            assert bot.container_name is not None
            attrs = client.containers.get(bot.container_name).attrs
            assert attrs["Config"]["Healthcheck"]["Test"] == ["NONE"], attrs["Config"].get("Healthcheck")
            assert attrs["Config"]["StopSignal"] == "SIGTERM"
            assert "Health" not in attrs["State"], attrs["State"].get("Health")
            assert not attrs.get("ExecIDs"), attrs.get("ExecIDs")  # no health-check exec, ever
    FIGURES["HEALTHCHECK --interval=1ms upload"] = "cleared at load; containers run with no health check"


# ------------------------------------------------------------ item 6: the disk floor


async def test_an_archive_that_unpacks_past_the_disk_floor_is_never_loaded(
    service_client: Any, client: Any, tmp_path: Path
) -> None:
    """A docker save archive of a few MiB whose gzip layer of zeros unpacks
    to 768 MiB, under a floor 256 MiB below the free space: the upload is
    stored (it fits), but the daemon never gets it; the submission waits
    (the server's disk, not the team's fault) and keeps its upload."""
    unpacks = 768 * MiB
    layer = layer_files(tmp_path / "zeros.gz", {"zeros": unpacks}, compress="gzip")
    archive, image_id = image_archive(tmp_path / "zeros.tar", [layer])
    wire = archive.stat().st_size
    floor = free_bytes(tmp_path) - 256 * MiB
    app = await service_client(min_free_disk=floor, fault_retry_s=600.0)
    pipeline = app.app[ROOM].pipeline
    cid = await new_competition(app, app.admin)
    tid, token = await new_team(app, app.admin, cid, "zeros team")
    r = await app.post(
        f"/api/competitions/{cid}/teams/{tid}/uploads?kind=archive",
        data=archive.read_bytes(),
        headers=auth(token),
    )
    assert r.status == 201, await r.text()
    sid = int((await r.json())["id"])
    db = app.app[ROOM].db
    async with asyncio.timeout(120):
        while (sub := await db.call(ServiceDB.submission, sid)) is not None and sub.status not in (
            "waiting",
            "refused",
            "accepted",
        ):
            async with pipeline.done:
                try:
                    await asyncio.wait_for(pipeline.done.wait(), 1.0)
                except TimeoutError:
                    pass
    assert sub is not None
    FIGURES["a gzip archive unpacking past the floor"] = (
        f"{wire / 1024:.0f} KiB on the wire, {unpacks // MiB} MiB unpacked: {sub.status}"
    )
    assert sub.status == "waiting", (sub.status, sub.reason)
    assert sub.reason is not None and "the server's disk is full" in sub.reason, sub.reason
    assert "nothing is wrong with your bot" in sub.reason, sub.reason
    assert not image_exists(client, image_id), "the daemon loaded the archive"
    assert not [i for i in pipeline.instance.images(client) if "team" in str(i.get("RepoTags"))]
    assert sub.upload is not None and os.path.isfile(sub.upload)  # kept: it is tried again by itself
    detail = await (
        await app.get(f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token))
    ).json()
    assert detail["submission"]["status"] == "waiting"


# ------------------------------------------------------------ item 9: the compile step's runtime


@pytest.fixture
def runsc(docker_client: Any) -> Iterator[str]:
    """``--runtime runsc`` for this test (the daemon must have it; else a skip, or a failure under CI)."""
    known, _ = docker_daemon.daemon_runtimes(docker_client)
    if "runsc" not in known:
        why = f"the Docker daemon has no runtime runsc (it has {', '.join(known)})"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    previous = docker_daemon.set_runtime("runsc")
    yield "runsc"
    docker_daemon.set_runtime(previous)


def test_the_compile_step_runs_under_the_bots_runtime(client: Any, tmp_path: Path, runsc: str) -> None:
    """With ``--runtime runsc`` the source build's compile step runs under
    gVisor (the daemon's own inspect of its container says so), and the
    image holds the compiled files as before."""
    r = build_source(
        make_zip(tmp_path / "bot.zip", python_bot_files()), tag=tag("gvisor-build"), client=client
    )
    assert r.ok and r.image_id is not None, r.log
    assert f"the compile step ran under the runtime {runsc} " in r.log, r.log
    made = client.images.get(r.image_id).attrs["Config"]
    assert made["User"] == "65534:65534" and made["WorkingDir"] == "/app/bot"
    assert made["Cmd"] == ["python", "bot.py"] and made["Labels"]["referee.managed"] == ""
    FIGURES["compile step runtime"] = runsc
