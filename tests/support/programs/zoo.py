"""A zoo of bots for the match runner's tests: plain aiohttp apps.

``good_app`` is a well-behaved random bot that also checks, as a strict bot
would, that every body it receives decodes with :mod:`protocol`; it keeps the
raw bodies for the tests. ``zoo_app(kind)`` misbehaves on ``POST /act`` in one
way (``KINDS``) and answers everything else properly.

In the tests: ``async with serve(app) as url``. As a process (for the CLI and
command-bot tests): ``python tests/support/programs/zoo.py KIND --port P [--after K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import socket
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from protocol import (
    APIVERSION,
    ActRequest,
    ProtocolError,
    decode_act_request,
    decode_game_end,
    decode_game_start,
    encode,
)

#: This file, to run a zoo bot as a process: ``python SCRIPT KIND --port P``.
SCRIPT = str(Path(__file__).resolve())

KINDS = (
    "good",
    "hang",
    "late",
    "garbage",
    "huge",
    "huge_declared",
    "wrong_id",
    "http500",
    "reset",
    "midreply",
    "illegal",
    "illegal_index",
    "dies",
    "flaky",
    "hangup",
    "stale",
    "pickup_high",
)

#: Raw bodies received, as (path, body).
BODIES = web.AppKey("bodies", list)
#: Problems found while decoding what the referee sent (must stay empty).
PROBLEMS = web.AppKey("problems", list)
#: Request headers received, in order.
HEADERS = web.AppKey("headers", list)
#: Ids of the connections requests came on (keep-alive: few).
CONNECTIONS = web.AppKey("connections", set)
STATE = web.AppKey("state", dict)


@web.middleware
async def _record(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Keep every POST body and check it decodes with protocol/ (as a strict bot would)."""
    if request.method == "POST":
        body = await request.read()  # aiohttp caches it for the handler
        request.app[BODIES].append((request.path, body))
        request.app[HEADERS].append(dict(request.headers))
        decoder = _DECODERS.get(request.path)
        if decoder is not None:
            try:
                decoder(body)
            except ProtocolError as e:
                request.app[PROBLEMS].append(f"{request.path}: {e}")
    if request.transport is not None:
        request.app[CONNECTIONS].add(id(request.transport))
    result: web.StreamResponse = await handler(request)
    return result


_DECODERS: dict[str, Callable[[bytes], object]] = {
    "/start": decode_game_start,
    "/act": decode_act_request,
    "/end": decode_game_end,
}


def recording(app: web.Application) -> web.Application:
    """Make `app` (any bot app, the sample bots' included) keep what it receives."""
    app[BODIES] = []
    app[HEADERS] = []
    app[PROBLEMS] = []
    app[CONNECTIONS] = set()
    app.middlewares.append(_record)
    return app


def _json(payload: dict[str, Any]) -> web.Response:
    return web.Response(body=encode(payload), content_type="application/json")


def _base_app(name: str, start_status: int = 200, end_status: int = 200) -> web.Application:
    app = recording(web.Application())
    app[STATE] = {"acts": 0, "dead": False, "rng": {}, "die": None}

    async def info(request: web.Request) -> web.Response:
        return _json({"apiversion": APIVERSION, "name": name, "author": "zoo", "version": "1"})

    async def start(request: web.Request) -> web.Response:
        return web.Response(status=start_status, body=b"{}", content_type="application/json")

    async def end(request: web.Request) -> web.Response:
        return web.Response(status=end_status, body=b"{}", content_type="application/json")

    app.router.add_get("/", info)
    app.router.add_post("/start", start)
    app.router.add_post("/end", end)
    return app


async def _read_act(request: web.Request) -> ActRequest | None:
    try:
        return decode_act_request(await request.read())
    except ProtocolError:
        return None


def _random_index(app: web.Application, act: ActRequest) -> int:
    rngs = app[STATE]["rng"]
    rng: random.Random = rngs.setdefault(act.game_id, random.Random(f"{act.game_id}/{act.seat}"))
    return rng.randrange(len(act.legal))


