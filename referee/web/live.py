"""Live updates: the leaderboard's data, pushed by server-sent events.

:class:`Hub` keeps the streams open on each competition; :func:`poller`
looks, for competitions someone is watching, whether the latest run changed
(new games, a new status, a new run, a new team; played by this process or
by ``referee start``) and publishes the new data; :func:`events` is the
stream, ``GET /api/competitions/{cid}/events``.

So that 500 viewers do not slow the games: the streams open at once are
capped (``Settings.max_streams`` in all, then 503;
``Settings.max_streams_per_client`` from one address, then 429;
``Settings.max_streams_per_network`` from one network, :func:`client_of`:
an IPv6 /64, or this host's loopback, then 429; and once all but
``Settings.stream_reserve`` of the slots are taken, a network that has a
stream open gets no other, so a new client still gets one); a stream
sends at most one update per ``Settings.min_update_s``, and less often when
all the streams would send more than ``Settings.live_bytes_per_s`` (so 500
viewers cost what 50 do), the faster ones coalesced into the latest (a
:class:`Stream` keeps only the latest not yet sent, so the last state always
arrives); a changed board is published at most once per ``min_update_s``
too; and the board is computed once for all of them
(:mod:`referee.web.boardcache`), and rendered and encoded once for all the
streams that send it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import re
import struct
import zlib
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import msgspec
from aiohttp import web

from ..service.clock import Clock
from ..service.ladder import ladder_waiting
from ..service.store import Competition, Run, ServiceDB
from ..tournament.store import Changes
from . import data
from .app_state import ROOM, STREAM_RETRY_S, Settings
from .boardcache import BOARDS, Signal, latest_board, latest_key, rendered
from .errors import fail
from .handlers.common import client_address, competition_of
from .handlers.competitions import live_html
from .schemas import Leaderboard

log = logging.getLogger("referee.web")

Update = Leaderboard | None  # None: the stream ends

#: How often an idle stream looks whether its client is gone (without
#: handler cancellation, aiohttp tells a handler only when it writes).
LIVENESS_S = 1.0


class Client(NamedTuple):
    """Whom a stream is counted against: the client's address, and the
    network it belongs to (:func:`client_of`)."""

    #: The address (canonical: ``::ffff:192.0.2.1`` is ``192.0.2.1``).
    address: str
    #: The network its streams are counted in too: an IPv6 address's /64;
    #: ``"this host (loopback)"`` for 127.0.0.0/8 and ::1; an IPv4 address
    #: (not loopback) is its own.
    network: str


#: The network of every loopback address: one host (a user on it chooses
#: any of the 16 million addresses of 127.0.0.0/8 as it likes).
THIS_HOST = "this host (loopback)"


def client_of(address: str) -> Client:
    """The client of a stream from ``address`` (the peer's, or the one a
    trusted proxy forwards): an IPv4-mapped IPv6 address counts as its IPv4
    address; an IPv6 address belongs to its /64, which one host or one site
    holds whole (a client choosing a new address for each stream is still
    one network); every loopback address (127.0.0.0/8, ::1) to this host; a
    string that is no address (``unknown``) is its own."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # a zone index says nothing of who
    except ValueError:
        return Client(address[:100], address[:100])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return Client(str(ip), THIS_HOST)
    if isinstance(ip, ipaddress.IPv6Address):
        return Client(str(ip), str(ipaddress.IPv6Network((ip, 64), strict=False)))
    return Client(str(ip), str(ip))


class Stream:
    """One open event stream: the latest update not sent yet (a newer one
    replaces it), and whether it is to end."""

    def __init__(self, cid: int, client: Client) -> None:
        self.cid = cid
        self.client = client
        self.pending: Leaderboard | None = None
        #: Set by :meth:`put`: something to send (or the end).
        self.wake = asyncio.Event()
        self.ended = asyncio.Event()
        #: What it waits for, when it does: ``"update"``, its time to send
        #: the one pending; ``"idle"``, something to send (:attr:`Hub.changed`
        #: is notified when it starts waiting).
        self.waiting: str | None = None

    def put(self, update: Update) -> None:
        if update is None:
            self.ended.set()
        else:
            self.pending = update
        self.wake.set()

    def take(self) -> Leaderboard | None:
        board, self.pending = self.pending, None
        self.wake.clear()
        return board


