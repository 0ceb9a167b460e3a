"""A team member's seat over its WebSocket (issue 36), with no browser: the
messages are byte for byte what a bot at that seat is sent (each request's
state hashes to what the game's record says the match sent that seat, and
decodes with the bots' own strict decoder), the game counts against the
team's practice limit while it plays, and a page that goes away leaves
the seat under the usual fault policy (the game still ends and is recorded)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from protocol.codec import decode_act_request
from referee.record import RequestLine, state_hash
from referee.replay import read as read_replay
from referee.service.store import ServiceDB
from referee.service.store.practice import get_game
from referee.tournament.results import replay_path
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.web import LOOPBACK, Background, league_text, new_admin_token

pytestmark = pytest.mark.timeout(120)
Service = Any


class _Body(msgspec.Struct):
    request_id: str
    state: msgspec.Raw


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    bg = Background()
    try:
        urls = bg.serve_bots({"house": "greedy"})
        db_path = tmp_path / "service.sqlite"
        new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Class", league_text(name="class", house={"house-greedy": urls["house"]}))
        _, token = db.add_team(comp.id, "ada")
        db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        )
        yield {"base": base, "token": token, "db": db_path}
    finally:
        bg.close()


async def _seated(http: aiohttp.ClientSession, base: str, token: str) -> tuple[str, str]:
    """Sign in and take a seat against the house bot: the play page's URL and the form's CSRF token."""
    async with http.post(f"{base}/login", data={"token": token}, headers={"Origin": base}) as r:
        assert r.status == 200, await r.text()
    async with http.get(f"{base}/team/practice") as r:
        page = await r.text()
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m is not None
    csrf = m.group(1)
    data = {"csrf": csrf, "opponent": "house:house-greedy"}
    async with http.post(f"{base}/team/practice/seat", data=data, headers={"Origin": base}) as r:
        assert r.status == 200 and r.url.path == "/team/practice/1/play", (r.status, r.url)
    return f"{base}/team/practice/1", csrf


def _game(db_path: Path) -> Any:
    db = ServiceDB(db_path)
    try:
        return get_game(db, 1)
    finally:
        db.close()


def test_the_seats_messages_are_the_bytes_a_bot_gets_and_the_game_counts_as_practice(
    site: dict[str, Any],
) -> None:
    base = site["base"]

    async def main() -> tuple[list[tuple[str, bytes]], int, list[int]]:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            game_url, csrf = await _seated(http, base, site["token"])
            acts: list[tuple[str, bytes]] = []
            kinds: list[str] = []
            # one practice game in flight per team, a person's included
            data = {"csrf": csrf, "opponent": "house:house-greedy"}
            async with http.post(f"{base}/team/practice", data=data, headers={"Origin": base}) as r:
                limited = r.status
            async with http.ws_connect(
                game_url.replace("http", "ws") + "/seat", headers={"Origin": base}
            ) as ws:
                # a second page cannot take the same seat
                with pytest.raises(aiohttp.WSServerHandshakeError) as second:
                    await http.ws_connect(game_url.replace("http", "ws") + "/seat", headers={"Origin": base})
                async for msg in ws:
                    kind, _, body = msg.data.partition("\n")
                    kinds.append(kind)
                    if kind == "act":
                        raw = body.encode()
                        request = decode_act_request(raw)  # the bots' own strict decoder
                        acts.append((request.request_id, raw))
                        await ws.send_str(
                            msgspec.json.encode({"request_id": request.request_id, "index": 0}).decode()
                        )
                    if kind == "replay":
                        assert body == "/team/practice/1"
            return acts, limited, [second.value.status, kinds.count("start"), kinds.count("end")]

    acts, limited, (second, starts, ends) = asyncio.run(main())
    assert limited == 429 and second == 409 and starts == 1 and ends == 1
    game = _game(site["db"])
    assert game.status == "finished" and len(game.results) == 1, game
    seat = game.results[0].seat
    path = replay_path(game.out_dir, 0)
    assert path is not None
    record = read_replay(path)
    sent = {
        line.request_id: line.state_sha256
        for line in record.lines
        if isinstance(line, RequestLine) and line.seat == seat
    }
    got = {rid: state_hash(bytes(msgspec.json.decode(raw, type=_Body).state)) for rid, raw in acts}
    assert got == sent  # every request of the seat, each with the very state bytes the match sent
    assert all(
        line.by == "bot" for line in record.lines if isinstance(line, RequestLine) and line.seat == seat
    )


async def test_a_page_that_goes_away_leaves_the_seat_and_the_game_ends_recorded(
    service: Service, db_path: Path, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """What only the web does: its WebSocket closing leaves the seat (the
    rest of the rule, on the core: tests/service/test_seat_left.py), and
    another site's page cannot open it. The wait is on the service's change
    signal: the service plays on the test's loop."""
    db = ServiceDB(db_path)
    try:
        comp = db.add_competition("Class", league_text(house={"house-greedy": bot_urls["greedy"]}))
        _, token = db.add_team(comp.id, "ada")
    finally:
        db.close()
    client = await service()
    room = client.app[ROOM]
    base = str(client.make_url("")).rstrip("/")
    http = client.session
    game_url, _ = await _seated(http, base, token)
    hg = room.human_games[1]
    async with http.ws_connect(game_url.replace("http", "ws") + "/seat", headers={"Origin": base}) as ws:
        msg = await ws.receive()
        assert msg.data.startswith("start\n")
        assert hg.held and not hg.seat.left
    # another site's page cannot open it (the Origin check of every form)
    with pytest.raises(aiohttp.WSServerHandshakeError) as foreign:
        await http.ws_connect(
            game_url.replace("http", "ws") + "/seat", headers={"Origin": "http://evil.example"}
        )
    assert foreign.value.status == 403

    async def ended() -> bool:
        game = await room.db.call(get_game, 1)
        return game is not None and game.status != "playing"

    async with asyncio.timeout(60):  # a bound for a broken test, never a wait
        await room.until(ended)
    assert hg.seat.left  # the page's socket closing left the seat
    game = await room.db.call(get_game, 1)
    assert game is not None and game.status == "finished", game
    path = replay_path(game.out_dir, 0)
    assert path is not None
    record = read_replay(path)
    assert record.result is not None
    seat = game.results[0].seat
    assert {f.kind for f in record.result.faults[seat]} == {"connection"}
