"""A deadline rush on two nodes (issue 37): with ``--executor ray --registry``
the service's builds and admission checks run on the cluster's nodes, each
checked on the node that built it (no pull), the accepted images brought
home by digest through the registry once; a node lost mid-build or
mid-check loses no submission (it is built or checked again on the other
node, never refused for it)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from referee.admission import AdmissionSettings
from referee.bots.factory import BotSpec
from referee.bots.sandbox.container_limits import ContainerLimits
from referee.bots.sandbox.docker_daemon import cleanup_containers, docker_client
from referee.bots.sandbox.instance import Instance
from referee.service.check_site import BuildJob, BuildLimits, NodeReply, RayChecks
from referee.service.settings import Settings
from tests.support.cluster import FIGURES, TwoNodes
from tests.support.containers import remove_instance_images
from tests.support.rush import figures, rush, uploads, wrong

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def on_cluster(two_nodes: TwoNodes) -> dict[str, Any]:
    """``referee serve --executor ray --address ADDR --registry HOST:PORT``."""
    return {
        "executor": "ray",
        "executor_address": two_nodes.cluster.address,
        "executor_workers": 1,
        "executor_registry": two_nodes.registry.address,
    }


def image_on(client: Any, image_id: str | None) -> bool:
    """Whether `client`'s daemon has the image."""
    try:
        return image_id is not None and str(client.images.get(image_id).id) == image_id
    except Exception:
        return False


@pytest.fixture
def sites(two_nodes: TwoNodes) -> Iterator[list[Any]]:
    """The test's check sites: their containers and images go from both
    daemons after it, the coordinator's and the second node's (where a killed
    node's check left its bots running, and whose cache keeps what it built
    and accepted, on top of the sample image an upload carried: the next test
    expects a node without that image)."""
    made: list[Any] = []
    yield made
    for site in made:
        for client in (docker_client(), two_nodes.daemon.client()):
            cleanup_containers(client=client, instance=site.instance)
            remove_instance_images(client, site.instance)


def kill_second_at(two_nodes: TwoNodes, killed: list[str], **filters: Any) -> threading.Thread:
    """A thread that kills the second node as soon as its Docker daemon creates
    a container matching `filters` (a build's step, a check's bot): mid-way,
    whatever the machine's speed."""
    events = two_nodes.daemon.client().events(
        decode=True, filters={"type": "container", "event": "create", **filters}
    )

    def watch() -> None:
        for _ in events:
            two_nodes.kill_second()
            killed.append("second")
            break
        events.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def rush_killing_second(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any], **filters: Any
) -> tuple[list[Any], Any, bool]:
    """Two source uploads on two workers (one build goes to each node), the
    second node killed as its daemon creates a container matching `filters`
    (the first, without), then brought back: the verdicts, the check site,
    and whether the node was killed."""
    batch = uploads(2, tmp_path / "uploads", images["greedy"], images=0, broken=0)
    assert [u.what for u in batch] == ["source", "source"]
    killed: list[str] = []
    watcher = kill_second_at(two_nodes, killed, **filters)
    try:
        verdicts, _, site, _, _ = asyncio.run(
            rush(tmp_path / "s.sqlite", batch, workers=2, **on_cluster(two_nodes))
        )
    finally:
        watcher.join(60)
        if killed:
            two_nodes.add_second()
    sites.append(site)
    return verdicts, site, bool(killed)


