"""Container bots on two Ray nodes, each with its own Docker daemon (issue 28).

The images exist on the machine's daemon only; the second node's daemon gets
them from the registry, by digest. A league of container bots spread over
both nodes gives the standings of the local executor; a node killed mid-run
has its games played on the other; the registry down stops a run with a
clear error, and the run resumes once it is back with nothing lost.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from referee.bots.cluster.nodepool import RUN_LABEL
from referee.bots.cluster.registry import ImageCache, ImageUnavailable, PinnedImage
from referee.bots.sandbox.container_limits import log_files_of
from referee.bots.sandbox.docker_daemon import cleanup_containers, docker_client
from referee.tournament.executors import ExecutorError, LocalExecutor, RayExecutor
from referee.tournament.league import parse_league
from tests.support.cluster import (
    FIGURES,
    TwoNodes,
    league_text,
    no_containers_left,
    play_league,
    standings_of,
)
from tests.support.mounts import mounts_under

pytestmark = pytest.mark.slow


_LOCAL: dict[str, list[dict[str, Any]]] = {}


def local_standings(text: str, folder: Path) -> list[dict[str, Any]]:
    """The standings of the same league played in this process (once per league)."""
    if text not in _LOCAL:
        out = folder / "local"
        play_league(text, out, LocalExecutor())
        _LOCAL[text] = standings_of(out)
    return _LOCAL[text]


class SandboxWatch(threading.Thread):
    """Records the host config of every referee container seen on a daemon while a run plays."""

    def __init__(self, client: Any, run_under: Path) -> None:
        super().__init__(daemon=True)
        self.client = client
        #: Only this run's containers (their referee.run label under it): the daemon is shared
        #: with the cluster tests before, whose last containers may still be going away.
        self.run_under = str(run_under)
        self.seen: dict[str, dict[str, Any]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.3):
            try:
                for c in self.client.containers.list(filters={"label": "referee.managed=1"}):
                    if not c.labels.get(RUN_LABEL, "").startswith(self.run_under):
                        continue
                    self.seen.setdefault(
                        c.name, {"host": c.attrs["HostConfig"], "image": c.attrs["Image"], "labels": c.labels}
                    )
            except Exception:
                continue


def test_a_league_of_container_bots_on_two_nodes_gives_the_local_standings(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path
) -> None:
    text = league_text(images, rounds=2)
    local = local_standings(text, tmp_path)
    watch = SandboxWatch(two_nodes.daemon.client(), tmp_path / "ray")
    watch.start()
    ex = RayExecutor(address=two_nodes.cluster.address, workers=1, registry=two_nodes.registry.address)
    registry = ex.registry
    assert registry is not None
    t0 = time.perf_counter()
    try:
        t = play_league(text, tmp_path / "ray", ex)
    finally:
        watch.done.set()
        watch.join()
    FIGURES["12 games on two nodes (push and pull included)"] = f"{time.perf_counter() - t0:.1f} s"
    FIGURES["registry pushes"] = f"{registry.pushes} in {registry.push_seconds:.1f} s"
    assert standings_of(tmp_path / "ray") == local
    assert t.played == 12
    # Both nodes played, and the second node's daemon ran the bots' containers.
    assert len(ex.played) == 2 and all(n >= 1 for n in ex.played.values()), ex.played
    assert sum(ex.played.values()) == 12
    assert watch.seen, "no container ran on the second node's daemon"
    client2 = two_nodes.daemon.client()
    ids = {str(docker_client().images.get(tag).id) for tag in images.values()}
    for name, seen in watch.seen.items():
        host = seen["host"]
        # Pinned by id: the container runs the very image the coordinator has.
        assert seen["image"] in ids, (name, seen["image"])
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
        assert host["Memory"] in (96 * 1024**2, 96 * 1024**2 + 16 * 1024**2) and host["PidsLimit"] >= 48
        assert seen["labels"]["referee.node"] and seen["labels"]["referee.instance"]
    # The second daemon pulled the images by digest from the registry.
    for image_id in ids:
        digests = client2.images.get(image_id).attrs["RepoDigests"]
        assert any(d.startswith(f"{two_nodes.registry.address}/") and "@sha256:" in d for d in digests), (
            digests
        )
    # Each node's containers logged under its own folder of the run, where
    # the diagnostics find a bot's logs by its name (as on one machine).
    nodes = sorted((tmp_path / "ray" / "nodes").iterdir())
    assert len(nodes) == 2
    for folder in nodes:
        logs = list((folder / "logs").glob("*.container.log"))
        assert logs and any("listening on unix:/run/bot/bot.sock" in p.read_text() for p in logs), folder
    names = [b.name for b in parse_league(text).bots]
    found = {name: log_files_of(tmp_path / "ray", name) for name in names}
    assert sorted(p for paths in found.values() for p in paths) == sorted(
        p for folder in nodes for p in (folder / "logs").glob("*.container.log")
    ), found
    assert all(found.values()), found
    no_containers_left(two_nodes)


def test_a_node_killed_mid_run_has_its_games_played_on_the_other(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path
) -> None:
    text = league_text(images, rounds=3, name="node lost")
    local = local_standings(text, tmp_path)
    second = two_nodes.second.node_id
    ex = RayExecutor(address=two_nodes.cluster.address, workers=1, registry=two_nodes.registry.address)
    killed: list[float] = []

    def killer() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not ex.played.get(second):
            time.sleep(0.05)
        if ex.played.get(second):
            two_nodes.kill_second()
            killed.append(time.monotonic())

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        t = play_league(text, tmp_path / "ray", ex)
    finally:
        thread.join(60)
        if killed:
            two_nodes.add_second()
    assert killed, "the second node never played a game"
    assert standings_of(tmp_path / "ray") == local
    assert t.played == 18
    assert second in ex.lost
    head = [n for n in ex.played if n != second]
    assert head and ex.played[head[0]] >= 1
    db = sqlite3.connect(tmp_path / "ray" / "tournament.sqlite")
    assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 18
    # The dead node's containers are orphans on its daemon (their worker is
    # gone): `referee cleanup` there removes them, and only them.
    client2 = two_nodes.daemon.client()
    orphans = {
        c.name for c in client2.containers.list(all=True, filters={"label": f"referee.node={second[:12]}"})
    }
    removed = cleanup_containers(
        {"referee.run": str((tmp_path / "ray").resolve())}, orphans_only=True, client=client2
    )
    assert orphans and set(removed) == orphans
    # The dead worker never unmounted its bots' socket folders (a tmpfs each,
    # under the run's folder): removing their containers unmounts them too.
    assert mounts_under(tmp_path) == []
    FIGURES["node lost mid-run"] = (
        f"{ex.retried} game(s) played again, played per node {sorted(ex.played.values())}"
    )


def test_the_registry_down_stops_the_run_with_a_clear_error_and_loses_nothing(
    two_nodes: TwoNodes, images: dict[str, str], tmp_path: Path
) -> None:
    text = league_text(images, rounds=1, name="registry down")
    local = local_standings(text, tmp_path)
    address = two_nodes.registry.address
    two_nodes.registry.stop()
    try:
        with pytest.raises(ExecutorError) as e:
            play_league(
                text,
                tmp_path / "ray",
                RayExecutor(address=two_nodes.cluster.address, workers=1, registry=address),
            )
        assert f"the registry at {address} cannot take the image" in str(e.value)
        assert "is it running" in str(e.value)
        # A node that must pull while the registry is down says so (and nothing is charged to a bot).
        cache = ImageCache(two_nodes.daemon.client(), index=tmp_path / "index.json")
        missing = PinnedImage(
            image_id="sha256:" + "0" * 64, ref=f"{address}/referee-x/bots@sha256:" + "0" * 64
        )
        with pytest.raises(ImageUnavailable, match=f"cannot pull .* from the registry at {address}"):
            cache.ensure(missing)
        db = sqlite3.connect(tmp_path / "ray" / "tournament.sqlite")
        assert db.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 0
    finally:
        two_nodes.registry.start()
    t = play_league(
        text,
        tmp_path / "ray",
        RayExecutor(address=two_nodes.cluster.address, workers=1, registry=address),
        resume=True,
    )
    assert t.played == 6
    assert standings_of(tmp_path / "ray") == local
    no_containers_left(two_nodes)


def test_a_node_keeps_what_it_pulled_within_its_bound_least_recently_used_out_first(
    second_daemon: Any, registry: Any, images: dict[str, str], tmp_path: Path
) -> None:
    from referee.bots.cluster.registry import Registry

    reg = Registry(registry.address)
    pinned = [reg.push(docker_client(), images[b]) for b in ("greedy", "tactician")]
    client2 = second_daemon.client()
    for p in pinned:  # not on the node yet (a node that never played them)
        for c in client2.containers.list(all=True, filters={"ancestor": p.image_id}):
            c.remove(force=True)
        with contextlib.suppress(Exception):
            client2.images.remove(p.image_id, force=True)
    sizes = [int(docker_client().images.get(p.image_id).attrs["Size"]) for p in pinned]
    cache = ImageCache(client2, cap=max(sizes) + 1, index=tmp_path / "index.json")
    assert cache.ensure(pinned[0]) == pinned[0].image_id
    assert cache.cached() == {pinned[0].image_id: sizes[0]}
    assert cache.ensure(pinned[0]) == pinned[0].image_id and cache.pulls == 1  # kept: no second pull
    cache.ensure(pinned[1])
    # Both do not fit: the least recently used one went.
    assert cache.evicted == [pinned[0].image_id] and cache.cached() == {pinned[1].image_id: sizes[1]}
    assert {str(i.id) for i in client2.images.list()} >= {pinned[1].image_id}
    assert pinned[0].image_id not in {str(i.id) for i in client2.images.list()}
    # An image a container uses is never removed, even past the bound.
    busy = client2.containers.create(pinned[1].image_id, command=["true"], network_mode="none")
    try:
        cache.ensure(pinned[0])
        assert set(cache.cached()) == {p.image_id for p in pinned}
    finally:
        busy.remove(force=True)
    FIGURES["pulls on the second node"] = f"{cache.pulls} in {cache.pull_seconds:.1f} s"
