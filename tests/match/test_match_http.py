"""The HTTP transport and the clock: every failure comes back as data."""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp import web

from protocol import (
    APIVERSION,
    ActRequest,
    GameEnd,
    GameStart,
    Rules,
    Timeouts,
    verify,
)
from referee.bots import (
    ActOutcome,
    Bot,
    BotError,
    BotUnreachable,
    Clock,
    HttpBot,
    free_port,
    make_session,
)
from referee.game import new_game, view
from tests.support.match import Recorder
from tests.support.programs.zoo import BODIES, CONNECTIONS, HEADERS, good_app, recording, serve, zoo_app


def _request(request_id: str = "g.1") -> ActRequest:
    state = new_game(Rules(), 2, random.Random(3))
    return ActRequest(
        apiversion=APIVERSION,
        game_id="g",
        request_id=request_id,
        seat=0,
        turn=0,
        deadline_ms=150,
        bank_ms=None,
        state=view(state, 0),
        legal=state.legal_actions(0),
    )


def _app(
    handler: Callable[[web.Request], object], path: str = "/act", method: str = "POST"
) -> web.Application:
    app = recording(web.Application())
    app.router.add_route(method, path, handler)  # type: ignore[arg-type]
    return app


# ------------------------------------------------------------------ clock


def test_clock_without_bank() -> None:
    clock = Clock(Timeouts(move_ms=200, start_ms=3000, end_ms=1500))
    assert clock.move() == (200, None, 0.2)
    clock.charge(500)
    assert clock.move() == (200, None, 0.2)
    assert clock.start_s == 3.0 and clock.end_s == 1.5


def test_clock_with_bank() -> None:
    clock = Clock(Timeouts(move_ms=100, bank_ms=250))
    assert clock.move() == (100, 250, 0.35)
    clock.charge(90)  # in time: the bank is untouched
    assert clock.move().bank_ms == 250
    clock.charge(200)
    assert clock.move() == (100, 150, 0.25)
    clock.charge(1000)
    assert clock.move() == (100, 0, 0.1)


# -------------------------------------------------------------- handshake


async def test_handshake(session: aiohttp.ClientSession) -> None:
    async with serve(good_app("alice")) as url:
        bot = HttpBot(url, session=session)
        assert bot.name == url
        info = await bot.handshake()
        assert (info.apiversion, info.name, info.author) == ("1", "alice", "zoo")
        assert bot.name == "alice"
        assert HttpBot(url, name="given", session=session).name == "given"
        assert isinstance(bot, Bot)


@pytest.mark.parametrize(
    ("reply", "status", "words"),
    [
        (b'{"apiversion": "2", "name": "x"}', 200, "speaks protocol version '2'"),
        (b'{"name": "x"}', 200, "apiversion"),
        (b"<html>", 200, "not valid JSON"),
        (b"", 404, "answered HTTP 404"),
    ],
)
async def test_handshake_errors(
    reply: bytes, status: int, words: str, session: aiohttp.ClientSession
) -> None:
    async def info(request: web.Request) -> web.Response:
        return web.Response(body=reply, status=status)

    async with serve(_app(info, "/", "GET")) as url:
        with pytest.raises(BotError) as err:
            await HttpBot(url, session=session).handshake()
    assert words in str(err.value)
    assert url in str(err.value)
    assert not isinstance(err.value, BotUnreachable)


async def test_handshake_unreachable(session: aiohttp.ClientSession) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BotUnreachable, match="connection refused.*is the bot running"):
        await HttpBot(url, session=session).handshake()