def test_a_rush_on_two_nodes_gives_every_submission_its_verdict(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any]
) -> None:
    batch = uploads(6, tmp_path / "uploads", images["greedy"], images=1, broken=2)
    assert {u.what for u in batch} == {"source", "image", "crash", "syntax"}
    # the service's default admission workers: one per node of the cluster
    verdicts, wall, site, workers, _ = asyncio.run(
        rush(tmp_path / "s.sqlite", batch, workers=None, **on_cluster(two_nodes))
    )
    sites.append(site)
    f = figures(verdicts, wall)
    FIGURES["a rush of 6 uploads on two nodes"] = f"p50 {f['p50'] / 1000:.1f} s, max {f['max'] / 1000:.1f} s"
    # every submission has its verdict: the good ones accepted, the broken ones refused for their own reason
    assert wrong(verdicts) == []
    assert workers == 2
    # the builds went to both nodes, and each image was checked on the node that built it
    where = site.where
    assert {where[(v.sid, "build")] for v in verdicts} == set(two_nodes.node_ids()), where
    for v in verdicts:
        if v.image_id is not None:
            assert where[(v.sid, "check")] == where[(v.sid, "build")], (v, where)
    second = two_nodes.second.node_id
    built_there = [v for v in verdicts if v.image_id is not None and where[(v.sid, "build")] == second]
    assert built_there, where
    # the image's archive (100 MB) was built on the coordinator's own node, read there from its
    # file; what was built on the coordinator's daemon never crossed the registry, what the second
    # node built went through it, by digest
    (archive,) = [v for v in verdicts if v.what == "image"]
    assert where[(archive.sid, "build")] != second, where
    assert site.read_in_place == {archive.sid}
    for v in verdicts:
        if v.image_id is not None:
            assert ("push" in v.phases) == (where[(v.sid, "build")] == second), v
    local = docker_client()
    for v in verdicts:
        phases = v.phases
        assert {"queue", "total"} <= set(phases), v
        if v.status == "accepted":
            # the coordinator holds every accepted image (its ladder plays it), by the id its node
            # built, brought home once accepted
            assert str(local.images.get(v.image_id).id) == v.image_id
            assert "pull" in phases, v
    for v in built_there:
        # checked where it was built: no pull there; an accepted one stays in the node's cache
        # (its games reuse it), a refused one is gone from the node and never came home
        assert v.phases["fetch"] < v.phases["node_check"], v
        kept = image_on(two_nodes.daemon.client(), v.image_id)
        assert kept == (v.status == "accepted"), v
        if v.status == "refused":
            assert not image_on(local, v.image_id), v


def test_a_node_killed_mid_build_loses_no_submission(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any]
) -> None:
    verdicts, site, killed = rush_killing_second(two_nodes, images, tmp_path, sites)
    assert killed, "the second node never started a build"
    # nothing lost, nothing refused for the node's death: both built (again) and accepted
    assert [v.status for v in verdicts] == ["accepted", "accepted"], verdicts
    assert site.executor.retried >= 1
    assert len(site.executor.lost) == 1
    assert (
        not {site.where[(v.sid, "build")] for v in verdicts} & site.executor.lost
    )  # built on the living node


def test_a_node_killed_mid_check_loses_no_submission(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any]
) -> None:
    second = two_nodes.second.node_id
    # the second node dies when the check of the image it built starts its bot
    verdicts, site, killed = rush_killing_second(
        two_nodes, images, tmp_path, sites, label="referee.purpose=admission"
    )
    assert killed, "the second node never started a check"
    # nothing lost, nothing refused for the node's death: both checked (again) and accepted
    assert [v.status for v in verdicts] == ["accepted", "accepted"], verdicts
    assert site.executor.lost == {second}
    moved = [v for v in verdicts if site.where[(v.sid, "build")] == second]
    assert len(moved) == 1, site.where
    # built on the node that died, checked on the living one (which pulled it by digest)
    assert site.where[(moved[0].sid, "check")] != second
    assert str(docker_client().images.get(moved[0].image_id).id) == moved[0].image_id


