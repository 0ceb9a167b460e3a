"""Games watched live (issue 36), and the TV page.

- ``GET /api/competitions/{cid}/live``: the competition's games in play now
  (its ladder's and its runs', a final's), each with its page.
- ``GET /c/{cid}/runs/{rid}/live/{idx}``: a game followed move by move;
  ``GET /c/{cid}/tv``: a projector's page following the games in play one
  after another, the standings beside them.
- ``GET /api/competitions/{cid}/runs/{rid}/live/{idx}/events``: the stream
  they read, server-sent events: ``frame`` (the game as the public sees it,
  :class:`referee.service.watch.Frame`: the public log from the last frame
  on), ``over`` once the game's result is recorded; a comment when idle.

What a frame holds and when it is sent is :mod:`referee.service.watch`'s
(the record only, public fields only, whole set-up batches). The streams
count against the leaderboard streams' caps (:class:`~referee.web.live.Hub`:
per address, per network, in all: 429, 503) and one game has at most
``max_watchers_per_game``; a stream sends at most one frame per
:func:`~referee.web.live.update_gap` (as a leaderboard's does), each holding
every event since the last, so nothing is lost. Games played by a Ray
executor cannot be followed (they play in other processes): the pages say so.
"""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from ..service.store import ServiceDB
from ..service.watch import Feed
from ..tournament.results import replay_path
from . import pages
from .app_state import ROOM, STREAM_RETRY_S
from .errors import fail
from .handlers.common import client_address, competition_of
from .handlers.competitions import live_html, shown_board
from .live import HUB, LIVENESS_S, _gone, client_of, update_gap
from .validation import path_int


class LiveLink(msgspec.Struct, kw_only=True):
    """A game in play, as ``/api/competitions/{cid}/live`` lists it."""

    run: int
    game: int
    kind: str
    names: list[str]
    #: Its page (followed live), and its events' stream.
    page: str
    events: str


class LiveList(msgspec.Struct, kw_only=True):
    games: list[LiveLink]
    #: Whether games here can be watched at all (the local executor), and why not.
    watchable: bool
    note: str | None = None


def _links(request: web.Request, cid: int) -> LiveList:
    room = request.app[ROOM]
    games = [
        LiveLink(
            run=g.run,
            game=g.game,
            kind=g.kind,
            names=g.names,
            page=f"/c/{cid}/runs/{g.run}/live/{g.game}",
            events=f"/api/competitions/{cid}/runs/{g.run}/live/{g.game}/events",
        )
        for g in room.live_games(cid)
    ]
    if room.settings.executor != "local":
        return LiveList(
            games=games,
            watchable=False,
            note="games play on a Ray cluster here: live watching needs the local executor "
            "(referee serve --executor local); their replays are on the leaderboard",
        )
    return LiveList(games=games, watchable=True)


async def live_games(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    resp = web.json_response(text=msgspec.json.encode(_links(request, comp.id)).decode())
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def watch_page(request: web.Request) -> web.Response:
    """The game's page while it plays; its replay once it is recorded; 404 for a game neither."""
    comp = await competition_of(request)
    rid, idx = path_int(request, "rid"), path_int(request, "idx")
    room = request.app[ROOM]
    run = await room.db.call(ServiceDB.run, rid)
    if run is None or run.competition_id != comp.id:
        fail(404, f"no run {rid} in competition {comp.id}")
    if not any(g.run == rid and g.game == idx for g in room.live_games(comp.id)):
        path = await asyncio.to_thread(replay_path, run.out_dir, idx) if run.out_dir else None
        if path is not None and await asyncio.to_thread(path.exists):
            raise web.HTTPSeeOther(f"/c/{comp.id}/runs/{rid}/games/{idx}")
        fail(404, f"game {idx} of run {rid} is neither being played here now nor recorded")
    return pages.render(
        request,
        "watch.html",
        {
            "comp": comp,
            "rid": rid,
            "idx": idx,
            "events": f"/api/competitions/{comp.id}/runs/{rid}/live/{idx}/events",
            "replay": f"/c/{comp.id}/runs/{rid}/games/{idx}",
        },
    )


async def tv_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    live_part = pages.rendered(live_html(request, board))
    listing = _links(request, comp.id)
    return pages.render(request, "tv.html", {"comp": comp, "live_part": live_part, "note": listing.note})


def _frame_event(body: bytes, over: bool) -> bytes:
    return (b"event: over\ndata: " if over else b"event: frame\ndata: ") + body + b"\n\n"


async def events(request: web.Request) -> web.StreamResponse:
    """A watcher's stream (see the module's docstring)."""
    app = request.app
    comp = await competition_of(request)
    rid, idx = path_int(request, "rid"), path_int(request, "idx")
    room, hub = app[ROOM], app[HUB]
    settings = room.settings
    client = client_of(client_address(request))
    refused = hub.refusal(client, settings)
    if refused is not None:
        fail(*refused, headers={"Retry-After": str(STREAM_RETRY_S)})
    feed = room.watch_game(comp.id, rid, idx)  # 404 when not in play, 429 past the game's watchers
    hub.count(client, 1)
    try:
        return await _stream(request, feed)
    finally:
        hub.count(client, -1)
        room.unwatch(feed)


async def _stream(request: web.Request, feed: Feed) -> web.StreamResponse:
    app = request.app
    hub, settings = app[HUB], app[ROOM].settings
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    loop = asyncio.get_running_loop()
    try:
        await resp.prepare(request)
        since = feed.events
        body = feed.frame(0)
        await resp.write(_frame_event(body, feed.over))
        written = loop.time()
        due = written + max(settings.poll_s, update_gap(settings, hub.open, len(body)))
        while not feed.over and not hub.closing:
            await asyncio.sleep(min(max(0.0, due - loop.time()), LIVENESS_S))
            if _gone(request):
                break
            now = loop.time()
            if now < due:
                continue
            feed.advance()  # the first watcher of a tick reads the record; the others find it read
            if feed.events > since or feed.over:
                body = feed.frame(since)
                since = feed.events
                await resp.write(_frame_event(body, feed.over))
                written = now
                due = now + max(settings.poll_s, update_gap(settings, hub.open, len(body)))
                continue
            due = now + settings.poll_s
            if now - written >= settings.heartbeat_s:
                await resp.write(b": keep-alive\n\n")
                written = now
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return resp
