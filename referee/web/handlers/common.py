"""What every handler uses: the JSON answer, and the path's competition,
run and team (404 when there is none)."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from ..db import Competition, Run, ServiceDB, Team
from ..errors import fail
from ..state import DB
from ..validation import path_int


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=msgspec.json.encode(data), status=status, content_type="application/json")


async def competition_of(request: web.Request) -> Competition:
    """The competition ``{cid}``."""
    comp = await request.app[DB].call(ServiceDB.competition, path_int(request, "cid"))
    if comp is None:
        fail(404, f"no competition {request.match_info['cid']}")
    return comp


async def run_of(request: web.Request, comp: Competition) -> Run:
    """The run ``{rid}`` of ``comp``."""
    run = await request.app[DB].call(ServiceDB.run, path_int(request, "rid"))
    if run is None or run.competition_id != comp.id:
        fail(404, f"no run {request.match_info['rid']} in competition {comp.id}")
    return run


async def team_of(request: web.Request, comp: Competition) -> Team:
    """The team ``{tid}`` of ``comp``."""
    team = await request.app[DB].call(ServiceDB.team, path_int(request, "tid"))
    if team is None or team.competition_id != comp.id:
        fail(404, f"no team {request.match_info['tid']} in competition {comp.id}")
    return team


async def shown_run(request: web.Request, comp: Competition) -> tuple[Run | None, bool]:
    """The run a page shows: the one asked for with ``?run=`` (pinned: True),
    else the latest."""
    db = request.app[DB]
    want = request.query.get("run")
    if want is not None:
        try:
            run = await db.call(ServiceDB.run, int(want))
        except ValueError:
            run = None
        if run is None or run.competition_id != comp.id:
            fail(404, f"no run {want} in competition {comp.id}")
        return run, True
    return await db.call(ServiceDB.latest_run, comp.id), False