def _reset(request: web.Request) -> None:
    """Drop the connection with a TCP RST."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def good_app(name: str = "good", start_status: int = 200, end_status: int = 200) -> web.Application:
    """A random bot that plays by the rules (its /start and /end answer the statuses given)."""
    app = _base_app(name, start_status, end_status)

    async def act(request: web.Request) -> web.Response:
        parsed = await _read_act(request)
        if parsed is None:
            return web.Response(status=400)
        return _json({"request_id": parsed.request_id, "index": _random_index(request.app, parsed)})

    app.router.add_post("/act", act)
    return app


def zoo_app(kind: str, *, after: int = 0, late_s: float = 0.5, name: str | None = None) -> web.Application:
    """A bot that misbehaves on ``/act`` as `kind` says.

    "dies" answers `after` requests well and then dies; "flaky" answers only
    every other request (the others hang); "hangup" closes the connection
    without replying; "stale" does so for every other request only;
    "pickup_high" picks up the pile whenever its top is a 7 or higher, even
    when it could play (RULES 4: it may not): legal in every scripted position
    of the compliance check (the forced pick-up's top is a 7), illegal in
    real games.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown zoo kind {kind!r}")
    if kind == "good":
        return good_app(name or "good")
    app = _base_app(name or kind)

    async def act(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        if state["dead"]:
            _reset(request)
            return web.Response()
        parsed = await _read_act(request)
        if parsed is None:
            return web.Response(status=400)
        state["acts"] += 1
        good = {"request_id": parsed.request_id, "index": _random_index(request.app, parsed)}
        if kind == "hang":
            await asyncio.Event().wait()
        elif kind == "late":
            await asyncio.sleep(late_s)
            return _json(good)
        elif kind == "garbage":
            return web.Response(body=b"this is not json {", content_type="application/json")
        elif kind == "huge_declared":
            return web.Response(body=b" " * (10 << 20), content_type="application/json")
        elif kind == "huge":
            response = web.StreamResponse()
            response.content_type = "application/json"
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(b'{"request_id": "' + parsed.request_id.encode() + b'", "pad": "')
            chunk = b"x" * 65536
            for _ in range(160):  # 10 MB
                await response.write(chunk)
            await response.write(b'", "index": 0}')
            await response.write_eof()
            return response
        elif kind == "wrong_id":
            return _json({"request_id": parsed.request_id + "-old", "index": 0})
        elif kind == "http500":
            return web.Response(status=500, text="Internal Server Error")
        elif kind == "reset":
            _reset(request)
            return web.Response()
        elif kind == "midreply":
            response = web.StreamResponse()
            response.content_type = "application/json"
            response.content_length = 200
            await response.prepare(request)
            await response.write(b'{"request_id": "' + parsed.request_id.encode())
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.close()
            return response
        elif kind == "illegal":
            hand = set(parsed.state.you.hand)
            card = next(f"{r}{c}" for r in range(10, 0, -1) for c in "ROYGBIV" if f"{r}{c}" not in hand)
            return _json({"request_id": parsed.request_id, "action": {"type": "play", "cards": [card]}})
        elif kind == "pickup_high":
            top = parsed.state.pile[-1] if parsed.state.pile else ""
            rank = int(top[: len(top) - len(top.lstrip("0123456789"))] or 0)
            if rank >= 7 and parsed.state.you.hand:
                return _json({"request_id": parsed.request_id, "action": {"type": "pickup"}})
        elif kind == "illegal_index":
            return _json({"request_id": parsed.request_id, "index": len(parsed.legal) + 3})
        elif kind == "dies":
            if state["acts"] > after:
                state["dead"] = True
                _reset(request)
                die = state.get("die")
                if callable(die):
                    die()
                return web.Response()
        elif kind == "hangup" or (kind == "stale" and state["acts"] % 2 == 1):
            # Close the connection without a word ("stale": every other
            # request, as a kept-alive connection the bot just closed).
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        elif kind == "flaky":
            if state["acts"] % 2 == 0:
                await asyncio.Event().wait()
        return _json(good)

    app.router.add_post("/act", act)
    return app


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 (a free port); yields its base URL."""
    runner = web.AppRunner(app, shutdown_timeout=0.1, handler_cancellation=True, access_log=None)
    await runner.setup()
    assert runner.server is not None
    # The listening socket is ours rather than a site's, so that a zoo bot can
    # stop listening from a handler (a site stops from a coroutine, which on
    # some aiohttp versions waits for the connections, that handler's too).
    server = await asyncio.get_running_loop().create_server(runner.server, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]

    def die() -> None:
        server.close()  # stop listening: new connections are refused

    if STATE in app:
        app[STATE]["die"] = die
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="run one zoo bot")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--late-s", type=float, default=0.5)
    parser.add_argument("--name")
    parser.add_argument("--ignore-sigterm", action="store_true", help="(to test SIGKILL)")
    args = parser.parse_args(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    app = zoo_app(args.kind, after=args.after, late_s=args.late_s, name=args.name)
    app[STATE]["die"] = lambda: os._exit(3)
    ready = f"zoo bot {args.kind} listening on http://127.0.0.1:{args.port}"
    web.run_app(
        app,
        host="127.0.0.1",
        port=args.port,
        print=lambda _: print(ready, flush=True),  # once it listens: a test waits for this line
        handle_signals=not args.ignore_sigterm,
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=0.1,
    )


if __name__ == "__main__":
    main()
