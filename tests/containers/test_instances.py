"""Two installs on one Docker daemon (issue 24, item 8), for real.

Two services (two databases, so two instance ids) share the daemon. Each
attack is what another install (or a hostile neighbour with the daemon's
socket) did to the other: take its tags, forge its base image, leave its
pinned images untagged for ``docker image prune``, remove its containers
with ``referee cleanup``.
"""

from __future__ import annotations

import asyncio
import io
import secrets
import tarfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.bots.factory import BotFactory, BotSpec
from referee.bots.images import baseimage, source_build
from referee.bots.netpolicy import AddressPolicy
from referee.bots.sandbox import docker_daemon
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.instance import INSTANCE_LABEL, VERSION_LABEL, Instance
from referee.cli.cleanup import containers_cleanup
from referee.service.pipeline import image_tag, retag_pinned, service_instance
from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.builds import make_zip, python_bot_files
from tests.support.containers import remove_instance_images

#: Every image the tests here make carries it, so a prune can be confined to them.
RUN = f"t{secrets.token_hex(4)}"
RUN_LABEL = "referee.test-run"


class Install:
    """One service install: its database and the instance its id names."""

    def __init__(self, folder: Path) -> None:
        self.db_path = folder / "service.sqlite"
        db = ServiceDB(self.db_path)
        try:
            self.instance = service_instance(db)
        finally:
            db.close()


@pytest.fixture(scope="module")
def installs(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Install, Install]]:
    a = Install(tmp_path_factory.mktemp("install-a"))
    b = Install(tmp_path_factory.mktemp("install-b"))
    assert a.instance.id != b.instance.id
    yield a, b
    for one in (a, b):
        docker_daemon.cleanup_containers(client=docker_client, instance=one.instance)
        remove_instance_images(docker_client, one.instance)


def _labels(inst: Instance, tid: int, sid: int, version: int | None) -> dict[str, str]:
    """What the service's pipeline labels a team's upload with (and the test run's label);
    `version` None: as it did before its tags named the team's version (no version label)."""
    labels = {
        "referee.team": str(tid),
        "referee.submission": str(sid),
        INSTANCE_LABEL: inst.id,
        RUN_LABEL: RUN,
    }
    if version is not None:
        labels[VERSION_LABEL] = str(version)
    return labels


def _team_image(
    client: Any, inst: Instance, tmp_path: Path, tid: int, version: int, name: str, *, before_sid: int = 0
) -> str:
    """A team's source upload (its `version`) built by `inst` as the service builds it; the
    image id. `before_sid`: as the service built it before issue 34, tagged ``:v<submission id>``."""
    r = source_build.build_source(
        make_zip(tmp_path / f"{name}.zip", python_bot_files(name)),
        tag=f"referee-{inst.id}-team-{tid}:v{before_sid}" if before_sid else image_tag(tid, version, inst),
        labels=_labels(inst, tid, before_sid, None) if before_sid else _labels(inst, tid, version, version),
        client=client,
        workdir=tmp_path,
        instance=inst,
    )
    assert r.ok, r.log
    assert r.image_id is not None
    return r.image_id


def _dangling(client: Any) -> set[str]:
    return {str(i["Id"]) for i in client.api.images(filters={"dangling": True})}


