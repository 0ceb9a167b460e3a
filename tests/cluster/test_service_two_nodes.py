"""The classroom service on two Ray nodes (issue 28): ``referee serve
--executor ray --address ADDR --registry HOST:PORT``, in this process as the
service tests run it, on the two-node cluster of conftest.py.

Two teams' container bots (images the admin names, each checked in its
sandbox before it plays) play the ladder on both nodes, the second node
pulling each image from the registry by digest, and the final gives the
standings of the same competition played by the local executor. A team's
practice game, played by its child process on the cluster, goes through the
registry too: the node that lacks the team's image pulls it from there.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.sandbox.docker_daemon import docker_client, docker_module
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.api import auth, new_team, submit
from tests.support.cluster import FIGURES, TwoNodes, no_containers_left
from tests.support.containers import remove_instance_images
from tests.support.ladder import LEAGUE, final_of
from tests.support.practice import out_dir_of, played
from tests.support.web import LOOPBACK, new_admin_token, sample_bot_app, serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: Each team's bot: the sample image it runs.
TEAMS = {"ada": "greedy", "bo": "tactician"}


@pytest.fixture
async def house() -> AsyncIterator[str]:
    """The league file's house bot: the greedy sample on loopback (every node reaches it there)."""
    runner, url = await serve(sample_bot_app("greedy"))
    yield url
    await runner.cleanup()


def on_cluster(two_nodes: TwoNodes) -> dict[str, Any]:
    """The settings of ``referee serve --executor ray --address ADDR --workers 1
    --registry HOST:PORT`` (and two validation games an admission check)."""
    return {
        "executor": "ray",
        "executor_address": two_nodes.cluster.address,
        "executor_workers": 1,
        "executor_registry": two_nodes.registry.address,
        "validation_games": 2,
    }


def image_ids(images: dict[str, str]) -> dict[str, str]:
    """{team: the id of its image on the machine's daemon}."""
    client = docker_client()
    return {team: str(client.images.get(images[bot]).id) for team, bot in TEAMS.items()}


def off_the_second_node(two_nodes: TwoNodes, ids: list[str]) -> None:
    """The second node's daemon has none of these images (so a game there must pull them)."""
    client = two_nodes.daemon.client()
    why: list[str] = []
    for image_id in ids:
        try:
            client.images.remove(image_id, force=True)
        except docker_module().errors.ImageNotFound:
            pass
        except Exception as e:  # noqa: BLE001 - said below (a child image or a container holds it)
            why.append(f"{image_id[:19]}: {e}")
    assert not {str(i.id) for i in client.images.list()} & set(ids), why


def pulled_by_digest(two_nodes: TwoNodes, image_id: str) -> bool:
    """Whether the second node's daemon has the image, pulled from the registry by digest."""
    try:
        digests = two_nodes.daemon.client().images.get(image_id).attrs["RepoDigests"]
    except Exception:
        return False
    return any(d.startswith(f"{two_nodes.registry.address}/") and "@sha256:" in d for d in digests)


def nodes_that_played(out: Path) -> list[str]:
    """The nodes whose containers logged under the run folder `out` (OUT/nodes/<node>/logs)."""
    folder = out / "nodes"
    if not folder.is_dir():
        return []
    return sorted(n.name for n in folder.iterdir() if any((n / "logs").glob("*.container.log")))


async def test_the_ladder_and_the_final_of_container_bots_on_two_nodes_give_the_local_standings(
    aiohttp_client: Any, two_nodes: TwoNodes, images: dict[str, str], house: str, tmp_path: Path
) -> None:
    ids = image_ids(images)
    teams = {team: {"image": images[bot]} for team, bot in TEAMS.items()}
    t0 = time.perf_counter()
    local = await final_of(
        aiohttp_client, tmp_path / "local.sqlite", house, teams, by_admin=True, validation_games=2
    )
    FIGURES["the service's ladder and final, local executor"] = f"{time.perf_counter() - t0:.1f} s"
    off_the_second_node(two_nodes, list(ids.values()))
    t0 = time.perf_counter()
    remote = await final_of(
        aiohttp_client, tmp_path / "ray.sqlite", house, teams, by_admin=True, **on_cluster(two_nodes)
    )
    FIGURES["the service's ladder and final on two nodes"] = f"{time.perf_counter() - t0:.1f} s"
    try:
        assert remote.standings == local.standings
        assert {r["bot"] for r in local.standings} == {"house", *TEAMS}
        # The ladder's games and the final's went to both nodes; the second
        # one pulled each team's image from the registry, by digest.
        second = two_nodes.second.node_id[:12]
        assert len(nodes_that_played(remote.ladder)) == 2, nodes_that_played(remote.ladder)
        assert second in nodes_that_played(remote.final), nodes_that_played(remote.final)
        assert nodes_that_played(local.ladder) == []  # one machine: no node folders
        for team, image_id in ids.items():
            assert pulled_by_digest(two_nodes, image_id), team
        no_containers_left(two_nodes)
    finally:
        for final in (local, remote):
            remove_instance_images(docker_client(), final.instance)


async def test_a_practice_game_on_two_nodes_pulls_the_teams_image_through_the_registry(
    aiohttp_client: Any, two_nodes: TwoNodes, images: dict[str, str], house: str, tmp_path: Path
) -> None:
    """``--registry`` reaches the practice game's child process: its games
    alternate between the nodes (one seat rotation each), and the second
    node, without the team's image, pulls it from the registry (without the
    registry it could not, and the game would fail as the service's)."""
    db_path = tmp_path / "service.sqlite"
    admin = new_admin_token(db_path)
    client = await aiohttp_client(make_app(db_path, Settings(bot_policy=LOOPBACK, **on_cluster(two_nodes))))
    try:
        r = await client.post(
            "/api/competitions",
            json={"name": "class", "league": LEAGUE.format(house=house)},
            headers=auth(admin),
        )
        assert r.status == 201, await r.text()
        cid = int((await r.json())["id"])
        tid, token = await new_team(client, admin, cid, "ada")
        sub = (await submit(client, cid, tid, token, {"image": images["greedy"]}, sender=admin))["submission"]
        assert sub["status"] == "accepted", sub
        off_the_second_node(two_nodes, [sub["image_id"]])
        t0 = time.perf_counter()
        r = await client.post(
            f"/api/competitions/{cid}/teams/{tid}/practice",
            json={"opponents": ["house:house"]},
            headers=auth(token),
        )
        assert r.status == 202, await r.text()
        pid = (await r.json())["id"]
        game = await played(client, cid, tid, token, pid, timeout=300)
        FIGURES["a practice game on two nodes (its process joining the cluster)"] = (
            f"{time.perf_counter() - t0:.1f} s"
        )
        assert game["status"] == "finished", game
        assert [r["index"] for r in game["results"]] == [0, 1]
        # a game on each node, the second node's image from the registry
        assert len(nodes_that_played(out_dir_of(db_path, pid))) == 2, nodes_that_played(
            out_dir_of(db_path, pid)
        )
        assert pulled_by_digest(two_nodes, sub["image_id"])
    finally:
        instance = client.app[ROOM].pipeline.instance
        await client.close()
        remove_instance_images(docker_client(), instance)
    no_containers_left(two_nodes)
