"""The bot SDK: write one ``decide`` function, get a protocol-v1 HTTP bot.

A bot author writes::

    from protocol import ActRequest, Action, BotInfo
    from sample_bots.sdk import run_bot

    def decide(request: ActRequest) -> Action | int:
        return 0                      # an index into request.legal, or an Action

    if __name__ == "__main__":
        run_bot(decide, BotInfo(apiversion="1", name="first", author="me"))

and runs ``python mybot.py --port 8001``. ``decide`` may be a plain function or
an ``async def``; the optional hooks ``on_start(GameStart)`` and
``on_end(GameEnd)`` likewise.

What the SDK does for the bot (PROTOCOL.md):

- serves ``GET /`` (the ``BotInfo``), ``POST /start``, ``POST /act`` and
  ``POST /end``;
- decodes every body strictly with :mod:`protocol`'s decoders: a body that
  does not follow the protocol gets ``400 {"error": "<what is wrong>"}``;
- when a secret is set, checks ``X-Referee-Signature`` on every ``POST``: a
  missing or wrong signature gets ``401 {"error": ...}`` (``GET /`` reveals
  only the bot's public identity and is not checked);
- replies ``{"request_id": ..., "index": i}`` when ``decide`` returns an int
  and ``{"request_id": ..., "action": {...}}`` when it returns an Action;
- never lets a bug cost the game: if ``decide`` raises, returns something
  that is neither an Action nor an index into ``legal``, or has not answered
  shortly before the request's ``deadline_ms``, the SDK logs it (WARNING) and
  answers ``index 0`` (a legal action) in time. A hook that raises is logged
  and the request still gets ``200``;
- logs one line per request at DEBUG on the ``sample_bots.sdk`` logger;
- when the referee sets ``BOT_OUTPUT_MARKS`` (a container referee does; see
  docs/protocol.md), prints ``--- <token> act <request_id> <turn>`` before
  ``decide`` runs and ``--- <token> done <request_id>`` after it answered,
  so that what the bot prints meanwhile (``print``, logging, a traceback)
  is shown next to that move in the team's replay, exactly. :func:`run_bot`
  then also sends stderr to stdout and makes stdout line-buffered, so that
  the lines of both keep their order around the marks. Lines printed by
  other threads while ``decide`` runs go to that move too; lines printed
  when several requests are being answered at once, to the latest.

Threads: a plain (non-async) ``decide`` or hook runs in a worker thread, so
the server stays responsive while a search bot thinks. Calls for different
games may run at the same time; calls for one game come one after another
(the referee sends the next request only after the reply) — except that a
``decide`` the deadline guard gave up on may still be running when the next
request of its game arrives. One service may also hold several seats of one
game (league entries that share a bot sit at one table): their ``/start``,
set-up ``/act`` and ``/end`` requests arrive together. Keep state per seat,
keyed by ``game_id`` and ``seat``: :class:`SeatMemory` does it.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import io
import logging
import os
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeAlias, TypeVar

from aiohttp import web

from protocol import (
    HEADER,
    Action,
    ActRequest,
    BotInfo,
    GameEnd,
    GameStart,
    ProtocolError,
    decode_act_request,
    decode_game_end,
    decode_game_start,
    encode,
    verify,
)

__all__ = [
    "OUTPUT_MARKS_ENV",
    "Decide",
    "Decision",
    "EndHook",
    "SeatMemory",
    "StartHook",
    "arg_parser",
    "checked_decision",
    "deadline_guard_s",
    "make_app",
    "output_marks_token",
    "run_bot",
]

#: What ``decide`` returns: an Action, or an index into ``request.legal``.
Decision: TypeAlias = Action | int
#: A bot's decision function, sync or async.
Decide: TypeAlias = Callable[[ActRequest], Decision | Awaitable[Decision]]
#: The optional ``/start`` hook, sync or async.
StartHook: TypeAlias = Callable[[GameStart], None | Awaitable[None]]
#: The optional ``/end`` hook, sync or async.
EndHook: TypeAlias = Callable[[GameEnd], None | Awaitable[None]]

log = logging.getLogger("sample_bots.sdk")

#: Worker threads for plain (non-async) decide functions and hooks.
WORKERS: Final = 4

T = TypeVar("T")

#: The environment variable by which a referee asks for output marks, with their token.
OUTPUT_MARKS_ENV: Final = "BOT_OUTPUT_MARKS"

_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def output_marks_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The token of ``$BOT_OUTPUT_MARKS`` (in `environ`, default the process's);
    None when it is not set (no referee reads marks) or not a token."""
    value = (os.environ if environ is None else environ).get(OUTPUT_MARKS_ENV, "")
    return value if _TOKEN.fullmatch(value) else None


