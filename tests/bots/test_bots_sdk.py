"""The bot SDK (sample_bots/sdk.py): replies, hooks, fallbacks, logging, the command line."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from protocol import (
    ActRequest,
    BotInfo,
    GameEnd,
    GameStart,
    Pickup,
    Play,
    decode_bot_info,
    decode_reply,
)
from sample_bots import sdk
from tests.support.bots import body, by_name, game_end

MakeClient = Callable[[web.Application], Awaitable[Any]]
INFO = BotInfo(apiversion="1", name="toy", author="tests", version="0.1")


def request(deadline_ms: int = 1000) -> ActRequest:
    return by_name("ordinary play").request(request_id="rq", deadline_ms=deadline_ms)


async def act(client: Any, deadline_ms: int = 1000) -> dict[str, Any]:
    resp = await client.post("/act", data=body(request(deadline_ms)))
    assert resp.status == 200
    raw = await resp.read()
    decode_reply(raw, "rq")
    result: dict[str, Any] = await resp.json()
    return result


async def test_index_reply(aiohttp_client: MakeClient) -> None:
    client = await aiohttp_client(sdk.make_app(lambda r: len(r.legal) - 1, INFO))
    assert await act(client) == {"request_id": "rq", "index": 3}


async def test_action_reply_from_an_async_decide(aiohttp_client: MakeClient) -> None:
    async def decide(r: ActRequest) -> Play:
        await asyncio.sleep(0)
        return Play(cards=("5B",))  # legal, though not the canonical colour

    client = await aiohttp_client(sdk.make_app(decide, INFO))
    assert await act(client) == {"request_id": "rq", "action": {"type": "play", "cards": ["5B"]}}


async def test_info_reply(aiohttp_client: MakeClient) -> None:
    client = await aiohttp_client(sdk.make_app(lambda r: 0, INFO))
    resp = await client.get("/")
    assert decode_bot_info(await resp.read()) == INFO


async def test_decide_raising_falls_back_to_index_0(
    aiohttp_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    def decide(r: ActRequest) -> int:
        raise RuntimeError("bug in the bot")

    client = await aiohttp_client(sdk.make_app(decide, INFO))
    with caplog.at_level(logging.WARNING, logger="sample_bots.sdk"):
        assert await act(client) == {"request_id": "rq", "index": 0}
    record = next(r for r in caplog.records if "decide raised" in r.getMessage())
    assert record.levelno == logging.WARNING
    assert record.exc_info is not None and "bug in the bot" in str(record.exc_info[1])


@pytest.mark.parametrize("bad", [99, -1, None, "pickup", True])
async def test_unusable_decisions_fall_back_to_index_0(
    aiohttp_client: MakeClient, caplog: pytest.LogCaptureFixture, bad: object
) -> None:
    client = await aiohttp_client(sdk.make_app(lambda r: bad, INFO))  # type: ignore[arg-type,return-value]
    with caplog.at_level(logging.WARNING, logger="sample_bots.sdk"):
        assert await act(client) == {"request_id": "rq", "index": 0}
    assert any("neither an Action nor an index" in r.getMessage() for r in caplog.records)


async def test_slow_sync_decide_is_answered_before_the_deadline(aiohttp_client: MakeClient) -> None:
    release = threading.Event()

    def decide(r: ActRequest) -> int:
        release.wait(5)
        return 2

    client = await aiohttp_client(sdk.make_app(decide, INFO))
    t0 = time.perf_counter()
    assert await act(client, deadline_ms=200) == {"request_id": "rq", "index": 0}
    assert time.perf_counter() - t0 < 0.2
    release.set()


async def test_slow_async_decide_is_cancelled(aiohttp_client: MakeClient) -> None:
    cancelled = asyncio.Event()

    async def decide(r: ActRequest) -> int:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 2

    client = await aiohttp_client(sdk.make_app(decide, INFO))
    assert await act(client, deadline_ms=100) == {"request_id": "rq", "index": 0}
    await asyncio.wait_for(cancelled.wait(), 1)


async def test_the_guard_can_be_switched_off(aiohttp_client: MakeClient) -> None:
    def decide(r: ActRequest) -> int:
        time.sleep(0.12)
        return 1

    client = await aiohttp_client(sdk.make_app(decide, INFO, deadline_guard=False))
    assert await act(client, deadline_ms=100) == {"request_id": "rq", "index": 1}


def test_guard_times() -> None:
    assert sdk.deadline_guard_s(1000) == pytest.approx(0.875)
    assert sdk.deadline_guard_s(20) == pytest.approx(0.010)


async def test_hooks_sync_and_async(aiohttp_client: MakeClient) -> None:
    seen: list[object] = []

    async def on_start(start: GameStart) -> None:
        seen.append(start)

    def on_end(end: GameEnd) -> None:
        seen.append(end)

    sc = by_name("ordinary play")
    client = await aiohttp_client(sdk.make_app(lambda r: 0, INFO, on_start=on_start, on_end=on_end))
    assert (await client.post("/start", data=body(sc.start("h1")))).status == 200
    assert (await client.post("/end", data=body(game_end("h1")))).status == 200
    assert seen == [sc.start("h1"), game_end("h1")]


async def test_a_hook_raising_still_gets_200(
    aiohttp_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    def on_start(start: GameStart) -> None:
        raise KeyError("oops")

    client = await aiohttp_client(sdk.make_app(lambda r: 0, INFO, on_start=on_start))
    with caplog.at_level(logging.WARNING, logger="sample_bots.sdk"):
        resp = await client.post("/start", data=body(by_name("ordinary play").start()))
    assert resp.status == 200
    assert any("on_start raised" in r.getMessage() for r in caplog.records)


async def test_a_decide_runs_off_the_event_loop(aiohttp_client: MakeClient) -> None:
    """While a plain decide thinks, GET / still answers at once."""
    started = threading.Event()

    def decide(r: ActRequest) -> int:
        started.set()
        time.sleep(0.3)
        return 0

    client = await aiohttp_client(sdk.make_app(decide, INFO))
    thinking = asyncio.create_task(act(client))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 2)
    t0 = time.perf_counter()
    assert (await client.get("/")).status == 200
    assert time.perf_counter() - t0 < 0.2
    await thinking


async def test_requests_are_logged_at_debug(
    aiohttp_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = await aiohttp_client(sdk.make_app(lambda r: 0, INFO))
    with caplog.at_level(logging.DEBUG, logger="sample_bots.sdk"):
        await client.get("/")
        await act(client)
        await client.post("/act", data=b"{")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(line.startswith("GET / 200") for line in lines)
    assert any(line.startswith("POST /act 200") for line in lines)
    assert any(line.startswith("POST /act 400") for line in lines)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("bad body" in r.getMessage() for r in warnings)


async def test_serves_on_a_unix_socket() -> None:
    app = sdk.make_app(lambda r: 0, INFO)
    runner = web.AppRunner(app)
    await runner.setup()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bot.sock")
        site = web.UnixSite(runner, path)
        await site.start()
        try:
            async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=path)) as session:
                async with session.get("http://bot/") as resp:
                    assert decode_bot_info(await resp.read()).name == "toy"
                async with session.post("http://bot/act", data=body(request())) as resp:
                    assert decode_reply(await resp.read(), "rq").index == 0
        finally:
            await runner.cleanup()


def test_arg_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOT_UNIX", raising=False)
    monkeypatch.delenv("BOT_SECRET", raising=False)
    args = sdk.arg_parser().parse_args(["--port", "8001"])
    assert (args.port, args.host, args.unix, args.log_level) == (8001, "127.0.0.1", None, "INFO")
    args = sdk.arg_parser().parse_args(["--unix", "/tmp/b.sock", "--secret", "s", "--log-level", "debug"])
    assert (args.port, args.unix, args.secret, args.log_level) == (None, "/tmp/b.sock", "s", "DEBUG")
    with pytest.raises(SystemExit):
        sdk.arg_parser().parse_args([])  # a port or a socket is required
    with pytest.raises(SystemExit):
        sdk.arg_parser().parse_args(["--port", "1", "--unix", "/tmp/x"])


def test_secret_and_socket_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_SECRET", "from-env")
    assert sdk.arg_parser().parse_args(["--port", "1"]).secret == "from-env"
    monkeypatch.setenv("BOT_UNIX", "/run/bot/bot.sock")
    args = sdk.arg_parser().parse_args([])  # a container referee sets BOT_UNIX
    assert (args.port, args.unix) == (None, "/run/bot/bot.sock")


async def test_any_action_is_sent_as_is(aiohttp_client: MakeClient) -> None:
    """The SDK does not judge legality (it has no engine): the referee does."""
    client = await aiohttp_client(sdk.make_app(lambda r: Pickup(), INFO))
    assert await act(client) == {"request_id": "rq", "action": {"type": "pickup"}}


def test_seat_memory_keeps_every_seat_of_games_whose_seats_start_and_end_at_once() -> None:
    """The SDK runs plain hooks in worker threads, and the /start, set-up /act
    and /end requests of several seats of one game (entries that share a
    service) arrive together: no seat's state may be lost to another's, nor
    an /end raise for a game another seat's /end just removed."""
    import sys

    memory: sdk.SeatMemory[int] = sdk.SeatMemory(limit=10_000)
    seats, games = 6, 3_000
    barrier = threading.Barrier(seats)
    errors: list[BaseException] = []

    def run(seat: int, step: str) -> None:
        try:
            barrier.wait()
            for g in range(games):
                if step == "put":
                    memory.put(f"g{g}", seat, seat)
                else:
                    memory.end(f"g{g}", seat)
        except BaseException as e:
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for step in ("put", "end"):
            threads = [threading.Thread(target=run, args=(s, step)) for s in range(seats)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if step == "put":
                assert not errors
                lost = [g for g, kept in memory.games.items() if sorted(kept) != list(range(seats))]
                assert len(memory.games) == games and not lost, f"{len(lost)} games lost seats"
    finally:
        sys.setswitchinterval(interval)
    assert not errors and memory.games == {}


def test_seat_memory_forgets_the_oldest_games_past_its_limit() -> None:
    """A game whose /end never comes is not kept forever."""
    memory: sdk.SeatMemory[str] = sdk.SeatMemory(limit=3)
    for g in range(5):
        memory.put(f"g{g}", 0, "a")
        memory.put(f"g{g}", 1, "b")
    assert list(memory.games) == ["g2", "g3", "g4"]
    assert memory.get("g4", 1) == "b" and memory.get("g0", 0) is None
    memory.end("g4", 0)
    memory.end("g4", 1)
    memory.end("g4", 1)  # an /end twice, or for a game already gone, is no error
    memory.end("nope", 0)
    assert list(memory.games) == ["g2", "g3"]
