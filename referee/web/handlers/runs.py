"""Runs of a competition: listing, starting and stopping them; their games and replays."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ...service.store import ServiceDB
from ...tournament.results import games_list, games_page
from .. import data, pages
from ..app_state import ROOM
from ..auth import is_admin, require_admin
from ..data import run_info
from ..errors import fail
from ..paging import page_links, query_api_page, query_games_filter
from ..schemas import StartRun
from ..validation import has_body, path_int, read_body
from .common import competition_of, json_response, run_of


async def list_runs(request: web.Request) -> web.Response:
    """The runs; a failed run's error in full for the admin only."""
    comp = await competition_of(request)
    admin = await is_admin(request)
    return json_response(
        [run_info(r, private=admin) for r in await request.app[ROOM].db.call(ServiceDB.runs, comp.id)]
    )


async def start_run(request: web.Request) -> web.Response:
    """A new run with the teams' latest bots, or (``{"resume": true}``) the last one again."""
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, StartRun) if await has_body(request) else StartRun()
    room = request.app[ROOM]
    run = await room.start_run(comp.id, resume=body.resume)
    fresh = await room.db.call(ServiceDB.run, run.id)
    assert fresh is not None
    return json_response(run_info(fresh, private=True), 202)


async def stop_run(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    run = await run_of(request, comp)
    await request.app[ROOM].stop_run(comp.id, run.id)
    fresh = await request.app[ROOM].db.call(ServiceDB.run, run.id)
    assert fresh is not None
    return json_response(run_info(fresh, private=True))


async def list_games(request: web.Request) -> web.Response:
    """The run's recorded games in schedule order; ``?bot=NAME`` those it
    played, of those ``?opponent=`` and ``?result=`` keep (as on the bot
    page). ``?page=N&per_page=M``: a page of them (1: the first games), with
    ``X-Total-Count`` and ``Link`` headers; without either, every game: the
    answer clients written before pages read whole (a million games are
    about 30 MB: page them)."""
    comp = await competition_of(request)
    run = await run_of(request, comp)
    bot = request.query.get("bot")
    where, filters = query_games_filter(request)
    if filters and not bot:
        fail(400, f"?{next(iter(filters))}= filters a bot's games: give ?bot=NAME too")
    page = query_api_page(request)
    if page is None:
        return json_response(await asyncio.to_thread(games_list, run.out_dir, bot, None, where))
    number, size = page
    offset = min((number - 1) * size, 10**12)
    rows, total = await asyncio.to_thread(games_page, run.out_dir, offset, size, bot, where)
    response = json_response(rows)
    response.headers.update(page_links(request, number, size, total))
    return response


async def replay_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run = await run_of(request, comp)
    idx = path_int(request, "idx")
    frames = await data.replay(request.app, run, idx)
    return pages.render(
        request,
        "replay.html",
        {
            "data": frames,
            "title": f"game {idx} — {comp.name}",
            "standalone": False,
            "comp": comp,
            "run": run,
            "idx": idx,
        },
    )


async def get_game(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run = await run_of(request, comp)
    return json_response(await data.replay(request.app, run, path_int(request, "idx")))
