"""A game watched live over HTTP (issue 36): the list of games in play, a
watcher's stream (frames of public cards only, checked against the game's
record once it is over, ending with ``over`` and the places), the bounds
(per address and per game: 429 with Retry-After, as the leaderboard's
streams; a game not in play: 404), the pages (a game's, the TV page)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from referee.replay import read as read_replay
from referee.service.store import ServiceDB
from referee.tournament.results import replay_path
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.api import auth
from tests.support.watch import LEAGUE, Gate, gated_bots, leaks, next_frame
from tests.support.web import LOOPBACK, new_admin_token, serve

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def bots() -> AsyncIterator[tuple[Gate, list[str]]]:
    async with gated_bots() as held:
        yield held


async def test_watching_a_game_over_http(tmp_path: Path, bots: tuple[Gate, list[str]]) -> None:
    gate, (a, b) = bots
    db_path = tmp_path / "service.sqlite"
    ServiceDB(db_path).close()
    admin = new_admin_token(db_path)
    settings = Settings(
        poll_s=0.02, min_update_s=0.02, heartbeat_s=3600, bot_policy=LOOPBACK,
        max_streams_per_client=3, max_watchers_per_game=2,
    )  # fmt: skip
    app = make_app(db_path, settings)
    runner, base = await serve(app)
    try:
        async with aiohttp.ClientSession(base) as client:
            r = await client.post(
                "/api/competitions",
                json={"name": "w", "league": LEAGUE.format(a=a, b=b)},
                headers=auth(admin),
            )
            assert r.status == 201, await r.text()
            cid = (await r.json())["id"]
            assert (await (await client.get(f"/api/competitions/{cid}/live")).json())["games"] == []
            gate.open = False
            r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin))
            assert r.status == 202, await r.text()
            async with asyncio.timeout(30):
                await gate.moved.wait()
            listing = await (await client.get(f"/api/competitions/{cid}/live")).json()
            assert listing["watchable"] is True
            (game,) = listing["games"]
            rid, idx = game["run"], game["game"]
            assert game["page"] == f"/c/{cid}/runs/{rid}/live/{idx}"
            page = await client.get(game["page"])
            assert page.status == 200 and game["events"] in await page.text()
            tv = await client.get(f"/c/{cid}/tv")
            assert tv.status == 200 and f"/api/competitions/{cid}/live" in await tv.text()

            one = await client.get(game["events"])
            two = await client.get(game["events"])
            assert one.status == two.status == 200
            three = await client.get(game["events"])  # a third watcher of one game
            assert three.status == 429 and "watchers" in (await three.json())["error"]
            board = await client.get(f"/api/competitions/{cid}/events")  # the address's third stream
            assert board.status == 200
            four = await client.get(f"/api/competitions/{cid}/live")
            assert four.status == 200
            refused = await client.get(game["events"])
            assert refused.status == 429 and refused.headers["Retry-After"]
            assert "too many live streams" in (await refused.json())["error"]
            board.close()
            two.close()

            frames: list[dict[str, Any]] = []
            buf: list[bytes] = []
            kind = "frame"
            while kind != "over":
                async with asyncio.timeout(30):
                    kind, frame = await next_frame(one, buf)
                frames.append(frame)
                assert "you" not in frame["state"]
                gate.allow_held()  # moves go on as the watcher reads
                if kind == "frame":
                    assert "places" not in frame
            assert len(frames) > 3
            assert frames[0]["state"]["phase"] == "setup" and frames[0]["since"] == 0
            one.close()
            gate.release_all()

            room = app[ROOM]

            async def ended() -> bool:  # the run records the game: woken by the run's end
                run = await room.db.call(ServiceDB.run, rid)
                return run is not None and run.status != "running"

            async with asyncio.timeout(120):  # bounds a broken test only
                await room.until(ended)
            after = await client.get(game["page"], allow_redirects=False)  # the game's page: its replay now
            assert after.status == 303 and after.headers["Location"] == f"/c/{cid}/runs/{rid}/games/{idx}"
            gone = await client.get(game["events"])
            assert gone.status == 404 and "not being played" in (await gone.json())["error"]
    finally:
        await runner.cleanup()
    db = ServiceDB(db_path)
    try:
        run = db.run(rid)
    finally:
        db.close()
    assert run is not None
    path = replay_path(run.out_dir, idx)
    assert path is not None
    record = read_replay(path)
    assert frames[-1]["places"] == record.result.places  # type: ignore[union-attr]
    assert leaks(frames, record) == []


async def test_a_game_not_in_play_is_not_found(tmp_path: Path) -> None:
    db_path = tmp_path / "service.sqlite"
    db = ServiceDB(db_path)
    try:
        cid = db.add_competition("class", LEAGUE.format(a="http://127.0.0.1:9", b="http://127.0.0.1:9")).id
    finally:
        db.close()
    runner, base = await serve(make_app(db_path, Settings(poll_s=3600, bot_policy=LOOPBACK)))
    try:
        async with aiohttp.ClientSession(base) as client:
            r = await client.get(f"/api/competitions/{cid}/runs/1/live/0/events")
            assert r.status == 404
            assert "live watching needs the local executor" in (await r.json())["error"]
            page = await client.get(f"/c/{cid}/runs/1/live/0")  # no such run
            assert page.status == 404
            assert (await client.get(f"/api/competitions/{cid + 1}/live")).status == 404
    finally:
        await runner.cleanup()