class Hub:
    """The open streams of each competition, and how many each client
    address and each network (:func:`client_of`) has."""

    def __init__(self) -> None:
        self.streams: dict[int, set[Stream]] = {}
        #: What each watched competition looked like at the last poll.
        self.versions: dict[int, tuple[object, ...]] = {}
        #: When each competition's board was last published (the service's clock).
        self.published: dict[int, float] = {}
        #: Streams open by client address.
        self.clients: Counter[str] = Counter()
        #: Streams open by network (an IPv6 /64, this host, an IPv4 address).
        self.networks: Counter[str] = Counter()
        self.open = 0
        self.closing = False
        #: Notified whenever a stream opens or closes, or starts waiting.
        self.changed = Signal()

    def refusal(self, client: Client, settings: Settings) -> tuple[int, str] | None:
        """Why one more stream from ``client`` is refused (429: it has its
        share, or its network has; or the server is busy and its network
        has a stream already; 503: the server has its limit), or None.

        The reserve: once all but ``stream_reserve`` of ``max_streams``
        are open, only a network that has no stream open gets one, so that
        those who hold several cannot take the last slots from a new client."""
        address, network = client
        if self.clients[address] >= settings.max_streams_per_client:
            return 429, (
                f"too many live streams from {address}: at most {settings.max_streams_per_client} "
                "at a time (close a page of a leaderboard)"
            )
        per_network = max(settings.max_streams_per_network, settings.max_streams_per_client)
        if network != address and self.networks[network] >= per_network:
            return 429, (
                f"too many live streams from {network}: at most {per_network} at a time from one "
                "network (close a page of a leaderboard)"
            )
        if self.open >= settings.max_streams:
            return 503, f"the server has {self.open} live streams open, its limit: try again later"
        if self.networks[network] and self.open >= settings.max_streams - reserved(settings):
            who = address if network == address else f"{network} ({address})"
            return 429, (
                f"the server is busy ({self.open} live streams of {settings.max_streams}): the last "
                f"slots are kept for clients with none, and {who} has {self.networks[network]} open "
                "(close a page of a leaderboard, or try again later)"
            )
        return None

    def subscribe(self, cid: int, client: Client) -> Stream:
        stream = Stream(cid, client)
        self.streams.setdefault(cid, set()).add(stream)
        self.count(client, 1)
        return stream

    def count(self, client: Client, n: int) -> None:
        """Count `n` more streams (or fewer) open from `client`: a
        leaderboard's, or a game's watcher's (:mod:`referee.web.watch`)."""
        self.open += n
        for counter, key in ((self.clients, client.address), (self.networks, client.network)):
            counter[key] += n
            if counter[key] <= 0:
                del counter[key]
        self.changed.notify()

    def unsubscribe(self, stream: Stream) -> None:
        streams = self.streams.get(stream.cid, set())
        if stream not in streams:
            return
        streams.discard(stream)
        if not streams:
            del self.streams[stream.cid]
            self.published.pop(stream.cid, None)
        self.count(stream.client, -1)

    def publish(self, cid: int, update: Update) -> None:
        for stream in list(self.streams.get(cid, ())):
            stream.put(update)

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        self.closing = True
        for cid in list(self.streams):
            self.publish(cid, None)


def reserved(settings: Settings) -> int:
    """The slots kept for networks that have no stream open."""
    return int(settings.max_streams * min(max(settings.stream_reserve, 0.0), 1.0))


HUB: web.AppKey[Hub] = web.AppKey("hub", Hub)


