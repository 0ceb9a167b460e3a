"""Runs of a competition: listing, starting and stopping them; their games and replays."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ...service.errors import ServiceError
from ...service.store import ServiceDB
from ...tournament.results import games_list
from .. import data, pages
from ..app_state import DB, RUNS, SETTINGS
from ..auth import is_admin, require_admin
from ..boardcache import forget
from ..data import run_info
from ..errors import fail
from ..ladder_service import executor_of
from ..run_start import RunThread, pin_house_text, prepare_run
from ..schemas import StartRun
from ..validation import has_body, path_int, read_body
from .common import competition_of, json_response, run_of


async def list_runs(request: web.Request) -> web.Response:
    """The runs; a failed run's error in full for the admin only."""
    comp = await competition_of(request)
    admin = await is_admin(request)
    return json_response(
        [run_info(r, private=admin) for r in await request.app[DB].call(ServiceDB.runs, comp.id)]
    )


async def start_run(request: web.Request) -> web.Response:
    """A new run with the teams' latest bots, or (``{"resume": true}``) the last one again."""
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, StartRun) if await has_body(request) else StartRun()
    if comp.phase != "setup":
        fail(
            409,
            f"competition {comp.id} is {comp.phase}: its ladder and final play by themselves "
            "(a run by hand is for a competition in setup)",
        )
    app = request.app
    db = app[DB]
    settings = app[SETTINGS]
    try:  # its house URL bots admitted and pinned as teams' URLs are (a resume plays the pins it had)
        house = (
            {}
            if body.resume
            else await pin_house_text(
                comp.league_toml,
                settings.bot_policy,
                anywhere=settings.house_urls_anywhere,
                allow_commands=settings.allow_house_commands,
            )
        )
    except ServiceError as e:
        raise e.reworded(f"cannot start: {e.message}") from None
    run, league = await db.call(
        prepare_run,
        comp.id,
        resume=body.resume,
        policy=settings.bot_policy,
        house=house,
        allow_commands=settings.allow_house_commands,
    )
    thread = RunThread(db.path, run, league, resume=body.resume, executor=executor_of(app))
    app[RUNS][run.id] = thread
    await asyncio.to_thread(thread.start)
    forget(app, comp.id)
    fresh = await db.call(ServiceDB.run, run.id)
    assert fresh is not None
    return json_response(run_info(fresh, private=True), 202)


async def stop_run(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    run = await run_of(request, comp)
    thread = request.app[RUNS].get(run.id)
    if thread is None or not thread.thread.is_alive():
        fail(409, f"run {run.id} is not running in this server")
    thread.stop(abandon=True)
    await asyncio.to_thread(thread.join, 30)
    forget(request.app, comp.id)
    fresh = await request.app[DB].call(ServiceDB.run, run.id)
    assert fresh is not None
    return json_response(run_info(fresh, private=True))


async def list_games(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run = await run_of(request, comp)
    return json_response(await asyncio.to_thread(games_list, run.out_dir, request.query.get("bot")))


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
