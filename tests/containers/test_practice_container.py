"""A practice game (issue 26) plays a team's uploaded image in the same
sandbox as the ladder: its container under the service's runtime (gVisor's
``runsc``, as ``referee serve --runtime runsc``), with no network, a
read-only root and every capability dropped, its files in the practice
game's own folder (never the ladder's); the practice process killed
mid-game leaves no container behind."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from referee.bots.sandbox import docker_daemon
from referee.web.app_state import ROOM
from tests.support.containers import FIGURES, ladder_competition, upload_settled


@pytest.fixture
async def service(service_client: Any, runsc: str, no_override: None) -> Any:
    """The service as ``referee serve --runtime runsc --bot-networks 127.0.0.0/8`` runs it."""
    from tests.support.web import LOOPBACK

    docker_daemon.set_runtime(runsc)
    return await service_client(bot_policy=LOOPBACK)


@pytest.mark.slow
async def test_a_practice_game_plays_the_uploaded_image_in_the_sandbox(
    service: Any, docker_client: Any, tmp_path: Path
) -> None:
    from tests.support.api import auth, new_team
    from tests.support.builds import make_zip, python_bot_files
    from tests.support.practice import played
    from tests.support.web import sample_bot_app, serve

    runner, house = await serve(sample_bot_app("greedy"))
    try:
        cid = await ladder_competition(service, house)
        tid, token = await new_team(service, service.admin, cid, "team px")
        archive = make_zip(tmp_path / "bot.zip", python_bot_files())
        done = await upload_settled(service, cid, tid, token, archive.read_bytes())
        assert done["submission"]["status"] == "accepted", done
        t0 = time.perf_counter()
        r = await service.post(
            f"/api/competitions/{cid}/teams/{tid}/practice",
            json={"opponents": ["house:house"]},
            headers=auth(token),
        )
        assert r.status == 202, await r.text()
        pid = (await r.json())["id"]
        folder = f"competition-{cid}/practice/game-{pid}"
        seen: dict[str, Any] = {}
        watching = threading.Event()

        def watch() -> None:  # the game's container lives a few seconds: look for it all the time
            while not watching.is_set():
                for c in docker_client.containers.list(
                    filters={"label": [f"referee.tournament=practice-{pid}"]}
                ):
                    out = c.labels.get("referee.out", "")
                    if out.startswith(str(tmp_path)) and out.endswith(folder):  # this test's, this game's
                        seen[c.name] = c.attrs["HostConfig"]

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        game = await played(service, cid, tid, token, pid, timeout=180)
        watching.set()
        watcher.join(30)
        FIGURES["practice game of an uploaded image under runsc (start to result)"] = (
            f"{time.perf_counter() - t0:.1f} s"
        )
        assert game["status"] == "finished", game
        assert all(sorted(r["names"]) == ["house", "team px v1"] for r in game["results"]), game
        assert seen, "the practice game's container was never seen"
        for hc in seen.values():
            assert hc["Runtime"] == "runsc"
            assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] and hc["CapDrop"] == ["ALL"]
        replay = await (
            await service.get(
                f"/api/competitions/{cid}/teams/{tid}/practice/{pid}/replay", headers=auth(token)
            )
        ).json()
        assert replay["result"]["disqualified"] == [], replay["result"]
        # the competition saw nothing of it
        data = await (await service.get(f"/api/competitions/{cid}")).json()
        assert data["games"] == 0

        # the practice process killed (kill -9, the OOM killer) while its container runs: the game fails
        # as the service's, and the service removes the container the dead process left
        from referee.service.practice import SERVICE_FAULT

        r = await service.post(
            f"/api/competitions/{cid}/teams/{tid}/practice",
            json={"opponents": ["house:house"]},
            headers=auth(token),
        )
        assert r.status == 202, await r.text()
        pid = (await r.json())["id"]
        label = [f"referee.tournament=practice-{pid}"]
        deadline = time.monotonic() + 180
        while not docker_client.containers.list(filters={"label": label}):
            assert time.monotonic() < deadline, "the second practice game's container never started"
            await asyncio.sleep(0.1)
        current = service.server.app[ROOM].practice.current
        assert current is not None and current.pid is not None
        os.kill(current.pid, signal.SIGKILL)
        game = await played(service, cid, tid, token, pid, timeout=120)
        assert game["status"] == "failed" and SERVICE_FAULT in game["error"], game
        left = [c.name for c in docker_client.containers.list(all=True, filters={"label": label})]
        assert left == [], f"the killed practice process's containers were left: {left}"
    finally:
        await runner.cleanup()