def test_two_installs_never_share_a_tag(
    docker_client: Any, installs: tuple[Install, Install], tmp_path: Path
) -> None:
    """Attack: install B uploads team 1's version 10 too. Before, both called
    it referee-team-1:v10, B's build moved the tag and A's image was left
    untagged; now each name carries its instance id."""
    a, b = (x.instance for x in installs)
    a_id = _team_image(docker_client, a, tmp_path, 1, 10, "team-of-a")
    tags_of_a = {a.base_tag, a.sdk_tag, image_tag(1, 10, a)}
    before = {t: str(docker_client.images.get(t).id) for t in tags_of_a}
    b_id = _team_image(docker_client, b, tmp_path, 1, 10, "team-of-b")
    assert a_id != b_id
    assert {image_tag(1, 10, a), image_tag(1, 10, b)} == {
        f"referee-{a.id}-team-1:v10",
        f"referee-{b.id}-team-1:v10",
    }
    assert {b.base_tag, b.sdk_tag, image_tag(1, 10, b)}.isdisjoint(tags_of_a)
    assert {t: str(docker_client.images.get(t).id) for t in tags_of_a} == before
    assert a_id not in _dangling(docker_client)
    for inst, image_id in ((a, a_id), (b, b_id)):  # each image says whose it is
        image = docker_client.images.get(image_id)
        assert image.labels[INSTANCE_LABEL] == inst.id
        assert image.tags == [image_tag(1, 10, inst)]
        assert docker_client.images.get(inst.base_tag).labels[INSTANCE_LABEL] == inst.id