#: What a stream sends (``?view=``): the leaderboard's data (``update``), or
#: the leaderboard page's live part rendered (``live``: the page needs no
#: other request per update).
VIEWS = ("update", "live")


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``update`` with the leaderboard's data (or with
    ``?view=live``, ``live`` with the page's live part) now and whenever a
    game is recorded or the run's status changes (at most one per
    ``min_update_s``); a comment line when idle for ``heartbeat_s``. Each
    update is encoded once for all the streams that send it."""
    app = request.app
    comp = await competition_of(request)
    view = request.query.get("view", "update")
    if view not in VIEWS:
        fail(422, f"'view' must be one of {', '.join(VIEWS)}, got {view!r}", "view")
    hub, settings = app[HUB], app[ROOM].settings
    client = client_of(client_address(request))
    refused = hub.refusal(client, settings)
    if refused is not None:
        fail(*refused, headers={"Retry-After": str(STREAM_RETRY_S)})
    stream = hub.subscribe(comp.id, client)
    wire = Wire(accepts_gzip(request))
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "Vary": "Accept-Encoding",
            **({"Content-Encoding": "gzip"} if wire.gzip else {}),
        }
    )
    clock = app[ROOM].clock
    try:
        await resp.prepare(request)
        board = await latest_board(app, comp)
        body = _event(request, view, board)
        size = await wire.write(resp, body, _packed(request, view, board, body) if wire.gzip else body)
        sent = written = clock.monotonic()
        while not hub.closing and not stream.ended.is_set():
            pending = stream.pending
            if pending is not None and _event(request, view, pending) == body:
                stream.take()  # it shows what was sent already (the poller's first look does)
                continue
            # The updates arriving before it is time replace the pending
            # one, which is sent when it is time (:func:`update_gap`).
            now = clock.monotonic()
            update_at = math.inf if pending is None else sent + update_gap(settings, hub.open, size)
            beat_at = written + settings.heartbeat_s
            if now < min(update_at, beat_at):
                # waiting to send an update, a newer one changes nothing: only the end does
                woken = stream.wake if pending is None else stream.ended
                stream.waiting = "idle" if pending is None else "update"
                hub.changed.notify()
                await _until(clock, woken, min(LIVENESS_S, update_at - now, beat_at - now))
                stream.waiting = None
                if _gone(request):
                    break
                continue
            if _gone(request):
                break
            update = stream.take() if now >= update_at else None
            if update is not None:
                body = _event(request, view, update)
                size = await wire.write(
                    resp, body, _packed(request, view, update, body) if wire.gzip else body
                )
                sent = written = clock.monotonic()
            else:
                await wire.write(resp, KEEP_ALIVE, KEEP_ALIVE_GZIP)
                written = clock.monotonic()
        if not _gone(request):
            await wire.end(resp)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        hub.unsubscribe(stream)
    return resp


async def _until(clock: Clock, event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set, or ``seconds`` passed on ``clock``."""
    if event.is_set():
        return
    sleep = asyncio.ensure_future(clock.sleep(seconds))
    woken = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((sleep, woken), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleep.cancel()
        woken.cancel()
        # gone before going on: a test's clock counts who sleeps on it
        await asyncio.gather(sleep, woken, return_exceptions=True)


def accepts_gzip(request: web.Request) -> bool:
    """Whether the client takes ``Content-Encoding: gzip`` (browsers do)."""
    for part in request.headers.get("Accept-Encoding", "").split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "x-gzip"):
            q = params.strip().removeprefix("q=").strip()
            try:
                return not q or float(q) > 0
            except ValueError:
                return False
    return False


def deflated(raw: bytes) -> bytes:
    """``raw`` as a deflate segment of its own, flushed to a byte boundary
    and not final: one compressor per event, so that the segment is the
    same bytes in every stream it goes to (each a gzip member of its own
    header, these segments and its own trailer, :class:`Wire`)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return packer.compress(raw) + packer.flush(zlib.Z_SYNC_FLUSH)


#: An idle stream's comment line, and compressed.
KEEP_ALIVE = b": keep-alive\n\n"
KEEP_ALIVE_GZIP = deflated(KEEP_ALIVE)
#: A gzip member's header (no name, no time) and its last, empty, deflate block.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
GZIP_LAST_BLOCK = b"\x03\x00"


class Wire:
    """How one stream's events go on the wire: as they are, or with gzip (a
    board's live part is ~12 times smaller so: 290 KB of HTML for 300
    teams, 23 KB), every event compressed once for all the streams
    (:func:`deflated`); a stream adds the header before its first and the
    trailer (the CRC and the length of what it sent) at its end."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.crc = 0
        self.length = 0
        self.started = False

    async def write(self, resp: web.StreamResponse, raw: bytes, packed: bytes) -> int:
        """Write ``raw`` (``packed``: it :func:`deflated`); the bytes sent."""
        if not self.gzip:
            await resp.write(raw)
            return len(raw)
        out = packed
        if not self.started:
            out, self.started = GZIP_HEADER + out, True
        self.crc = zlib.crc32(raw, self.crc)
        self.length += len(raw)
        await resp.write(out)
        return len(out)

    async def end(self, resp: web.StreamResponse) -> None:
        """End the stream cleanly (the server is stopping, or it was told to)."""
        if self.gzip and self.started:
            await resp.write(GZIP_LAST_BLOCK + struct.pack("<II", self.crc, self.length & 0xFFFFFFFF))


