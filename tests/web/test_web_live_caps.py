"""500 viewers do not slow the games (issue 15): the live streams are capped
(per client: 429, in all: 503, a closed stream frees its slot), and each
sends at most one update per ``min_update_s`` (coalesced, the last state
always arrives).

No assertion here rests on a tight timing: counts and order, generous
timeouts; the one bound that involves time is measured, so a slow machine
only loosens it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from helpers_web import LOOPBACK, league_text, serve
from test_web_api import error_of, new_competition, read_events

from referee.web import ServiceDB, Settings, make_app
from referee.web.live import HUB
from referee.web.schemas import Leaderboard

Service = Callable[..., Awaitable[Any]]


async def until(check: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    """Wait until ``check()`` holds (polling; generous by default)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what or check}"
        await asyncio.sleep(0.02)


async def open_stream(client: Any, cid: int) -> Any:
    """An event stream, once its first update arrived."""
    r = await client.get(f"/api/competitions/{cid}/events")
    assert r.status == 200, await r.text()
    await read_events(r, lambda d: True)
    return r


# ------------------------------------------------------------- stream caps


async def test_a_client_gets_429_beyond_its_streams_and_a_closed_one_frees_its_slot(
    service: Service, admin_token: str
) -> None:
    client = await service()
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    streams = [await open_stream(client, cid) for _ in range(4)]
    assert hub.open == 4 and hub.clients["127.0.0.1"] == 4
    r = await client.get(f"/api/competitions/{cid}/events")
    err = await error_of(r, 429)
    assert err["status"] == 429 and "too many live streams" in err["error"]
    assert int(r.headers["Retry-After"]) >= 1
    assert hub.open == 4  # a refused stream takes no slot
    # Another page of the service is not limited by the streams.
    assert (await client.get(f"/api/competitions/{cid}")).status == 200

    streams.pop(0).close()
    await until(lambda: hub.open == 3, what="the closed stream's slot")
    streams.append(await open_stream(client, cid))
    await error_of(await client.get(f"/api/competitions/{cid}/events"), 429)

    for s in streams:
        s.close()
    await until(lambda: hub.open == 0, what="every slot freed")
    assert not hub.clients and not hub.streams
    streams = [await open_stream(client, cid) for _ in range(4)]
    for s in streams:
        s.close()


async def test_a_client_gone_frees_its_slot_without_handler_cancellation(db_path: Path) -> None:
    """As ``referee serve`` runs it (aiohttp does not cancel a handler whose
    client left; the test client's server does): an idle stream whose
    client is gone is noticed, and its slot freed."""
    db = ServiceDB(db_path)
    try:
        cid = db.add_competition("class", league_text()).id
    finally:
        db.close()
    # No poll and no heartbeat: no write, which would find the client gone.
    app = make_app(db_path, Settings(max_streams_per_client=1, poll_s=3600, heartbeat_s=3600,
                                     bot_policy=LOOPBACK))
    runner, base = await serve(app)
    try:
        async with aiohttp.ClientSession() as session:
            r = await session.get(f"{base}/api/competitions/{cid}/events")
            assert r.status == 200
            await read_events(r, lambda d: True)
            await error_of(await session.get(f"{base}/api/competitions/{cid}/events"), 429)
            r.close()
            await until(lambda: app[HUB].open == 0, what="the slot of a client gone")
            r = await session.get(f"{base}/api/competitions/{cid}/events")
            assert r.status == 200
            r.close()
    finally:
        await runner.cleanup()


async def test_the_server_gets_503_beyond_its_streams(service: Service, admin_token: str) -> None:
    client = await service(max_streams=3, max_streams_per_client=10)
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    other = await new_competition(client, admin_token, name="other")
    streams = [await open_stream(client, cid), await open_stream(client, other), await open_stream(client, cid)]
    for c in (cid, other):
        r = await client.get(f"/api/competitions/{c}/events")
        err = await error_of(r, 503)
        assert err["status"] == 503 and "live streams" in err["error"]
        assert int(r.headers["Retry-After"]) >= 1
    assert hub.open == 3
    streams.pop(1).close()
    await until(lambda: hub.open == 2, what="the closed stream's slot")
    streams.append(await open_stream(client, other))
    for s in streams:
        s.close()
    await until(lambda: hub.open == 0, what="every slot freed")


async def test_an_unknown_competition_takes_no_slot(service: Service) -> None:
    client = await service(max_streams_per_client=1)
    for _ in range(3):
        await error_of(await client.get("/api/competitions/99/events"), 404)
    assert client.server.app[HUB].open == 0


# -------------------------------------------------------------- rate cap


async def test_updates_are_coalesced_and_the_last_state_arrives(service: Service, admin_token: str) -> None:
    # The poller is kept quiet: the updates here are the test's own.
    client = await service(min_update_s=0.5, poll_s=3600)
    hub = client.server.app[HUB]
    cid = await new_competition(client, admin_token)
    r = await client.get(f"/api/competitions/{cid}/events")
    assert r.status == 200
    first = (await read_events(r, lambda d: True))[0]
    board = msgspec.json.decode(json.dumps(first), type=Leaderboard)

    def publish(games: int) -> None:
        hub.publish(cid, msgspec.structs.replace(board, games=games))

    # A burst, all at once: one update, the latest.
    for games in range(1, 51):
        publish(games)
    seen = await read_events(r, lambda d: d["games"] == 50)
    assert [d["games"] for d in seen] == [50]

    # Updates faster than the cap: fewer arrive than were sent, in order,
    # and the last one is among them.
    loop = asyncio.get_running_loop()
    start = loop.time()
    for games in range(51, 91):
        publish(games)
        await asyncio.sleep(0.02)
    spread = loop.time() - start
    seen = await read_events(r, lambda d: d["games"] == 90)
    got = [d["games"] for d in seen]
    assert got == sorted(set(got)) and got[-1] == 90, got
    assert len(got) <= spread / 0.5 + 2, (got, spread)
    r.close()


async def test_an_idle_stream_keeps_its_heartbeat(service: Service, admin_token: str) -> None:
    client = await service(heartbeat_s=0.2, poll_s=3600)
    cid = await new_competition(client, admin_token)
    r = await client.get(f"/api/competitions/{cid}/events")
    buf = b""

    async def heartbeat() -> None:
        nonlocal buf
        while b": keep-alive\n\n" not in buf:
            chunk = await r.content.readany()
            assert chunk, "the event stream closed"
            buf += chunk

    await asyncio.wait_for(heartbeat(), 30)
    assert buf.startswith(b"event: update\n")
    r.close()