async def test_handshake_timeout(session: aiohttp.ClientSession) -> None:
    async def info(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    async with serve(_app(info, "/", "GET")) as url:
        with pytest.raises(BotUnreachable, match="no answer within 100 ms"):
            await HttpBot(url, session=session).handshake(0.1)


def test_bad_urls() -> None:
    for url in ("127.0.0.1:8001", "ftp://x", "http://"):
        with pytest.raises(ValueError, match="http://127.0.0.1:8001"):
            HttpBot(url)


# -------------------------------------------------------------------- act


async def test_act_outcomes(session: aiohttp.ClientSession) -> None:
    async with serve(good_app()) as url:
        bot = HttpBot(url, session=session)
        outcome = await bot.act(_request("g.1"), 1.0)
        assert outcome.fault is None and outcome.reply is not None
        assert outcome.reply.request_id == "g.1"
        assert 0 < outcome.latency_ms < 1000


async def test_reply_over_the_cap_is_too_large(session: aiohttp.ClientSession) -> None:
    async with serve(good_app()) as url:
        bot = HttpBot(url, session=session, max_body=10)
        outcome = await bot.act(_request(), 1.0)
    assert outcome.fault is not None and outcome.fault.kind == "too_large"


async def test_huge_reply_is_not_buffered(session: aiohttp.ClientSession) -> None:
    """A streamed 10 MB reply: abandoned just past the cap, quickly."""
    app = zoo_app("huge")
    async with serve(app) as url:
        outcome = await HttpBot(url, session=session).act(_request(), 2.0)
    assert outcome.fault is not None and outcome.fault.kind == "too_large"
    assert "65536" in outcome.fault.detail
    assert outcome.latency_ms < 500


async def test_compressed_reply_is_not_inflated(session: aiohttp.ClientSession) -> None:
    """A gzip body (a zip bomb could pass the cap once inflated) is not decoded."""
    import gzip

    async def act(request: web.Request) -> web.Response:
        body = gzip.compress(b'{"request_id": "g.1", "index": 0}')
        return web.Response(body=body, headers={"Content-Encoding": "gzip"}, content_type="application/json")

    async with serve(_app(act)) as url:
        outcome = await HttpBot(url, session=session).act(_request(), 1.0)
    assert outcome.fault is not None and outcome.fault.kind == "bad_json"


async def test_redirects_are_not_followed(session: aiohttp.ClientSession) -> None:
    async def act(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("http://10.0.0.1/act")

    async with serve(_app(act)) as url:
        outcome = await HttpBot(url, session=session).act(_request(), 1.0)
    assert outcome.fault is not None and outcome.fault.kind == "http_status"
    assert "307" in outcome.fault.detail


async def test_timeout_cancels_the_call(session: aiohttp.ClientSession) -> None:
    cancelled = asyncio.Event()

    async def act(request: web.Request) -> web.Response:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.Response()

    async with serve(_app(act)) as url:
        outcome = await HttpBot(url, session=session).act(_request(), 0.1)
        await asyncio.wait_for(cancelled.wait(), 1)  # the connection was dropped
    assert outcome.fault is not None and outcome.fault.kind == "timeout"
    assert outcome.fault.detail == "no reply within 100 ms"
    assert 100 <= outcome.latency_ms < 200
    assert outcome.fault.overrun_ms is not None and outcome.fault.overrun_ms < 100


async def test_keep_alive(session: aiohttp.ClientSession) -> None:
    app = good_app()
    async with serve(app) as url:
        bot = HttpBot(url, session=session)
        await bot.handshake()
        for k in range(20):
            outcome = await bot.act(_request(f"g.{k}"), 1.0)
            assert outcome.fault is None
    assert len(app[CONNECTIONS]) == 1


async def test_connection_limit_per_bot() -> None:
    busy = 0
    peak = 0

    async def act(request: web.Request) -> web.Response:
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        await asyncio.sleep(0.05)
        busy -= 1
        return web.json_response({"request_id": "g.1", "index": 0})

    session = make_session(connections_per_bot=2)
    try:
        async with serve(_app(act)) as url:
            bot = HttpBot(url, session=session)
            outcomes = await asyncio.gather(*(bot.act(_request(), 2.0) for _ in range(6)))
    finally:
        await session.close()
    assert all(o.fault is None for o in outcomes)
    assert peak == 2


async def test_signature_header(session: aiohttp.ClientSession) -> None:
    app = good_app()
    async with serve(app) as url:
        bot = HttpBot(url, session=session, secret="k")
        request = _request()
        assert (await bot.act(request, 1.0)).fault is None
        start = GameStart(
            apiversion="1", game_id="g", seat=0, players=["a", "b"], rules=Rules(), timeouts=Timeouts()
        )
        assert await bot.start(start, 1.0) is None
    bodies: list[tuple[str, bytes]] = app[BODIES]
    received: list[dict[str, str]] = app[HEADERS]
    for (path, body), headers in zip(bodies, received):
        assert verify("k", body, headers["X-Referee-Signature"]), path
        assert headers["Content-Type"] == "application/json"
        assert headers["Accept-Encoding"] == "identity"


async def test_unsigned_without_secret(session: aiohttp.ClientSession) -> None:
    app = good_app()
    async with serve(app) as url:
        assert (await HttpBot(url, session=session).act(_request(), 1.0)).fault is None
    assert "X-Referee-Signature" not in app[HEADERS][0]


async def test_start_and_end_faults(session: aiohttp.ClientSession) -> None:
    async def bad(request: web.Request) -> web.Response:
        return web.Response(status=503)

    app = web.Application()
    app.router.add_post("/start", bad)
    start = GameStart(
        apiversion="1", game_id="g", seat=0, players=["a", "b"], rules=Rules(), timeouts=Timeouts()
    )
    end = GameEnd(game_id="g", seat=0, places=[1, 2], adjudicated=False, disqualified=[], faults=[])
    async with serve(app) as url:
        bot = HttpBot(url, session=session)
        fault = await bot.start(start, 1.0)
        assert fault is not None and fault.kind == "http_status" and "POST /start" in fault.detail
        fault = await bot.end(end, 1.0, 7)  # no /end route: 404
        assert fault is not None and "404" in fault.detail
        assert fault.turn == 7  # dated by the transport, with the turn it is given
    fault = await HttpBot(url, session=session).end(end, 1.0, 7)  # server gone
    assert fault is not None and fault.kind == "connection"


async def test_own_session_and_unix_socket() -> None:
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "bot.sock")
    app = good_app("unixbot")
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.UnixSite(runner, path)
    await site.start()
    try:
        async with HttpBot(f"unix:{path}") as bot:
            info = await bot.handshake()
            assert info.name == "unixbot"
            assert (await bot.act(_request(), 1.0)).fault is None
        async with HttpBot("http://bot", unix_socket=path) as bot:
            assert (await bot.handshake()).name == "unixbot"
    finally:
        await runner.cleanup()


async def test_transport_bug_does_not_end_the_game(session: aiohttp.ClientSession) -> None:
    """A transport that raises (a bug) faults that seat; the game goes on."""
    from referee.match import play_match

    class Broken(HttpBot):
        async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
            raise RuntimeError("bug")

    async with serve(good_app("a")) as u1, serve(good_app("b")) as u2:
        result = await play_match(
            [HttpBot(u1, session=session), Broken(u2, session=session)], 3, timeouts=Timeouts(move_ms=150)
        )
    assert result.disqualified == [1]
    assert "transport error: RuntimeError: bug" in result.faults[1][0].detail


async def test_spliced_request_body_equals_the_encoded_act_request() -> None:
    """The match builds each /act body straight from the engine
    (view_bytes, spliced into _ActRequestWire): the bytes every bot gets must
    stay exactly those of encoding the ActRequest of view(), whatever fields
    either gains, and the state hashed for the record that view's encoding."""
    import hashlib

    from protocol.codec import ENCODER
    from protocol.messages import APIVERSION
    from referee.game import view
    from referee.match import Match
    from referee.record import steps

    for seed, rules in ((4, Rules()), (5, Rules(colour_run=True, reverses=True, sabotage=True))):
        bots = [Recorder(name, seed=seed + i) for i, name in enumerate(["a", "b", "c"])]
        match = Match(bots, seed, rules=rules)
        await match.play()
        sent = {request_id: body for bot in bots for body, request_id, _, _ in bot.sent}
        since = [0] * len(bots)  # each seat's events count at its previous request
        checked = 0
        for step in steps(match.record, keep_sent=True):
            line, state = step.line, step.sent  # the state the request was built from
            assert state is not None
            seat = line.seat
            budget = match.clocks[seat].move()  # never charged: every reply took 0 ms
            expected = ActRequest(
                apiversion=APIVERSION,
                game_id=match.game_id,
                request_id=line.request_id,
                seat=seat,
                turn=state.turn,
                deadline_ms=budget.deadline_ms,
                bank_ms=budget.bank_ms,
                state=view(state, seat, since[seat]),
                legal=state.legal_actions(seat),
            )
            since[seat] = len(state.events)
            assert sent[line.request_id] == ENCODER.encode(expected)
            assert line.state_sha256 == hashlib.sha256(ENCODER.encode(expected.state)).hexdigest()
            checked += 1
        assert checked == len(sent) > 10