def update_gap(settings: Settings, streams: int, size: int) -> float:
    """Seconds a stream waits between two updates: ``min_update_s``, or
    longer when the streams open would send more than
    ``live_bytes_per_s`` in all at that rate (each as big as this one's
    last). So the live updates cost the server about the same with 50
    viewers or 500: each of the 500 is updated less often."""
    return max(settings.min_update_s, streams * size / max(1, settings.live_bytes_per_s))


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _packed(request: web.Request, view: str, board: Leaderboard, raw: bytes) -> bytes:
    """``raw``, the event of ``board``, compressed once for all the streams
    that send it with gzip."""
    return rendered(request.app, board, f"event:{view}:gzip", lambda: deflated(raw))


def _event(request: web.Request, view: str, board: Leaderboard) -> bytes:
    """The event of ``board`` for a ``view`` stream, encoded once for all the
    streams that send it (:func:`.boardcache.rendered`)."""

    def make() -> bytes:
        if view == "live":
            # every line of the data is its own ``data:`` field; the client joins them with "\n"
            html = live_html(request, board).decode()
            return (
                b"event: live\n"
                + "".join(f"data: {line}\n" for line in LINE_BREAK.split(html)).encode()
                + b"\n"
            )
        return b"event: update\ndata: " + msgspec.json.encode(board) + b"\n\n"

    return rendered(request.app, board, f"event:{view}", make)


#: What ends a line in an event stream.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _watched(db: ServiceDB, cid: int) -> tuple[Competition, Run | None, int] | None:
    """A competition, its latest run and how many teams it has."""
    comp = db.competition(cid)
    if comp is None:
        return None
    return comp, db.latest_run(cid), len(db.teams(cid))


async def poller(app: web.Application) -> None:
    """Publish a competition's data when its latest run changed (new games,
    new status, a new run), for competitions someone is watching: at most
    once per ``min_update_s`` (no stream may send more often, and a ladder
    changes at every poll: each board published is a board computed and
    rendered, the CPU the games need)."""
    room = app[ROOM]
    #: Each watched competition's latest run's change counter (see :class:`Changes`).
    changes: dict[int, Changes] = {}
    try:
        while True:
            await room.clock.sleep(room.settings.poll_s)
            await _poll(app, changes)
    finally:
        for c in changes.values():
            c.close()


async def _poll(app: web.Application, changes: dict[int, Changes]) -> None:
    """One look at every watched competition (:func:`poller`)."""
    hub, db, settings, clock = app[HUB], app[ROOM].db, app[ROOM].settings, app[ROOM].clock
    for cid in [c for c in changes if not hub.streams.get(c)]:
        changes.pop(cid).close()  # no one watches it any more
    for cid, streams in list(hub.streams.items()):
        if not streams or clock.monotonic() - hub.published.get(cid, -math.inf) < settings.min_update_s:
            continue
        try:
            watched = await db.call(_watched, cid)
            if watched is None:
                continue
            comp, run, teams = watched
            games: int | None = None
            if run is not None:
                counter = changes.get(cid)
                if counter is None or counter.path.parent != Path(run.out_dir):
                    if counter is not None:
                        counter.close()
                    counter = changes[cid] = Changes(run.out_dir)
                games = await asyncio.to_thread(counter.version)
            # a ladder that starts or stops waiting for players changes too (no game may come)
            version = (
                run.id if run else None,
                run.status if run else None,
                games,
                teams,
                ladder_waiting(app[ROOM], cid),
            )
            if hub.versions.get(cid) == version:
                continue
            # The first look too: a new stream's first board came from
            # the cache, and may be a little older than this version.
            hub.versions[cid] = version
            hub.published[cid] = clock.monotonic()
            hub.publish(cid, await _fresh_board(app, comp, run))
        except Exception:  # noqa: BLE001 - keep polling
            log.exception("live update of competition %s", cid)


async def _fresh_board(app: web.Application, comp: Competition, run: Run | None) -> Leaderboard:
    """The board of ``comp`` computed now (it changed), kept for the pages
    that fetch it on this update; its other boards (a pinned run's) are
    computed again when next asked for."""
    boards = app[BOARDS]
    boards.invalidate(lambda key: key.competition == comp.id)
    return await boards.refresh(latest_key(comp.id), lambda: data.leaderboard(app, comp, run))