class _OutputMarks:
    """Prints the marks around a request's ``decide``, each one line at once
    on file descriptor 1, after what the bot printed before it."""

    def __init__(self, token: str) -> None:
        self.prefix = f"--- {token} "

    def _write(self, line: str) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        try:
            os.write(1, line.encode())
        except OSError:
            pass

    def act(self, act: ActRequest) -> None:
        self._write(f"{self.prefix}act {act.request_id} {act.turn}\n")

    def done(self, act: ActRequest) -> None:
        self._write(f"{self.prefix}done {act.request_id}\n")


def _join_output() -> None:
    """stderr to stdout, stdout line-buffered: one ordered stream of lines
    (the marks are placed in it)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(1, 2)
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, OSError, ValueError):
        pass


class SeatMemory(Generic[T]):
    """What a bot keeps for each seat of each game, keyed by ``game_id`` and ``seat``.

    One service may hold several seats of one game, and each seat sees the
    game its own way: state kept per game alone would mix them. :meth:`end`
    (call it from ``on_end``) forgets one seat; the game goes with its last
    seat. At most `limit` games are kept, the oldest going first, in case an
    ``/end`` never comes. Safe from the SDK's worker threads, where the
    requests of several seats of one game run at once.
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        #: game_id -> seat -> what is kept.
        self.games: dict[str, dict[int, T]] = {}
        self._lock = threading.Lock()

    def get(self, game_id: str, seat: int) -> T | None:
        """What is kept for `seat` of the game (None: nothing yet)."""
        seats = self.games.get(game_id)
        return seats.get(seat) if seats is not None else None

    def put(self, game_id: str, seat: int, value: T) -> T:
        """Keep `value` for `seat` of the game; returns it."""
        with self._lock:
            games = self.games
            seats = games.get(game_id)
            if seats is None:
                seats = games[game_id] = {}
                while len(games) > self.limit:
                    del games[next(iter(games))]
            seats[seat] = value
        return value

    def end(self, game_id: str, seat: int) -> None:
        """Forget `seat` of the game, and the game once none of its seats is left."""
        with self._lock:
            seats = self.games.get(game_id)
            if seats is None:
                return
            seats.pop(seat, None)
            if not seats:
                del self.games[game_id]


def deadline_guard_s(deadline_ms: int) -> float:
    """Seconds the SDK waits for ``decide`` before answering ``index 0`` itself.

    90% of the deadline less 25 ms for the round trip, but at least half of it:
    875 ms for a 1,000 ms deadline.
    """
    return max(deadline_ms * 0.5, deadline_ms * 0.9 - 25.0) / 1000.0


@dataclass(frozen=True)
class _Bot:
    decide: Decide
    info: BotInfo
    secret: str | None
    on_start: StartHook | None
    on_end: EndHook | None
    guard: bool
    marks: _OutputMarks | None = None


_BOT: Final = web.AppKey("bot", _Bot)
_EXECUTOR: Final = web.AppKey("executor", ThreadPoolExecutor)


