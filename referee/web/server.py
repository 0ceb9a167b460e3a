"""The service's HTTP server: aiohttp's, guarded against slow clients (issue 24, item 5).

aiohttp reads a request's headers and body as slowly as a client sends them
and keeps every connection it accepts: 1,100 connections sending a byte every
10 s took every file descriptor of a service under ``ulimit -n 1024``, a plain
``GET /`` timed out, and asyncio's accept loop logged its "Too many open
files" traceback thousands of times a second. :func:`run` serves the app with
a :class:`Guard` (the options of ``referee serve``, :class:`Limits`):

- a connection sends its request line and headers within
  ``header_timeout_s`` (from when it opens, or on a kept-alive connection from
  the next request's first byte), else it is answered 408 and closed;
- a request body arrives at ``min_body_rate`` bytes a second at least,
  measured over each ``body_timeout_s`` (a rate, not a time: a 1 GiB upload
  at any honest speed passes; while the service is not reading, because its
  buffer is full, the client is not timed), else the connection is cut;
- an idle kept-alive connection is closed after ``idle_timeout_s``;
- a client address (IPv4; IPv6 by /64, what one host is given) has at most
  ``max_per_client`` connections open, and the server ``max_connections`` in
  all: by default the open-file limit less :data:`FD_RESERVE` for the
  service's own files (the database, Docker, the bots' sockets, replays) and
  room for what asyncio accepts at once (:data:`BACKLOG`), so ``accept()``
  never runs out (512 under ``ulimit -n 1024``). At a cap, the oldest connection that is waiting
  for a request (idle, or its headers still arriving) is closed to make room;
  when none is, the new connection is answered at once, before a byte of it
  is read, 429 (the client's share) or 503 (the server's), and closed.
  Reverse proxies of ``--trusted-proxies`` are exempt from the per-client cap
  (every client behind one shares its address: the proxy limits its clients);
  the cap in all and the timeouts hold for them too.

What the server sends is not timed: a live page's event stream
(:mod:`referee.web.live`) stays open as long as it is read.

:func:`raise_file_limit` raises the soft limit of open files to the hard one
at start; :class:`RepeatFilter` lets the first few of the same log line (same
logger, level and template) through per interval and says how many more there
were, so no flood of one error fills the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_runner import GracefulExit
from aiohttp.web_server import Server

from ..bots.netpolicy import IPNetwork, within

log = logging.getLogger("referee.web.server")

#: File descriptors kept free for the service's own use when the cap on
#: connections in all is derived from the open-file limit.
FD_RESERVE = 256
#: The listening socket's backlog; asyncio accepts up to this many at each
#: turn of the loop before the first of them is counted (and closed when over
#: a cap), so twice this is kept free too: ``accept()`` never runs out of files.
BACKLOG = 128


class Limits(msgspec.Struct, kw_only=True, frozen=True):
    """What a client may hold of the server (``referee serve``'s options)."""

    #: Seconds a connection has to send its request line and headers.
    header_timeout_s: float = 10.0
    #: A request body must arrive at ``min_body_rate`` bytes a second at
    #: least over each stretch of this many seconds.
    body_timeout_s: float = 10.0
    min_body_rate: int = 1024
    #: Seconds an idle kept-alive connection stays open.
    idle_timeout_s: float = 30.0
    #: Connections open at once from one client address (IPv6: one /64).
    max_per_client: int = 64
    #: Connections open at once in all; 0: the open-file limit less :data:`FD_RESERVE`.
    max_connections: int = 0
    #: Reverse proxies, exempt from ``max_per_client``.
    trusted_proxies: tuple[IPNetwork, ...] = ()


def client_key(host: str) -> str:
    """What the per-client cap counts by: an IPv4 address (an IPv4-mapped
    IPv6 address is its IPv4 one), or an IPv6 address's /64 (a host is given
    a /64: it can use any address in it)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def default_max_connections(soft_limit: int) -> int:
    """The cap on connections in all for a soft open-file limit (512 for 1024)."""
    return max(16, soft_limit - FD_RESERVE - 2 * BACKLOG)


def raise_file_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open files to its hard limit:
    (soft before, soft now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY or target > 1 << 20:
        target = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft


def _answer(status: int, reason: str, message: str, retry_after: int | None = None) -> bytes:
    """A whole HTTP answer that closes the connection, written before or
    instead of aiohttp's (the connection is not handed to a handler)."""
    body = (message + "\n").encode()
    retry = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n{retry}Connection: close\r\n\r\n"
    ).encode() + body


