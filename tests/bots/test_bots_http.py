"""Every Python sample bot through real HTTP on loopback (pytest-aiohttp).

Handshake, /start, /act on scripted positions (the reply must be legal), /end,
signatures accepted and refused, malformed bodies refused with a message, and
one whole game played over HTTP against an in-process opponent.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from protocol import (
    APIVERSION,
    HEADER,
    ActRequest,
    GameStart,
    Rules,
    Timeouts,
    decode_bot_info,
    decode_reply,
    sign,
)
from referee.game import new_game, view
from sample_bots import greedy, searcher, tactician
from sample_bots import random as random_bot
from tests.support.bots import SCRIPTED_NAMES, body, by_name, game_end

MakeClient = Callable[[web.Application], Awaitable[Any]]

APPS: dict[str, Callable[[str | None], web.Application]] = {
    "random": lambda secret: random_bot.create_app(secret, seed=1),
    "greedy": lambda secret: greedy.create_app(secret),
    "tactician": lambda secret: tactician.create_app(secret),
    "searcher": lambda secret: searcher.create_app(secret, seed=1),
}
SECRET = "s3cret-for-tests"


@pytest.mark.parametrize("bot", APPS)
async def test_handshake(aiohttp_client: MakeClient, bot: str) -> None:
    client = await aiohttp_client(APPS[bot](None))
    resp = await client.get("/")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    info = decode_bot_info(await resp.read())
    assert info.apiversion == APIVERSION
    assert info.name == bot
    assert info.author and info.version


@pytest.mark.parametrize("scenario", SCRIPTED_NAMES)
@pytest.mark.parametrize("bot", APPS)
async def test_start_act_end(aiohttp_client: MakeClient, bot: str, scenario: str) -> None:
    sc = by_name(scenario)
    client = await aiohttp_client(APPS[bot](None))
    resp = await client.post("/start", data=body(sc.start("g1")))
    assert resp.status == 200
    request = sc.request(request_id="req-7", game_id="g1", deadline_ms=300)
    resp = await client.post("/act", data=body(request))
    assert resp.status == 200
    raw = await resp.read()
    assert len(raw) < 64 * 1024
    reply = decode_reply(raw, "req-7")
    action = reply.chosen(request.legal)
    sc.assert_legal(action)
    resp = await client.post("/end", data=body(game_end("g1")))
    assert resp.status == 200


@pytest.mark.parametrize("bot", APPS)
async def test_signature_accepted_and_refused(aiohttp_client: MakeClient, bot: str) -> None:
    sc = by_name("ordinary play")
    client = await aiohttp_client(APPS[bot](SECRET))
    start = body(sc.start("g2"))
    act = body(sc.request(game_id="g2", deadline_ms=200))

    resp = await client.post("/start", data=start, headers={HEADER: sign(SECRET, start)})
    assert resp.status == 200
    resp = await client.post("/act", data=act, headers={HEADER: sign(SECRET, act)})
    assert resp.status == 200
    decode_reply(await resp.read(), "r1")

    for headers in ({}, {HEADER: sign("another secret", act)}, {HEADER: "sha256=00"}):
        resp = await client.post("/act", data=act, headers=headers)
        assert resp.status == 401
        assert HEADER in (await resp.json())["error"]
    # A signature of another body does not pass either.
    resp = await client.post("/end", data=body(game_end("g2")), headers={HEADER: sign(SECRET, act)})
    assert resp.status == 401
    # GET / is the public identity: not signed.
    assert (await client.get("/")).status == 200


@pytest.mark.parametrize(
    ("path", "data", "words"),
    [
        ("/act", b"this is not json", "not valid JSON"),
        ("/act", b'{"apiversion": "1", "game_id": "g"}', "missing required field"),
        ("/act", b"[]", "Expected `object`"),
        ("/start", b'{"apiversion": "1", "game_id": "g", "seat": "0"}', "Expected `int`"),
        ("/end", b"", "not valid JSON"),
    ],
)
@pytest.mark.parametrize("bot", APPS)
async def test_malformed_bodies_get_400(
    aiohttp_client: MakeClient, bot: str, path: str, data: bytes, words: str
) -> None:
    client = await aiohttp_client(APPS[bot](None))
    resp = await client.post(path, data=data)
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert words in error


@pytest.mark.parametrize("bot", ["tactician", "searcher"])
async def test_a_whole_game_over_http(aiohttp_client: MakeClient, bot: str) -> None:
    """Seat 0 is the bot over HTTP, seat 1 plays uniformly at random in process."""
    client = await aiohttp_client(APPS[bot](None))
    rules = Rules()
    state = new_game(rules, ["bot", "rnd"], random.Random(11))
    start = GameStart(
        apiversion="1",
        game_id="whole",
        seat=0,
        players=["bot", "rnd"],
        rules=rules,
        timeouts=Timeouts(move_ms=60),
    )
    assert (await client.post("/start", data=body(start))).status == 200
    rng = random.Random(2)
    since = 0
    k = 0
    while not state.over:
        for seat in state.to_move():
            legal = state.legal_actions(seat)
            if seat == 1:
                state.apply(rng.choice(legal), 1)
                continue
            request = ActRequest(
                apiversion="1",
                game_id="whole",
                request_id=f"w{k}",
                seat=0,
                turn=state.turn,
                deadline_ms=60,
                bank_ms=None,
                state=view(state, 0, since),
                legal=legal,
            )
            since = len(state.events)
            k += 1
            resp = await client.post("/act", data=body(request))
            assert resp.status == 200
            reply = decode_reply(await resp.read(), request.request_id)
            state.apply(reply.chosen(legal), 0)  # raises if illegal
    assert k > 10
    result = state.result()
    end = game_end("whole")
    end.places = result.places
    assert (await client.post("/end", data=body(end))).status == 200
