"""A team's images on the server's disk (issue 24, item 4), for real: the
images of superseded versions are pruned once nothing needs them (the
version in play and a run that may be resumed keep theirs), and a team's
images count against its quota."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from referee.service.runs import prepare_run
from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from tests.support.api import auth, error_of, new_competition, new_team
from tests.support.builds import make_zip, python_bot_files
from tests.support.containers import upload_settled

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(service_client: Callable[..., Awaitable[Any]]) -> Any:
    return await service_client(house_urls_anywhere=True)  # its house bot is on loopback


async def upload(client: Any, cid: int, tid: int, token: str, path: Path) -> dict[str, Any]:
    done = await upload_settled(client, cid, tid, token, path.read_bytes())
    assert done["submission"]["status"] == "accepted", done
    return dict(done["submission"])


def exists(docker_client: Any, image_id: str) -> bool:
    try:
        docker_client.api.inspect_image(image_id)
        return True
    except Exception:
        return False


async def gone_soon(docker_client: Any, image_id: str, timeout: float = 30) -> bool:
    """Pruning runs just after the submission is accepted: wait for it."""
    end = asyncio.get_running_loop().time() + timeout
    while exists(docker_client, image_id):
        if asyncio.get_running_loop().time() > end:
            return False
        await asyncio.sleep(0.2)
    return True


async def test_superseded_images_are_pruned_once_nothing_needs_them(
    client: Any, tmp_path: Path, docker_client: Any
) -> None:
    """Issue 24: nothing pruned: every version a team ever uploaded stayed
    on the daemon's disk. Now a superseded version's image goes as soon as
    nothing needs it; the version in play and those a resumable run plays stay."""
    from tests.support.web import sample_bot_app, serve

    runner, house = await serve(sample_bot_app("greedy"))
    # contents of this run only: no other test's build can share these images through the build cache
    stamp = secrets.token_hex(6)
    made: list[str] = []
    try:
        cid = await new_competition(client, client.admin, house={"house": house})
        tid, token = await new_team(client, client.admin, cid, "prune team")
        v1 = await upload(
            client, cid, tid, token, make_zip(tmp_path / "v1.zip", python_bot_files(f"{stamp}-v1"))
        )
        made.append(v1["image_id"])
        # a run of v1 that did not finish (it may be resumed): prepared as the service starts one,
        # interrupted before it played
        db = ServiceDB(client.db_path)
        try:
            run, _ = prepare_run(db, cid, resume=False)
            db.end_run(run.id, "interrupted")
        finally:
            db.close()
        v2 = await upload(
            client, cid, tid, token, make_zip(tmp_path / "v2.zip", python_bot_files(f"{stamp}-v2"))
        )
        made.append(v2["image_id"])
        v3 = await upload(
            client, cid, tid, token, make_zip(tmp_path / "v3.zip", python_bot_files(f"{stamp}-v3"))
        )
        made.append(v3["image_id"])
        assert await gone_soon(docker_client, v2["image_id"]), "v2 is superseded and nothing needs it"
        assert exists(docker_client, v1["image_id"]), "v1 is pinned by run that may be resumed"
        assert exists(docker_client, v3["image_id"]), "v3 is in play"
        from referee.service.disk import pins, prune

        needed = await client.app[ROOM].db.call(pins)
        assert needed[v1["image_id"]].startswith(f"run {run.id} (interrupted")
        assert needed[v3["image_id"]] == "the version in play"
        # the run is finished: nothing can resume it, v1 goes at the next pruning
        db = ServiceDB(client.db_path)
        try:
            db.end_run(run.id, "finished")
        finally:
            db.close()
        assert [v1["id"]] == await prune(client.app[ROOM], tid)
        assert not exists(docker_client, v1["image_id"]) and exists(docker_client, v3["image_id"])
        # the images the team keeps count against its quota
        size = int(docker_client.api.inspect_image(v3["image_id"])["Size"])
        client.app[ROOM].settings.team_image_quota = size + 1000
        r = await client.post(
            f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source", data=b"x" * 4096, headers=auth(token)
        )
        err = await error_of(r, 413)
        assert (
            "quota" in err["error"] and "the version in play" in err["error"] and "v3 (image" in err["error"]
        )
        client.app[ROOM].settings.team_image_quota = size + (1 << 20)
        r = await client.post(
            f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source", data=b"x" * 4096, headers=auth(token)
        )
        assert r.status == 201, await r.text()
    finally:
        await runner.cleanup()
        for image_id in made:  # this test's own images only
            with contextlib.suppress(Exception):
                docker_client.api.remove_image(image_id, force=False)


async def test_the_ladder_keeps_a_retired_versions_image_while_it_owes_games(
    client: Any, tmp_path: Path, docker_client: Any
) -> None:
    """A version replaced in an open competition's ladder still plays the
    rotations of the deals it was dealt into: its image stays until they are
    played, then the next pruning removes it."""
    import time

    from referee.service.disk import pins, prune
    from referee.tournament.ladder import needed_entries
    from sample_bots import greedy
    from sample_bots.sdk import make_app as bot_app
    from tests.support.web import serve

    def slow(request: Any) -> int:  # a house bot slow enough that games are in flight when v2 comes
        time.sleep(0.05)
        return greedy.decide(request)

    runner, house = await serve(bot_app(slow, greedy.INFO))
    stamp = secrets.token_hex(6)
    made: list[str] = []
    cid = 0
    try:
        cid = await new_competition(client, client.admin, house={"house": house})
        tid, token = await new_team(client, client.admin, cid, "ladder team")
        v1 = await upload(
            client, cid, tid, token, make_zip(tmp_path / "v1.zip", python_bot_files(f"{stamp}-l1"))
        )
        made.append(v1["image_id"])
        r = await client.post(
            f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(client.admin)
        )
        assert r.status == 202, await r.text()
        db = client.app[ROOM].db
        ladder = await db.call(ServiceDB.latest_run_of, cid, "ladder")
        assert ladder is not None
        for _ in range(600):  # v1 seated and dealt into planned games
            if any(e.submission == v1["id"] for e in await asyncio.to_thread(needed_entries, ladder.out_dir)):
                break
            await asyncio.sleep(0.1)
        v2 = await upload(
            client, cid, tid, token, make_zip(tmp_path / "v2.zip", python_bot_files(f"{stamp}-l2"))
        )
        made.append(v2["image_id"])
        for _ in range(300):  # v2 entered the ladder, v1 retired
            owing = {e.submission: e.status for e in await asyncio.to_thread(needed_entries, ladder.out_dir)}
            if owing.get(v1["id"]) != "active":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("v2 did not replace v1 in the ladder within 30 s")
        pruned = await prune(client.app[ROOM], tid)
        needed = await db.call(pins)
        # owing now: owing when it was pruned too (a retired entry's games only go down)
        owing = {e.submission: e.status for e in await asyncio.to_thread(needed_entries, ladder.out_dir)}
        if v1["id"] in owing:  # it owes games of its deals: kept, and why
            assert v1["id"] not in pruned and exists(docker_client, v1["image_id"])
            assert needed[v1["image_id"]] == "the ladder (owes games)"
            print("\nv1 owed ladder games when v2 entered: its image was kept")
        else:
            print("\nv1 had played its games when v2 entered: nothing to keep")
        for _ in range(1800):  # the ladder plays v1's last rotations
            if v1["id"] not in {
                e.submission for e in await asyncio.to_thread(needed_entries, ladder.out_dir)
            }:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("v1 still owes ladder games after 180 s")
        for _ in range(60):  # its container stops once its last game ends; then the next pruning removes it
            if v1["id"] in await prune(client.app[ROOM], tid):
                break
            await asyncio.sleep(0.5)
        assert not exists(docker_client, v1["image_id"]), "v1 is retired and owes no game"
        assert exists(docker_client, v2["image_id"]), "v2 is in play"
    finally:
        if cid:
            await client.post(f"/api/competitions/{cid}/freeze", headers=auth(client.admin))
        await runner.cleanup()
        for image_id in made:
            with contextlib.suppress(Exception):
                docker_client.api.remove_image(image_id, force=False)