class GuardedHandler(RequestHandler):
    """aiohttp's protocol of one connection, with the :class:`Guard`'s
    accounting: when it waits for a request, since when its headers are
    arriving, how fast its body arrives."""

    __slots__ = (
        "_guard",
        "client",
        "host",
        "admitted",
        "cut",
        "waiting_since",
        "head_since",
        "request",
        "received",
        "window_start",
        "window_received",
    )

    def __init__(self, manager: GuardedServer, *, loop: asyncio.AbstractEventLoop, **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self._guard = manager.guard
        self.client = "unknown"
        self.host = "unknown"
        self.admitted = False
        #: Why the guard closed the connection (its errors are then not logged).
        self.cut: str | None = None
        #: Loop time it began waiting for a request; None while one is handled.
        self.waiting_since: float | None = None
        #: Loop time the request line and headers it waits for began (None: idle).
        self.head_since: float | None = None
        #: Bytes received while a request is handled, and at the start of the body's window.
        #: The request taken up, until its answer is sent.
        self.request: web.BaseRequest | None = None
        self.received = 0
        self.window_start = 0.0
        self.window_received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        refusal = self._guard.admit(self, transport)
        if refusal is not None:
            # Never handed to aiohttp: nothing is read, nothing is parsed.
            self._manager = None
            self._force_close = True
            with contextlib.suppress(Exception):
                transport.write(refusal)  # type: ignore[attr-defined]
            transport.close()
            return
        super().connection_made(transport)
        now = self._loop.time()
        self.head_since = now
        self._guard.wait(self, now)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._guard.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.waiting_since is not None and self.head_since is None:
            # The first byte of the next request on a kept-alive connection.
            self.head_since = self._loop.time()
        self.received += len(data)
        super().data_received(data)

    def began(self, request: web.BaseRequest) -> None:
        """A request is taken up (its request line and headers are in): its body is timed now."""
        self.request = request
        if self.cut is not None:
            # Closed by the guard with this request already in: its handler's reads fail as a client gone.
            request.content.set_exception(
                ConnectionResetError(f"the server closed the connection: {self.cut}")
            )
        self._guard.busy(self)
        self.head_since = None
        self.window_start, self.window_received = self._loop.time(), self.received

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self.request = None
            if self.admitted and self.transport is not None:
                self._guard.wait(self, self._loop.time())

    def log_exception(self, *args: Any, **kw: Any) -> None:
        if self.cut is None:
            super().log_exception(*args, **kw)

    def waiting_for_headers(self) -> bool:
        return self.waiting_since is not None and not self._messages

    def body_pending(self) -> bool:
        return self.request is not None and not self.request.content.is_eof()

    def reading_paused(self) -> bool:
        return self._reading_paused

    def close_for(self, reason: str, answer: bytes | None = None) -> None:
        """Close the connection: the guard's reason (an answer sent first when given)."""
        self.cut = reason
        request = self.request
        if request is not None:
            # What its handler reads next fails as a client gone does (not "Connection closed." as a bug would).
            request.content.set_exception(ConnectionResetError(f"the server closed the connection: {reason}"))
        transport = self.transport
        if answer is not None and transport is not None and not transport.is_closing():
            with contextlib.suppress(Exception):
                transport.write(answer)
        self.force_close()


class Guard:
    """The connections of one server, and the caps and timeouts on them."""

    def __init__(self, limits: Limits, max_connections: int) -> None:
        self.limits = limits
        self.max_connections = max_connections
        #: Every connection admitted and open.
        self.open: dict[GuardedHandler, None] = {}
        #: Those of each client (:func:`client_key`).
        self.clients: dict[str, dict[GuardedHandler, None]] = {}
        #: Those waiting for a request, the longest waiting first.
        self.waiting: dict[GuardedHandler, None] = {}
        #: What the guard did, by kind (refused-client, refused-server, evicted, header-timeout, body-slow).
        self.counts: Counter[str] = Counter()
        self._ticker: asyncio.TimerHandle | None = None
        #: Connections whose body arrived under the rate at the last look, the slowest last.
        self._slow: list[GuardedHandler] = []
        self._ranked_at = -1.0

    # -- admission -------------------------------------------------------
    def admit(self, conn: GuardedHandler, transport: asyncio.BaseTransport) -> bytes | None:
        """Count a new connection in, making room at a cap if some connection
        is only waiting; else the answer that refuses it."""
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, (tuple, list)) and peer else "unknown"
        conn.host, conn.client = host, client_key(host)
        limits = self.limits
        if not (limits.trusted_proxies and within(host, limits.trusted_proxies)):
            mine = self.clients.get(conn.client, {})
            if len(mine) >= limits.max_per_client:
                victim = self._oldest_waiting(mine)
                if victim is None:
                    self.counts["refused-client"] += 1
                    log.warning(
                        "refused a connection from %s: it has %d open, the most a client may",
                        host,
                        limits.max_per_client,
                    )
                    return _answer(
                        429,
                        "Too Many Requests",
                        f"too many connections from {host}: at most {limits.max_per_client} at a time "
                        "(close some, or wait for them to finish)",
                        retry_after=10,
                    )
                self._evict(victim)
        if len(self.open) >= self.max_connections:
            victim = self._oldest_waiting(self.waiting) or self._slowest_body()
            if victim is None:
                self.counts["refused-server"] += 1
                log.warning(
                    "refused a connection from %s: the server has %d open, its limit",
                    host,
                    self.max_connections,
                )
                return _answer(
                    503,
                    "Service Unavailable",
                    f"the server has {self.max_connections} connections open, its limit: try again later",
                    retry_after=10,
                )
            self._evict(victim)
        conn.admitted = True
        self.open[conn] = None
        self.clients.setdefault(conn.client, {})[conn] = None
        self._start_ticker()
        return None

    def _oldest_waiting(self, conns: dict[GuardedHandler, None]) -> GuardedHandler | None:
        """Of `conns`, the one waiting for a request the longest (not one whose
        request is in, about to be taken up)."""
        if conns is self.waiting:  # in the order they began to wait
            return next((c for c in conns if c.waiting_for_headers()), None)
        best: GuardedHandler | None = None
        for c in conns:
            if (
                c.waiting_for_headers()
                and c.waiting_since is not None
                and (best is None or best.waiting_since is None or c.waiting_since < best.waiting_since)
            ):
                best = c
        return best

    def _slowest_body(self) -> GuardedHandler | None:
        """The connection whose body arrives the slowest, under the rate
        required, at the last look (:meth:`check`)."""
        now = asyncio.get_running_loop().time()
        for _ in range(2):
            while self._slow:
                conn = self._slow.pop()
                if conn.admitted and conn.waiting_since is None and conn.body_pending():
                    return conn
            if now - self._ranked_at < 0.05:
                break
            self._slow = self._rank_slow(now)
        return None

    def _rank_slow(self, now: float) -> list[GuardedHandler]:
        """The connections whose body arrives under the rate required (over
        a quarter of a second at least), the slowest last."""
        self._ranked_at = now
        slow: list[tuple[float, GuardedHandler]] = []
        for conn in self.open:
            if conn.waiting_since is not None or conn.reading_paused() or not conn.body_pending():
                continue
            elapsed = now - conn.window_start
            got = conn.received - conn.window_received
            if elapsed >= 0.25 and got < self.limits.min_body_rate * elapsed:
                slow.append((got / elapsed, conn))
        slow.sort(key=lambda rated: rated[0], reverse=True)
        return [conn for _, conn in slow]

    def _evict(self, victim: GuardedHandler) -> None:
        """Close `victim` (waiting for a request, or sending its body too
        slowly) to make room for a new connection."""
        self.counts["evicted"] += 1
        waiting = victim.waiting_since is not None
        log.warning(
            "closed a connection from %s to make room for a new one (%s)",
            victim.host,
            "it was waiting for a request" if waiting else "its request body arrived too slowly",
        )
        partial = not waiting or victim.head_since is not None
        self.release(victim)
        victim.close_for(
            "evicted",
            _answer(408, "Request Timeout", "the server needs this connection: send the request again")
            if partial
            else None,
        )

    def release(self, conn: GuardedHandler) -> None:
        if not conn.admitted:
            return
        conn.admitted = False
        self.open.pop(conn, None)
        self.waiting.pop(conn, None)
        mine = self.clients.get(conn.client)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.clients[conn.client]
        if not self.open:
            self.stop()

    # -- states ----------------------------------------------------------
    def wait(self, conn: GuardedHandler, now: float) -> None:
        """`conn` waits for a request (it opened, or answered one)."""
        if not conn.admitted:
            return
        conn.waiting_since = now
        self.waiting.pop(conn, None)
        self.waiting[conn] = None

    def busy(self, conn: GuardedHandler) -> None:
        """`conn` has a request's headers: it is handled."""
        conn.waiting_since = None
        self.waiting.pop(conn, None)

    # -- the timeouts ----------------------------------------------------
    def _start_ticker(self) -> None:
        if self._ticker is None:
            loop = asyncio.get_running_loop()
            self._ticker = loop.call_later(self.tick_s, self._tick)

    @property
    def tick_s(self) -> float:
        limits = self.limits
        return max(0.05, min(1.0, limits.header_timeout_s / 4, limits.body_timeout_s / 4))

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    def _tick(self) -> None:
        self._ticker = None
        try:
            self.check(asyncio.get_running_loop().time())
        finally:
            if self.open:
                self._start_ticker()

    def check(self, now: float) -> None:
        """Close the connections past a timeout."""
        limits = self.limits
        for conn in list(self.waiting):
            if (
                conn.head_since is not None
                and conn.waiting_for_headers()
                and now - conn.head_since > limits.header_timeout_s
            ):
                self.counts["header-timeout"] += 1
                log.warning(
                    "closed a connection from %s: its request line and headers took over %g s",
                    conn.host,
                    limits.header_timeout_s,
                )
                self.release(conn)
                conn.close_for(
                    "header timeout",
                    _answer(
                        408,
                        "Request Timeout",
                        f"the request line and headers must arrive within {limits.header_timeout_s:g} s",
                    ),
                )
        for conn in list(self.open):
            if conn.waiting_since is not None or not conn.body_pending():
                continue
            if conn.reading_paused():
                # The service is not reading (its buffer is full): not the client's time.
                conn.window_start, conn.window_received = now, conn.received
                continue
            elapsed = now - conn.window_start
            if elapsed < limits.body_timeout_s:
                continue
            got = conn.received - conn.window_received
            if got < limits.min_body_rate * elapsed:
                self.counts["body-slow"] += 1
                log.warning(
                    "cut a request from %s: its body arrived at %.0f bytes a second, under the "
                    "%d a second the server requires",
                    conn.host,
                    got / elapsed,
                    limits.min_body_rate,
                )
                self.release(conn)
                conn.close_for(
                    "body too slow",
                    _answer(
                        408,
                        "Request Timeout",
                        f"the request body must arrive at {limits.min_body_rate} bytes a second at least",
                    ),
                )
            else:
                conn.window_start, conn.window_received = now, conn.received
        self._slow = self._rank_slow(now)


