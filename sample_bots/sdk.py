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

It needs msgspec and the standard library alone (issue 35): ``pip install
referee-sdk`` from the service's ``/sdk/`` gives it, with :mod:`protocol`, to
any Python 3.11+, and :func:`run_bot` serves HTTP/1.1 with asyncio
(:func:`serving`). :func:`make_app` gives the same bot as an aiohttp
application, to embed or test, where aiohttp is installed.

What the SDK does for the bot (PROTOCOL.md):

- serves ``GET /`` (the ``BotInfo``), ``POST /start``, ``POST /act`` and
  ``POST /end``; a body over 1 MiB gets ``413``;
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
  when several requests are being answered at once, to the latest;
- :func:`say` prints for one game: each line starts with the game's tag
  (:func:`game_tag`: ``[game <game_id> seat <seat> turn <turn>]``, which the
  service's per-game output goes by) and is written whole; :func:`game_log`
  logs the same way, and the SDK's own warnings about a request carry it.

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
import contextlib
import inspect
import io
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TextIO, TypeAlias, TypeVar

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

if TYPE_CHECKING:  # aiohttp is needed by make_app alone, and imported there
    from aiohttp import web

__all__ = [
    "GAME_ATTR",
    "MAX_BODY",
    "OUTPUT_MARKS_ENV",
    "Decide",
    "Decision",
    "EndHook",
    "GameLogFormatter",
    "SeatMemory",
    "StartHook",
    "arg_parser",
    "checked_decision",
    "deadline_guard_s",
    "game_log",
    "game_tag",
    "make_app",
    "output_marks_token",
    "run_bot",
    "say",
    "serving",
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


#: Held while a whole line (or a message's lines) is written: :func:`say`,
#: the log of :func:`run_bot` and the output marks never cut into each other.
_PRINT_LOCK: Final = threading.RLock()

#: The log record attribute that names a record's game (:func:`game_log`).
GAME_ATTR: Final = "game"


def game_tag(message: ActRequest | GameStart | GameEnd) -> str:
    """``[game <game_id> seat <seat> turn <turn>]`` (no turn for ``/start`` and
    ``/end``): what starts each line :func:`say` and :func:`game_log` write, so
    that the service's diagnostics give the line to its game (a line naming a
    game's id goes to that game) whatever else runs at the same time."""
    turn = f" turn {message.turn}" if isinstance(message, ActRequest) else ""
    return f"[game {message.game_id} seat {message.seat}{turn}]"


def say(
    message: ActRequest | GameStart | GameEnd, *values: object, sep: str = " ", file: TextIO | None = None
) -> None:
    """``print`` for one game: every line of the text starts with
    :func:`game_tag` and all of them are written at once, flushed, never cut
    by another thread's :func:`say`, log line or output mark. A bot that plays
    several games at once (threads: see the module's docstring) prints with
    this; a plain ``print`` writes its values, separators and newline one by
    one, and two threads' prints can share a line."""
    text = sep.join(str(v) for v in values)
    tag = game_tag(message)
    out = "".join(f"{tag} {line}\n" for line in text.splitlines() or [""])
    stream = sys.stdout if file is None else file
    with _PRINT_LOCK:
        stream.write(out)
        stream.flush()


def game_log(
    message: ActRequest | GameStart | GameEnd, logger: logging.Logger | None = None
) -> logging.LoggerAdapter[logging.Logger]:
    """A logger for one game (default: the ``bot`` logger): under
    :func:`run_bot`'s logging (:class:`GameLogFormatter`) each line of its
    records, a traceback's included, starts with :func:`game_tag`."""
    return logging.LoggerAdapter(logger or logging.getLogger("bot"), {GAME_ATTR: game_tag(message)})


class GameLogFormatter(logging.Formatter):
    """A formatter that starts every line of a record that names its game
    (the :data:`GAME_ATTR` attribute: :func:`game_log`, and the SDK's own
    warnings about a request) with that game's tag."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        tag = getattr(record, GAME_ATTR, None)
        if not isinstance(tag, str):
            return text
        return "\n".join(f"{tag} {line}" for line in text.splitlines())


class _WholeLines(logging.StreamHandler[TextIO]):
    """Writes each record whole, under the lock :func:`say` holds."""

    def emit(self, record: logging.LogRecord) -> None:
        with _PRINT_LOCK:
            super().emit(record)


class _OutputMarks:
    """Prints the marks around a request's ``decide``, each one line at once
    on file descriptor 1, after what the bot printed before it."""

    def __init__(self, token: str) -> None:
        self.prefix = f"--- {token} "

    def _write(self, line: str) -> None:
        with _PRINT_LOCK:  # never inside a line of say's or the log's
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


def _bot(
    decide: Decide,
    info: BotInfo,
    secret: str | None,
    on_start: StartHook | None,
    on_end: EndHook | None,
    deadline_guard: bool,
    output_marks: str | None,
) -> _Bot:
    token = output_marks_token() if output_marks is None else output_marks or None
    if token is not None and not _TOKEN.fullmatch(token):
        raise ValueError(f"output_marks must be letters, digits, '_' or '-' (1 to 128), not {token!r}")
    marks = _OutputMarks(token) if token is not None else None
    return _Bot(decide, info, secret, on_start, on_end, deadline_guard, marks)


def _error(status: int, message: str) -> tuple[int, bytes]:
    return status, encode({"error": message})


def _is_async(fn: Callable[..., object]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def checked_decision(decision: object, act: ActRequest) -> Decision | None:
    """The decision if it is usable (an Action, or an index into legal), else None."""
    if isinstance(decision, bool):  # bool is an int: refuse True/False as an index
        return None
    if isinstance(decision, int):
        return decision if 0 <= decision < len(act.legal) else None
    if isinstance(decision, Action):
        return decision
    return None


class _Core:
    """The protocol side of a bot, without HTTP: what each request gets.

    Both ways of serving a bot use it: :func:`serving` (what :func:`run_bot`
    runs, the standard library's asyncio) and :func:`make_app` (an aiohttp
    application, to embed or test)."""

    def __init__(self, bot: _Bot) -> None:
        self.bot = bot
        self._executor: ThreadPoolExecutor | None = None

    def open(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="decide")

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def respond(self, method: str, path: str, signature: str | None, body: bytes) -> tuple[int, bytes]:
        """The status and JSON body that answer one request; logged at DEBUG."""
        start = time.perf_counter()
        status, reply = await self._route(method, path, signature, body)
        log.debug("%s %s %d %.1f ms", method, path, status, (time.perf_counter() - start) * 1000)
        return status, reply

    async def _route(self, method: str, path: str, signature: str | None, body: bytes) -> tuple[int, bytes]:
        if path == "/":
            if method in ("GET", "HEAD"):
                return 200, encode(self.bot.info)
            return _error(405, f"{method} / is not served: GET / gives the bot's identity")
        if path not in ("/start", "/act", "/end"):
            return _error(404, f"no {path}: a bot serves GET /, POST /start, POST /act and POST /end")
        if method != "POST":
            return _error(405, f"{method} {path} is not served: use POST")
        bot = self.bot
        if bot.secret is not None:
            if signature is None:
                log.warning("%s %s refused: no %s header", method, path, HEADER)
                return _error(401, f"missing {HEADER} header")
            if not verify(bot.secret, body, signature):
                log.warning("%s %s refused: bad signature", method, path)
                return _error(401, f"bad {HEADER}: not the HMAC-SHA256 of the body under this bot's secret")
        try:
            if path == "/act":
                return await self._act(decode_act_request(body))
            if path == "/start":
                return await self._notice(decode_game_start(body), bot.on_start, "on_start")
            return await self._notice(decode_game_end(body), bot.on_end, "on_end")
        except ProtocolError as e:
            log.warning("%s %s: bad body: %s", method, path, e.message)
            return _error(400, e.message)

    async def _call(self, fn: Callable[[Any], object], arg: object) -> object:
        """Call a sync or async function: async ones in the loop, sync ones in a worker thread."""
        if _is_async(fn):
            result = fn(arg)
        else:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, fn, arg)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _notice(
        self, message: GameStart | GameEnd, hook: Callable[[Any], Any] | None, name: str
    ) -> tuple[int, bytes]:
        """``/start`` and ``/end``: call the hook; 200 even when it raises
        (the referee ignores the body; a bug costs nothing here)."""
        if hook is not None:
            try:
                await self._call(hook, message)
            except Exception:
                log.warning("%s raised", name, exc_info=True, extra={GAME_ATTR: game_tag(message)})
        return 200, encode({"ok": True})

    async def _act(self, act: ActRequest) -> tuple[int, bytes]:
        marks = self.bot.marks
        if marks is not None:
            marks.act(act)
        try:
            decision = await self._decide(act)
        finally:
            if marks is not None:
                marks.done(act)
        if isinstance(decision, int):
            return 200, encode({"request_id": act.request_id, "index": decision})
        return 200, encode({"request_id": act.request_id, "action": decision})

    async def _decide(self, act: ActRequest) -> Decision:
        """Run the bot's decide with the deadline guard; index 0 whenever it fails."""
        bot = self.bot
        where = f"game {act.game_id} request {act.request_id}"
        tagged = {GAME_ATTR: game_tag(act)}
        call = self._call(bot.decide, act)
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
                extra=tagged,
            )
            return 0
        except Exception:
            log.warning("%s: decide raised; answering index 0", where, exc_info=True, extra=tagged)
            return 0
        checked = checked_decision(decision, act)
        if checked is None:
            log.warning(
                "%s: decide returned %r, neither an Action nor an index into legal (0..%d); answering index 0",
                where,
                decision,
                len(act.legal) - 1,
                extra=tagged,
            )
            return 0
        return checked


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
    """The bot as an aiohttp application, to embed or test (needs aiohttp,
    which the SDK itself does not: :func:`run_bot` serves with the standard
    library). Answers exactly as :func:`serving` does.

    ``secret``: when given, every ``POST`` must carry a valid
    ``X-Referee-Signature``. ``deadline_guard``: answer ``index 0`` when
    ``decide`` has not answered within :func:`deadline_guard_s` of the
    request's deadline (on by default). ``output_marks``: the token of the
    marks printed around each ``decide`` (default: ``$BOT_OUTPUT_MARKS``,
    :func:`output_marks_token`; ``""``: none).
    """
    from aiohttp import web

    core = _Core(_bot(decide, info, secret, on_start, on_end, deadline_guard, output_marks))

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        status, reply = await core.respond(request.method, request.path, request.headers.get(HEADER), body)
        return web.Response(status=status, body=reply, content_type="application/json")

    async def executor(app: web.Application) -> AsyncIterator[None]:
        core.open()
        yield
        core.close()

    app = web.Application(client_max_size=MAX_BODY)
    app.cleanup_ctx.append(executor)
    app.router.add_route("*", "/{path:.*}", handle)
    return app


#: The largest request body served (aiohttp's default too); a larger one gets 413.
MAX_BODY: Final = 1024 * 1024
#: The largest request line and headers; larger gets 431.
MAX_HEAD: Final = 64 * 1024

_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        size = 0
        while True:
            line = await reader.readline()
            try:
                n = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadRequest(400, "bad chunked body: a chunk size is not hexadecimal") from None
            if n == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            size += n
            if size > MAX_BODY:
                raise _BadRequest(413, f"body over {MAX_BODY} bytes")
            chunks.append(await reader.readexactly(n))
            await reader.readexactly(2)
    length = headers.get("content-length", "0").strip()
    if not length.isdigit():
        raise _BadRequest(400, f"bad Content-Length {length!r}")
    if int(length) > MAX_BODY:
        raise _BadRequest(413, f"body of {length} bytes: over {MAX_BODY}")
    return await reader.readexactly(int(length))


async def _write(writer: asyncio.StreamWriter, status: int, reply: bytes, close: bool, head: bool) -> None:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(reply)}",
    ]
    if close:
        lines.append("Connection: close")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (b"" if head else reply))
    await writer.drain()