def test_an_upload_its_node_cannot_read_in_place_is_sent_whole(
    two_nodes: TwoNodes,
    images: dict[str, str],
    tmp_path: Path,
    sites: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The coordinator's own node reads a large upload where it lies; when it cannot
    (here: the file is not the size the coordinator measured, as for another mount),
    its bytes go with the job instead, and the build is made all the same."""
    (up,) = uploads(1, tmp_path / "uploads", images["greedy"], images=1, broken=0)
    path = tmp_path / "upload.tar"
    path.write_bytes(up.data)
    site = RayChecks(Instance("rushread"), two_nodes.cluster.address, two_nodes.registry.address)
    sites.append(site)

    async def go() -> Any:
        try:
            home = (await site._executor()).home
            assert home is not None and home != two_nodes.second.node_id
            job = BuildJob(
                kind="archive",
                filename=path.name,
                upload=b"",
                path=str(path),
                size=len(up.data) + 1,
                tid=1,
                sid=1,
                version=1,
                instance=site.instance.id,
                limits=ContainerLimits(),
                bounds=BuildLimits.of(Settings()),
                push=False,
            )
            return await site._build_on(job, home)
        finally:
            await site.close()

    with caplog.at_level(logging.WARNING, logger="referee.service.check_site"):
        reply, in_place = asyncio.run(go())
    assert not in_place
    assert reply.fault is None and reply.made is not None and reply.made.image_id is not None, reply
    (said,) = [r.getMessage() for r in caplog.records if "cannot read the upload" in r.getMessage()]
    assert str(path) in said and said.endswith("its bytes are sent instead"), said
    # on whichever node took the bytes
    daemon = two_nodes.daemon.client() if reply.node == two_nodes.second.node_id else docker_client()
    assert image_on(daemon, reply.made.image_id), reply.node


def test_an_image_built_on_the_coordinators_daemon_is_pushed_from_there_when_its_node_is_lost(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any]
) -> None:
    """An archive built by the coordinator's own node is on the coordinator's daemon and
    never pushed; that node lost before its check, the coordinator pushes it by digest and
    the other node pulls it and checks it: accepted, brought home under the team's tag."""
    (up,) = uploads(1, tmp_path / "uploads", images["greedy"], images=1, broken=0)
    path = tmp_path / "upload.tar"
    path.write_bytes(up.data)
    site = RayChecks(Instance("rushlost"), two_nodes.cluster.address, two_nodes.registry.address)
    sites.append(site)
    second = two_nodes.second.node_id
    phases: dict[str, float] = {}

    async def go() -> Any:
        try:
            made = await site.build(
                "archive",
                path,
                tid=1,
                sid=7,
                version=1,
                limits=ContainerLimits(),
                bounds=BuildLimits.of(Settings()),
                phases=phases,
            )
            assert made.image_id is not None, made
            executor = site.executor
            assert site.where[(7, "build")] == executor.home
            assert "push" not in phases  # on the coordinator's daemon: no registry
            executor._lose(executor.home)  # its worker gone, as a node's that dies
            report = await site.check(
                BotSpec(name="team", image=made.image_id, limits=ContainerLimits()),
                out_dir=tmp_path / "check-7",
                settings=AdmissionSettings(),
                limits=ContainerLimits(),
                seat_name="team",
                opponents=["house"],
            )
            tag = site.instance.team_tag(1, 1)
            if report.ok:
                await site.accepted(made.image_id, tag)
            return made.image_id, report, tag
        finally:
            await site.close()

    image_id, report, tag = asyncio.run(go())
    assert report.ok, report
    assert site.where[(7, "check")] == second
    assert image_on(two_nodes.daemon.client(), image_id)  # pulled there by digest
    assert str(docker_client().images.get(tag).id) == image_id


def test_a_node_of_an_older_install_gets_a_large_uploads_bytes(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path, sites: list[Any]
) -> None:
    """A node whose warm-up does not say it reads uploads in place (an older
    install's, which would build an empty file) is sent the bytes: the build is
    made; the same upload on a node that says so is read in place."""
    import ray

    (up,) = uploads(1, tmp_path / "uploads", images["greedy"], images=1, broken=0)
    path = tmp_path / "upload.tar"
    path.write_bytes(up.data)
    site = RayChecks(Instance("rushold"), two_nodes.cluster.address, two_nodes.registry.address)
    sites.append(site)

    async def build(sid: int) -> Any:
        return await site.build(
            "archive",
            path,
            tid=1,
            sid=sid,
            version=sid,
            limits=ContainerLimits(),
            bounds=BuildLimits.of(Settings()),
        )

    async def go() -> tuple[Any, Any]:
        try:
            await site.warm()
            home = site.executor.home
            new = await build(1)
            # an older node's answer: no reads_paths
            site._warming[home] = ray.put(msgspec.msgpack.encode(NodeReply(node=home)))
            old = await build(2)
            return new, old
        finally:
            await site.close()

    new, old = asyncio.run(go())
    assert new.image_id is not None and old.image_id is not None, (new, old)
    assert site.read_in_place == {1}
