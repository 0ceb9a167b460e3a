"""What every handler uses: the JSON answer, and the path's competition,
run and team (404 when there is none)."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from ...bots.netpolicy import within
from ...service.store import Competition, Run, ServiceDB, Team
from ..app_state import ROOM
from ..errors import fail
from ..validation import path_int, query_id


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=msgspec.json.encode(data), status=status, content_type="application/json")


def client_address(request: web.Request) -> str:
    """The address of the client a request comes from: the peer's, or behind
    a reverse proxy of ``--trusted-proxies`` the nearest address in its
    ``X-Forwarded-For`` that is not one of those proxies (read from the
    right: what a proxy appends is what it saw; what the client wrote itself
    is further left, and never trusted over it)."""
    peer = request.remote or "unknown"
    trusted = request.app[ROOM].settings.trusted_proxies
    if not trusted or not within(peer, trusted):
        return peer
    hops = [h.strip() for v in request.headers.getall("X-Forwarded-For", ()) for h in v.split(",")]
    for hop in reversed([h for h in hops if h]):
        if not within(hop, trusted):
            return hop
    return peer


async def competition_of(request: web.Request) -> Competition:
    """The competition ``{cid}``."""
    comp = await request.app[ROOM].db.call(ServiceDB.competition, path_int(request, "cid"))
    if comp is None:
        fail(404, f"no competition {request.match_info['cid']}")
    return comp


async def run_of(request: web.Request, comp: Competition) -> Run:
    """The run ``{rid}`` of ``comp``."""
    run = await request.app[ROOM].db.call(ServiceDB.run, path_int(request, "rid"))
    if run is None or run.competition_id != comp.id:
        fail(404, f"no run {request.match_info['rid']} in competition {comp.id}")
    return run


async def team_of(request: web.Request, comp: Competition) -> Team:
    """The team ``{tid}`` of ``comp``."""
    team = await request.app[ROOM].db.call(ServiceDB.team, path_int(request, "tid"))
    if team is None or team.competition_id != comp.id:
        fail(404, f"no team {request.match_info['tid']} in competition {comp.id}")
    return team


async def shown_run(request: web.Request, comp: Competition) -> tuple[Run | None, bool]:
    """The run a page shows: the one asked for with ``?run=`` (pinned: True),
    else the latest."""
    db = request.app[ROOM].db
    want = query_id(request, "run")  # 404 unless an id
    if want is not None:
        run = await db.call(ServiceDB.run, want)
        if run is None or run.competition_id != comp.id:
            fail(404, f"no run {want} in competition {comp.id}")
        return run, True
    return await db.call(ServiceDB.latest_run, comp.id), False