class GuardedServer(Server):
    """aiohttp's server of an app, whose connections are :class:`GuardedHandler`."""

    def __init__(self, handler: Any, *, guard: Guard, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.guard = guard
        plain = self.request_factory

        def factory(
            message: Any, payload: Any, protocol: RequestHandler, writer: Any, task: Any
        ) -> web.BaseRequest:
            # Each request the connection takes up, as it takes it up: it is handled now.
            request = plain(message, payload, protocol, writer, task)
            if isinstance(protocol, GuardedHandler):
                protocol.began(request)
            return request

        self.request_factory = factory

    def __call__(self) -> RequestHandler:
        return GuardedHandler(self, loop=self._loop, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` serving with a :class:`Guard`."""

    def __init__(self, app: web.Application, *, guard: Guard, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.guard = guard

    async def _make_server(self) -> Server:
        plain = await super()._make_server()
        return GuardedServer(
            plain.request_handler,
            guard=self.guard,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=asyncio.get_running_loop(),
            **plain._kwargs,
        )

    async def cleanup(self) -> None:
        self.guard.stop()
        await super().cleanup()


def make_runner(
    app: web.Application, limits: Limits, *, max_connections: int | None = None, **kwargs: Any
) -> GuardedRunner:
    """A runner of `app` guarded by `limits` (the cap in all from the open-file limit when 0)."""
    if max_connections is None:
        max_connections = limits.max_connections or default_max_connections(
            resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        )
    kwargs.setdefault("access_log", None)
    return GuardedRunner(
        app, guard=Guard(limits, max_connections), keepalive_timeout=limits.idle_timeout_s, **kwargs
    )


# -- the log -------------------------------------------------------------------
#: Where the records of templates past ``max_keys`` are counted.
_OTHER = ("", logging.WARNING, "(other messages)")


class RepeatFilter(logging.Filter):
    """At most ``burst`` records of the same logger, level and template
    (``record.msg``, before its arguments) per ``interval_s``, and at most
    ``total`` of all kinds: the rest are counted, and the next record let
    through of the same kind (or :meth:`flush`, once its window is over)
    says how many were suppressed. A filter of the log's handler, so it
    holds for every logger: aiohttp's, asyncio's, the service's."""

    def __init__(
        self,
        burst: int = 5,
        interval_s: float = 60.0,
        total: int = 200,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1024,
    ) -> None:
        super().__init__()
        self.burst, self.interval_s, self.total, self.max_keys = burst, interval_s, total, max_keys
        self.clock = clock
        #: (logger, level, template) -> [window start, let through, suppressed]
        self._seen: dict[tuple[str, int, str], list[float]] = {}
        self._window_start = clock()
        self._passed = 0
        # Records come from the loop's thread and the runs' and database's threads.
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "repeat_summary", False):
            return True
        with self._lock:
            now = self.clock()
            if now - self._window_start >= self.interval_s:
                self._window_start, self._passed = now, 0
            key = (record.name, record.levelno, str(record.msg))
            if key not in self._seen and len(self._seen) >= self.max_keys:
                self._forget(now)
                if len(self._seen) >= self.max_keys:
                    key = _OTHER
            seen = self._seen.get(key)
            before = 0
            if seen is None or now - seen[0] >= self.interval_s:
                before = int(seen[2]) if seen is not None else 0
                seen = self._seen[key] = [now, 0, 0]
            if seen[1] >= self.burst or self._passed >= self.total:
                seen[2] += before + 1
                return False
            seen[1] += 1
            self._passed += 1
        if before:
            record.msg = f"{record.msg} [and {before} similar messages suppressed before this one]"
        return True

    def _forget(self, now: float) -> None:
        for key in [k for k, v in self._seen.items() if now - v[0] >= self.interval_s and not v[2]]:
            del self._seen[key]

    def flush(self) -> list[tuple[str, int, str, int]]:
        """Log, and forget, the counts of records suppressed in windows now
        over: [(logger, level, template, how many)]."""
        said: list[tuple[str, int, str, int]] = []
        with self._lock:
            now = self.clock()
            for key, seen in list(self._seen.items()):
                if now - seen[0] >= self.interval_s:
                    if seen[2]:
                        said.append((*key, int(seen[2])))
                    del self._seen[key]
        for name, level, template, n in said:
            logging.getLogger(name or None).log(
                level,
                "%d similar messages suppressed in %g s: %s",
                n,
                self.interval_s,
                template,
                extra={"repeat_summary": True},
            )
        return said


def setup_logging(stream: Any = None) -> RepeatFilter | None:
    """The service's log on stderr (warnings and worse, with the time and the
    logger) through a :class:`RepeatFilter`, returned to flush; None (and
    nothing done) when the log already has a handler (a test's)."""
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    repeat = RepeatFilter()
    handler.addFilter(repeat)
    root.addHandler(handler)
    return repeat


async def _flush_every(repeat: RepeatFilter) -> None:
    while True:
        await asyncio.sleep(max(1.0, repeat.interval_s / 4))
        repeat.flush()


# -- serving -------------------------------------------------------------------
async def _serve(
    app: web.Application,
    host: str,
    port: int,
    limits: Limits,
    repeat: RepeatFilter | None,
    listening: Callable[[int], None] | None,
) -> None:
    runner = make_runner(app, limits, handle_signals=True)
    await runner.setup()
    flusher = asyncio.create_task(_flush_every(repeat)) if repeat is not None else None
    try:
        await web.TCPSite(runner, host, port, backlog=BACKLOG).start()
        if listening is not None:
            listening(runner.addresses[0][1])  # the port bound (the one asked for, or the system's for 0)
        while True:
            await asyncio.sleep(3600)
    finally:
        if flusher is not None:
            flusher.cancel()
        await runner.cleanup()


def run(
    app: web.Application,
    *,
    host: str,
    port: int,
    limits: Limits,
    repeat: RepeatFilter | None = None,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Serve `app` on host:port until SIGINT or SIGTERM, as
    :func:`aiohttp.web.run_app` does, with the :class:`Guard` of `limits`
    (and `repeat`'s counts said as their windows end); `listening` is
    called with the port once the socket listens (the app started)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(app, host, port, limits, repeat, listening))
    try:
        loop.run_until_complete(main)
    except (GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError, GracefulExit):
                loop.run_until_complete(main)
        finally:
            rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in rest:
                t.cancel()
            if rest:
                loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            asyncio.set_event_loop(None)
            loop.close()


__all__ = [
    "FD_RESERVE",
    "Guard",
    "Limits",
    "RepeatFilter",
    "client_key",
    "make_runner",
    "raise_file_limit",
    "run",
    "setup_logging",
]
