"""Uploads through the classroom service, for real (issue 14): a team's
Python source zip and a ``docker save`` of the Node sample are built or
loaded, checked in their sandbox and accepted; a bot that crashes at start
is refused with its own output, and the previous version stays in play."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from referee.service.pipeline import image_tag
from referee.web.app_state import ROOM
from tests.support.api import auth, new_competition, new_team
from tests.support.builds import make_zip, python_bot_files, save_image
from tests.support.containers import upload_settled

pytestmark = [
    pytest.mark.slow,
    pytest.mark.runtime_sensitive,
]  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

CRASH_PY = "import sys\nprint('bot: cannot find my model file', file=sys.stderr)\nsys.exit(3)\n"


@pytest.fixture
async def client(service_client: Callable[..., Awaitable[Any]]) -> Any:
    return await service_client(house_urls_anywhere=True)  # its house bot is on loopback


async def upload(client: Any, cid: int, tid: int, token: str, kind: str, path: Path) -> dict[str, Any]:
    return await upload_settled(client, cid, tid, token, path.read_bytes(), kind=kind, note=f"{kind} upload")


async def test_a_source_zip_is_built_checked_and_accepted_then_a_crash_is_refused(
    client: Any, tmp_path: Path, docker_client: Any
) -> None:
    cid = await new_competition(client, client.admin)
    tid, token = await new_team(client, client.admin, cid, "team a")
    done = await upload(client, cid, tid, token, "source", make_zip(tmp_path / "bot.zip", python_bot_files()))
    sub = done["submission"]
    assert sub["status"] == "accepted", done
    assert sub["image_id"].startswith("sha256:") and done["log"]
    assert any("validation games" in x["what"] and x["ok"] for x in done["report"]["lines"])
    crash = await upload(
        client, cid, tid, token, "source", make_zip(tmp_path / "crash.zip", {"bot.py": CRASH_PY})
    )
    assert crash["submission"]["status"] == "refused"
    start = crash["report"]["lines"][0]
    assert start["what"] == "start" and not start["ok"]
    assert "cannot find my model file" in start["detail"] and str(tmp_path) not in start["detail"]
    # a refused version's image is removed; the accepted one stays
    # one listing call: images.list() inspects each image after listing, and so races any
    # removal the daemon is doing for another build
    tags = [t for image in docker_client.api.images() for t in image.get("RepoTags") or ()]
    # tagged with the team's version numbers (v1, v2), not the service-wide submission ids
    assert (sub["version"], crash["submission"]["version"]) == (1, 2), (sub, crash)
    inst = client.app[ROOM].pipeline.instance
    assert image_tag(tid, 2, inst) not in tags
    assert image_tag(tid, 1, inst) in tags
    assert f"referee-{inst.id}-team-{tid}:v1" in done["log"], done["log"][-2000:]
    own = await (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(token))).json()
    assert own["playing"]["id"] == sub["id"]
    # its folder is keyed by the team's id, not its name
    data = Path(client.app[ROOM].db.data_dir)
    assert (data / "teams" / str(tid)).is_dir() and not (data / "teams" / "team a").exists()
    assert not any((data / "teams" / str(tid) / "uploads").iterdir())  # uploads are gone once built


async def test_a_docker_save_of_the_node_sample_is_accepted(
    client: Any, images: dict[str, str], docker_client: Any, tmp_path: Path
) -> None:
    if "node" not in images:
        pytest.skip("node is not installed: no Node sample image")
    cid = await new_competition(client, client.admin)
    tid, token = await new_team(client, client.admin, cid, "node team")
    archive = save_image(docker_client, images["node"], tmp_path / "node.tar")
    done = await upload(client, cid, tid, token, "archive", archive)
    assert done["submission"]["status"] == "accepted", done
    image_id = done["submission"]["image_id"]
    tags = docker_client.images.get(image_id).tags
    assert image_tag(tid, 1, client.app[ROOM].pipeline.instance) in tags  # its first version: v1


CHATTY_PY = PY_BOT_TEMPLATE = '''\
"""A team's bot that says what it does on stderr."""
import sys

from protocol import APIVERSION, ActRequest, BotInfo
from sample_bots.sdk import run_bot
from sample_bots.strategy import lowest_play_index

INFO = BotInfo(apiversion=APIVERSION, name="chatty", author="team", version="1")


def decide(request: ActRequest) -> int:
    print(f"chatty: turn {request.turn} of {request.game_id}", file=sys.stderr, flush=True)
    return lowest_play_index(request.legal)


if __name__ == "__main__":
    run_bot(decide, INFO)
'''


async def test_a_team_reads_its_containers_output_game_by_game(client: Any, tmp_path: Path) -> None:
    from tests.support.api import play_run
    from tests.support.web import sample_bot_app, serve

    runner, house = await serve(sample_bot_app("greedy"))
    try:
        cid = await new_competition(client, client.admin, house={"house": house})
        tid, token = await new_team(client, client.admin, cid, "chatty team")
        done = await upload(
            client, cid, tid, token, "source", make_zip(tmp_path / "c.zip", {"bot.py": CHATTY_PY})
        )
        assert done["submission"]["status"] == "accepted", done
        await play_run(client, cid, client.admin)
    finally:
        await runner.cleanup()
    diag = await (
        await client.get(f"/api/competitions/{cid}/teams/{tid}/diagnostics", headers=auth(token))
    ).json()
    assert diag["games"] and diag["fault_count"] == 0
    for g in diag["games"]:
        assert "chatty: turn" in g["output"], g
    # each game's part holds that game's lines only
    games = await (await client.get(f"/api/competitions/{cid}/runs/1/games")).json()
    ids = {g["index"]: g["game_id"] for g in games}
    for g in diag["games"]:
        assert all(ids[g["game"]] in line for line in g["output"].splitlines() if line.startswith("chatty:"))