async def _connection(core: _Core, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One HTTP/1.1 connection: its requests one after another (keep-alive)."""
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                await _write(writer, *_error(431, f"request head over {MAX_HEAD} bytes"), True, False)
                return
            lines = head[:-4].decode("latin-1").split("\r\n")
            request_line = lines[0].split(" ")
            if len(request_line) != 3 or not request_line[2].startswith("HTTP/1."):
                await _write(writer, *_error(400, "bad request line"), True, False)
                return
            method, target, version = request_line
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            connection = headers.get("connection", "").lower()
            close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
            try:
                body = await _read_body(reader, headers)
            except _BadRequest as e:
                await _write(writer, *_error(e.status, e.message), True, False)
                return
            path = target.split("?", 1)[0]
            status, reply = await core.respond(method, path, headers.get(HEADER.lower()), body)
            await _write(writer, status, reply, close, method == "HEAD")
            if close:
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client went away
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


@contextlib.asynccontextmanager
async def serving(
    decide: Decide,
    info: BotInfo,
    *,
    port: int | None = None,
    unix: str | None = None,
    host: str = "127.0.0.1",
    secret: str | None = None,
    on_start: StartHook | None = None,
    on_end: EndHook | None = None,
    deadline_guard: bool = True,
    output_marks: str | None = None,
) -> AsyncIterator[str]:
    """Serve the bot (HTTP/1.1, the standard library's asyncio) while the
    block runs, on TCP `host`:`port` (0: any free port) or on the unix socket
    `unix`; yields where: ``http://HOST:PORT`` or ``unix:PATH``. The other
    arguments are :func:`make_app`'s."""
    core = _Core(_bot(decide, info, secret, on_start, on_end, deadline_guard, output_marks))

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connection(core, reader, writer)

    core.open()
    try:
        if unix:
            server = await asyncio.start_unix_server(connection, path=unix, limit=MAX_HEAD)
            where = f"unix:{unix}"
        else:
            server = await asyncio.start_server(connection, host, port or 0, limit=MAX_HEAD)
            bound = server.sockets[0].getsockname()
            where = f"http://{host}:{bound[1]}"
        async with server:
            yield where
    finally:
        core.close()


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
    handler = _WholeLines()
    handler.setFormatter(GameLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    unix = args.unix if args.port is None else None  # --port wins over $BOT_UNIX
    try:
        asyncio.run(_serve_until_stopped(decide, info, args, unix, on_start, on_end, token or ""))
    except KeyboardInterrupt:
        pass


async def _serve_until_stopped(
    decide: Decide,
    info: BotInfo,
    args: argparse.Namespace,
    unix: str | None,
    on_start: StartHook | None,
    on_end: EndHook | None,
    token: str,
) -> None:
    """Serve until SIGINT or SIGTERM (``docker stop``), then return."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    async with serving(
        decide,
        info,
        port=args.port,
        unix=unix,
        host=args.host,
        secret=args.secret,
        on_start=on_start,
        on_end=on_end,
        output_marks=token,
    ) as where:
        log.info(
            "%s %s listening on %s%s",
            info.name,
            info.version,
            where,
            " (signatures checked)" if args.secret else "",
        )
        await stop.wait()