def _json(status: int, payload: dict[str, Any]) -> web.Response:
    return web.Response(status=status, body=encode(payload), content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json(status, {"error": message})


def _is_async(fn: Callable[..., object]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return call is not None and inspect.iscoroutinefunction(call)


async def _call(app: web.Application, fn: Callable[[Any], object], arg: object) -> object:
    """Call a sync or async function: async ones in the loop, sync ones in a worker thread."""
    if _is_async(fn):
        result = fn(arg)
    else:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(app[_EXECUTOR], fn, arg)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _body(request: web.Request, bot: _Bot) -> bytes | web.Response:
    """The raw body, or the 401 reply when the signature does not check out."""
    body = await request.read()
    if bot.secret is not None:
        given = request.headers.get(HEADER)
        if given is None:
            log.warning("%s %s refused: no %s header", request.method, request.path, HEADER)
            return _error(401, f"missing {HEADER} header")
        if not verify(bot.secret, body, given):
            log.warning("%s %s refused: bad signature", request.method, request.path)
            return _error(401, f"bad {HEADER}: not the HMAC-SHA256 of the body under this bot's secret")
    return body


def _bad_body(request: web.Request, error: ProtocolError) -> web.Response:
    log.warning("%s %s: bad body: %s", request.method, request.path, error.message)
    return _error(400, error.message)


@web.middleware
async def _log_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    start = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as e:
        log.debug(
            "%s %s %d %.1f ms", request.method, request.path, e.status, (time.perf_counter() - start) * 1000
        )
        raise
    log.debug(
        "%s %s %d %.1f ms",
        request.method,
        request.path,
        response.status,
        (time.perf_counter() - start) * 1000,
    )
    return response


async def _info(request: web.Request) -> web.Response:
    return web.Response(body=encode(request.app[_BOT].info), content_type="application/json")


async def _notice(
    request: web.Request,
    decode: Callable[[bytes], GameStart | GameEnd],
    hook: Callable[[Any], Any] | None,
    name: str,
) -> web.Response:
    """``/start`` and ``/end``: check, decode, call the hook; 200 even when
    the hook raises (the referee ignores the body; a bug costs nothing here)."""
    body = await _body(request, request.app[_BOT])
    if isinstance(body, web.Response):
        return body
    try:
        message = decode(body)
    except ProtocolError as e:
        return _bad_body(request, e)
    if hook is not None:
        try:
            await _call(request.app, hook, message)
        except Exception:
            log.warning("%s raised for game %s", name, message.game_id, exc_info=True)
    return _json(200, {"ok": True})


async def _start(request: web.Request) -> web.Response:
    return await _notice(request, decode_game_start, request.app[_BOT].on_start, "on_start")


async def _end(request: web.Request) -> web.Response:
    return await _notice(request, decode_game_end, request.app[_BOT].on_end, "on_end")


def checked_decision(decision: object, act: ActRequest) -> Decision | None:
    """The decision if it is usable (an Action, or an index into legal), else None."""
    if isinstance(decision, bool):  # bool is an int: refuse True/False as an index
        return None
    if isinstance(decision, int):
        return decision if 0 <= decision < len(act.legal) else None
    if isinstance(decision, Action):
        return decision
    return None


async def _decide(app: web.Application, bot: _Bot, act: ActRequest) -> Decision:
    """Run the bot's decide with the deadline guard; index 0 whenever it fails."""
    where = f"game {act.game_id} request {act.request_id}"
    call = _call(app, bot.decide, act)
    try:
        if bot.guard:
            decision = await asyncio.wait_for(call, deadline_guard_s(act.deadline_ms))
        else:
            decision = await call
    except TimeoutError:
        log.warning(
            "%s: decide did not answer within %.0f ms of a %d ms deadline; answering index 0",
            where,
            deadline_guard_s(act.deadline_ms) * 1000,
            act.deadline_ms,
        )
        return 0
    except Exception:
        log.warning("%s: decide raised; answering index 0", where, exc_info=True)
        return 0
    checked = checked_decision(decision, act)
    if checked is None:
        log.warning(
            "%s: decide returned %r, neither an Action nor an index into legal (0..%d); answering index 0",
            where,
            decision,
            len(act.legal) - 1,
        )
        return 0
    return checked


async def _act(request: web.Request) -> web.Response:
    bot = request.app[_BOT]
    body = await _body(request, bot)
    if isinstance(body, web.Response):
        return body
    try:
        act = decode_act_request(body)
    except ProtocolError as e:
        return _bad_body(request, e)
    if bot.marks is not None:
        bot.marks.act(act)
    try:
        decision = await _decide(request.app, bot, act)
    finally:
        if bot.marks is not None:
            bot.marks.done(act)
    if isinstance(decision, int):
        return _json(200, {"request_id": act.request_id, "index": decision})
    return _json(200, {"request_id": act.request_id, "action": decision})


async def _executor_ctx(app: web.Application) -> AsyncIterator[None]:
    executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="decide")
    app[_EXECUTOR] = executor
    yield
    executor.shutdown(wait=False, cancel_futures=True)


def make_app(
    decide: Decide,
    info: BotInfo,
    secret: str | None = None,
    on_start: StartHook | None = None,
    on_end: EndHook | None = None,
    *,
    deadline_guard: bool = True,
    output_marks: str | None = None,
) -> web.Application:
    """The aiohttp application of a bot (see the module docstring for what it does).

    ``secret``: when given, every ``POST`` must carry a valid
    ``X-Referee-Signature``. ``deadline_guard``: answer ``index 0`` when
    ``decide`` has not answered within :func:`deadline_guard_s` of the
    request's deadline (on by default). ``output_marks``: the token of the
    marks printed around each ``decide`` (default: ``$BOT_OUTPUT_MARKS``,
    :func:`output_marks_token`; ``""``: none).
    """
    token = output_marks_token() if output_marks is None else output_marks or None
    if token is not None and not _TOKEN.fullmatch(token):
        raise ValueError(f"output_marks must be letters, digits, '_' or '-' (1 to 128), not {token!r}")
    app = web.Application(middlewares=[_log_requests])
    app[_BOT] = _Bot(
        decide,
        info,
        secret,
        on_start,
        on_end,
        deadline_guard,
        _OutputMarks(token) if token is not None else None,
    )
    app.cleanup_ctx.append(_executor_ctx)
    app.router.add_get("/", _info)
    app.router.add_post("/start", _start)
    app.router.add_post("/act", _act)
    app.router.add_post("/end", _end)
    return app


def arg_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line every bot takes; add your own options before parsing.

    ``--port PORT`` (or ``--unix PATH``; default: the ``BOT_UNIX`` environment
    variable, which a container referee sets), ``--host H`` (default 127.0.0.1),
    ``--secret S`` (default: the ``BOT_SECRET`` environment variable, which
    keeps it out of the process list), ``--log-level L`` (default INFO).
    """
    parser = argparse.ArgumentParser(description=description)
    unix_env = os.environ.get("BOT_UNIX") or None
    where = parser.add_mutually_exclusive_group(required=unix_env is None)
    where.add_argument("--port", type=int, help="TCP port to listen on")
    where.add_argument(
        "--unix",
        metavar="PATH",
        default=unix_env,
        help="listen on this unix socket instead of TCP (default: $BOT_UNIX)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--secret",
        default=os.environ.get("BOT_SECRET") or None,
        help="check X-Referee-Signature with this secret (default: $BOT_SECRET; none: no check)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO; DEBUG logs every request)",
    )
    return parser


def run_bot(
    decide: Decide,
    info: BotInfo,
    argv: Sequence[str] | None = None,
    *,
    on_start: StartHook | None = None,
    on_end: EndHook | None = None,
    args: argparse.Namespace | None = None,
) -> None:
    """Parse the command line (``argv``, default ``sys.argv[1:]``; or ``args``
    already parsed with :func:`arg_parser`) and serve the bot until interrupted."""
    if args is None:
        args = arg_parser(f"{info.name}: a 3UP 3DOWN bot").parse_args(argv)
    token = output_marks_token()
    if token is not None:
        _join_output()  # logging writes to stderr: now the same ordered stream
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = make_app(
        decide, info, secret=args.secret, on_start=on_start, on_end=on_end, output_marks=token or ""
    )
    unix = args.unix if args.port is None else None  # --port wins over $BOT_UNIX
    where = f"unix:{unix}" if unix else f"http://{args.host}:{args.port}"
    log.info(
        "%s %s listening on %s%s",
        info.name,
        info.version,
        where,
        " (signatures checked)" if args.secret else "",
    )
    if unix:
        web.run_app(app, path=unix, print=None, access_log=None)
    else:
        web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)