def test_a_forged_base_image_under_our_tag_is_never_used(
    docker_client: Any, installs: tuple[Install, Install], tmp_path: Path
) -> None:
    """Attack: a neighbour builds an image FROM A's base (so it has A's labels,
    referee.inputs and referee.instance included) with a file of its own,
    and tags it as A's base. Before, A reused whatever its tag named when the
    labels matched; now A uses the id it pinned and takes its tag back."""
    a = installs[0].instance
    real = baseimage.build_base_image(docker_client, instance=a)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = f"FROM {real}\nCOPY forged /forged\nLABEL {RUN_LABEL}={RUN}\n".encode()
        for name, body in (("Dockerfile", data), ("forged", b"the neighbour's\n")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    context.seek(0)
    forged, _ = docker_client.images.build(fileobj=context, custom_context=True, tag=a.base_tag, rm=True)
    forged_id = str(forged.id)
    assert forged_id != real
    assert docker_client.images.get(a.base_tag).id == forged_id  # the attack is real: the tag moved
    labels = docker_client.images.get(forged_id).labels
    assert labels[baseimage.LABEL] == docker_client.images.get(real).labels[baseimage.LABEL]
    assert labels[INSTANCE_LABEL] == a.id  # the labels say it is A's
    try:
        assert baseimage.build_base_image(docker_client, instance=a) == real
        assert docker_client.images.get(a.base_tag).id == real  # the tag is A's again
        # what is built FROM the base names it by id: the SDK image and a team's build
        sdk = source_build.ensure_sdk_image(docker_client, instance=a)
        layers = {h["Id"] for h in docker_client.images.get(sdk).history()}
        assert real in layers and forged_id not in layers
        docker_client.images.get(forged_id).tag(a.base_tag)  # forged again, right before a build
        team = _team_image(docker_client, a, tmp_path, 2, 20, "after-forgery")
        layers = {h["Id"] for h in docker_client.images.get(team).history()}
        assert real in layers and forged_id not in layers
    finally:
        docker_client.images.remove(forged_id, force=True)  # the test's own forgery


def test_a_pinned_image_left_untagged_gets_its_tag_back(
    docker_client: Any, installs: tuple[Install, Install], tmp_path: Path
) -> None:
    """Attack: another install tags an image of its own as A's team tag, so
    A's pinned image is left untagged: dangling, where ``docker image prune``
    deletes a live bot. Before, nothing noticed; now the service's start-up
    and every container bot's first start give it its tag back."""
    a = installs[0].instance
    pinned = _team_image(docker_client, a, tmp_path, 3, 30, "pinned-team")
    other = docker_client.images.get(installs[1].instance.base_tag)
    # 1. at the service's start-up (what Pipeline.start does with the database's rows)
    other.tag(*image_tag(3, 30, a).split(":"))
    assert pinned in _dangling(docker_client)  # the attack is real: a plain prune would delete it
    assert retag_pinned(a, [(3, 30, pinned)]) == [image_tag(3, 30, a)]
    assert docker_client.images.get(pinned).tags == [image_tag(3, 30, a)]
    assert pinned not in _dangling(docker_client)
    # 2. before a run: the bot factory's check of an image pinned by id
    other.tag(*image_tag(3, 30, a).split(":"))
    assert pinned in _dangling(docker_client)
    factory = BotFactory(log_dir=tmp_path / "logs", out_dir=tmp_path / "out", instance=a)
    asyncio.run(factory.prepare(BotSpec(name="t3", image=pinned)))
    assert docker_client.images.get(pinned).tags == [image_tag(3, 30, a)]
    assert pinned not in _dangling(docker_client)
    # 3. at every container start (a game's fresh container, mid-run)
    other.tag(*image_tag(3, 30, a).split(":"))
    assert pinned in _dangling(docker_client)

    async def start() -> None:
        async with ContainerBot(pinned, out_dir=tmp_path / "out", name="t3", instance=a) as bot:
            assert (await bot.handshake()).name

    asyncio.run(start())
    assert docker_client.images.get(pinned).tags == [image_tag(3, 30, a)]
    # the prune, confined to this test's images: it finds nothing dangling to delete
    pruned = docker_client.images.prune(filters={"dangling": True, "label": f"{RUN_LABEL}={RUN}"})
    assert pinned not in {d.get("Deleted") for d in pruned.get("ImagesDeleted") or []}
    assert docker_client.images.get(pinned).id == pinned


def test_cleanup_of_one_install_leaves_the_others_containers(
    docker_client: Any, installs: tuple[Install, Install], images: dict[str, str], tmp_path: Path
) -> None:
    """Attack: ``referee cleanup --all`` of install A. Before, it removed every
    container labelled referee.managed=1 on the daemon, B's live bots too;
    now only A's (its instance id from A's database)."""
    a, b = installs
    out = tmp_path / "out"  # even one output folder for both: the instance tells them apart

    async def play() -> None:
        async with (
            ContainerBot(images["greedy"], out_dir=out, name="a-bot", instance=a.instance) as bot_a,
            ContainerBot(images["greedy"], out_dir=out, name="b-bot", instance=b.instance) as bot_b,
        ):
            await bot_a.handshake()
            await bot_b.handshake()
            name_a, name_b = bot_a.container_name, bot_b.container_name
            assert name_a is not None and name_a.startswith(f"referee-{a.instance.id}-a-bot-")
            assert name_b is not None and name_b.startswith(f"referee-{b.instance.id}-b-bot-")
            assert docker_client.containers.get(name_a).labels[INSTANCE_LABEL] == a.instance.id
            runner = CliRunner()
            listed = await asyncio.to_thread(
                runner.invoke, containers_cleanup, ["--db", str(a.db_path), "--all", "--dry-run"]
            )
            assert listed.exit_code == 0, listed.output
            assert name_a in listed.output and name_b not in listed.output
            result = await asyncio.to_thread(
                runner.invoke, containers_cleanup, ["--db", str(a.db_path), "--all"]
            )
            assert result.exit_code == 0, result.output
            assert f"removed {name_a}" in result.output and name_b not in result.output
            assert docker_client.containers.get(name_b).status == "running"
            assert (await bot_b.handshake()).name  # B's bot still plays
            result = await asyncio.to_thread(
                runner.invoke, containers_cleanup, ["--instance", a.instance.id, "--all"]
            )
            assert (
                "no stray containers" in result.output
                and f"referee.instance={a.instance.id}" in result.output
            )
            assert [c.name for c in docker_daemon.find_containers(instance=b.instance)] == [name_b]

    asyncio.run(play())
    assert docker_daemon.find_containers({"referee.out": str(out.resolve())}, instance=b.instance) == []


async def test_the_service_gives_its_pinned_images_their_tags_back_at_start(
    aiohttp_client: Callable[..., Awaitable[Any]],
    docker_client: Any,
    installs: tuple[Install, Install],
    tmp_path: Path,
) -> None:
    """The same attack on a service that is down: when it starts, every
    image a run may play (an accepted upload, pinned by id in its database)
    has its tag of this instance again before anything else happens. The
    image here was built before its tag named the team's version (issue 34):
    tagged with its submission id (2, another team's submission came first),
    it gets its version's tag (v1) at the start."""
    db_path = tmp_path / "service.sqlite"
    db = ServiceDB(db_path)
    try:
        inst = service_instance(db)
        comp = db.add_competition("c", "")
        first, _ = db.add_team(comp.id, "first")
        assert db.add_submission(
            first.id, kind="url", url="http://127.0.0.1:9", image=None, secret=None, note="", status="refused"
        )
        team, _ = db.add_team(comp.id, "t")
        sub = db.add_submission(
            team.id, kind="source", url=None, image=None, secret=None, note="", status="accepted"
        )
        assert sub is not None and sub.id == 2 and db.submission_number(sub.id) == 1
        image_id = await asyncio.to_thread(
            _team_image, docker_client, inst, tmp_path, team.id, 1, "svc", before_sid=sub.id
        )
        db.update_submission(sub.id, image_id=image_id)
    finally:
        db.close()
    try:
        old = f"referee-{inst.id}-team-{team.id}:v{sub.id}"
        assert docker_client.images.get(image_id).tags == [old]
        docker_client.images.get(installs[1].instance.base_tag).tag(*old.split(":"))
        assert image_id in _dangling(docker_client)  # the attack is real
        client = await aiohttp_client(make_app(db_path, Settings(bot_policy=AddressPolicy())))
        assert client.app[ROOM].pipeline.instance.id == inst.id
        assert (
            docker_client.images.get(image_id).tags
            == [image_tag(team.id, 1, inst)]
            == [f"referee-{inst.id}-team-{team.id}:v1"]
        )
        assert image_id not in _dangling(docker_client)
        # its tag taken again mid-run: its labels name no version (built before), so the label
        # fallback keeps it with the keep tag, never ":v2" (now the name of the team's version 2)
        docker_client.images.get(installs[1].instance.base_tag).tag(*image_tag(team.id, 1, inst).split(":"))
        assert inst.ensure_tagged(docker_client, image_id) == inst.keep_tag(image_id)
        assert docker_client.images.get(image_id).tags == [inst.keep_tag(image_id)]
    finally:
        remove_instance_images(docker_client, inst)


def test_a_pinned_image_of_someone_else_is_kept_by_a_tag_of_our_own(
    docker_client: Any, installs: tuple[Install, Install]
) -> None:
    """An image a league names by id that this instance did not make (the
    admin's): when its tag goes, the instance keeps it with a tag of its own."""
    a = installs[0].instance
    name = f"referee-test-{RUN}-admins:1"

    def tiny(text: bytes) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("hello.txt")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
        answer = docker_client.api.import_image(
            src=buf.getvalue(), repository=name.split(":")[0], tag="1", changes=[f"LABEL {RUN_LABEL}={RUN}"]
        )
        return str(docker_client.images.get(name).id) if answer else ""

    first = tiny(secrets.token_bytes(16))
    second = tiny(secrets.token_bytes(16))  # takes the name: the first is left untagged
    try:
        assert first != second and first in _dangling(docker_client)
        assert a.ensure_tagged(docker_client, first) == a.keep_tag(first)
        assert docker_client.images.get(first).tags == [a.keep_tag(first)]
        assert a.keep_tag(first).startswith(f"referee-{a.id}-pinned:")
        assert a.ensure_tagged(docker_client, first) is None  # it has one of ours now
        assert first not in _dangling(docker_client)
    finally:
        for ref in (a.keep_tag(first), name):
            docker_client.images.remove(ref)
