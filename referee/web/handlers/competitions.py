"""Competitions: the index, the leaderboard (and its live part), creating one."""

from __future__ import annotations

import asyncio

from aiohttp import web

from .. import data, pages
from ..auth import require_admin
from ..boardcache import BOARDS, BoardKey, latest_board, rendered
from ..db import Competition, ServiceDB
from ..deadlines import page_context
from ..errors import fail
from ..paging import page_of, query_page
from ..runs import StartError, check_league_text, pin_house_urls
from ..schemas import CompetitionCreated, Leaderboard, NewCompetition
from ..state import DB, SETTINGS
from ...tournament.league import LeagueError
from ..validation import check_name, read_body
from .common import competition_of, json_response, shown_run


async def index_page(request: web.Request) -> web.Response:
    return pages.render(request, "index.html", {"competitions": await data.index(request.app)})


async def list_competitions(request: web.Request) -> web.Response:
    return json_response(await data.index(request.app))


async def shown_board(request: web.Request, comp: Competition) -> Leaderboard:
    """The board of the run a page shows (:func:`~.common.shown_run`), from
    the cache all its viewers share (:mod:`referee.web.boardcache`)."""
    app = request.app
    if "run" not in request.query:
        return await latest_board(app, comp)
    run, pinned = await shown_run(request, comp)  # 404 unless the run is comp's
    assert run is not None
    return await app[BOARDS].get(BoardKey(comp.id, run.id, pinned),
                                 lambda: data.leaderboard(app, comp, run, pinned))


async def leaderboard_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    # its live part rendered once per board, shared with the live streams and /live
    live_part = pages.rendered(live_html(request, board))
    await page_context(request, comp)  # the deadlines' countdown
    runs = page_of(query_page(request), len(board.runs))  # the list of runs, newest first
    return pages.render(request, "leaderboard.html", {"board": board, "live_part": live_part, "runs": runs})


async def live_fragment(request: web.Request) -> web.Response:
    """The live part of the leaderboard (the team page and a pinned run's
    page fetch it on every update; the latest board's page gets it in its
    event stream instead, ``?view=live``)."""
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    resp = web.Response(body=live_html(request, board), content_type="text/html", charset="utf-8")
    resp.headers["Cache-Control"] = "no-store"
    return resp


def live_html(request: web.Request, board: Leaderboard) -> bytes:
    """``live.html`` of ``board``, rendered once for all its viewers."""
    return rendered(request.app, board, "live.html",
                    lambda: pages.render_string(request, "live.html", {"board": board}).encode())


async def get_competition(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    return json_response(await shown_board(request, comp))


async def create_competition(request: web.Request, name: str, league_text: str) -> Competition:
    """A new competition, checked as the API checks it (422 naming the field and the league's line)."""
    db = request.app[DB]
    name = check_name(name, "name", 80, slash=True)
    if await db.call(ServiceDB.competition_named, name) is not None:
        fail(422, f"a competition named {name!r} exists already", "name")
    try:
        league = check_league_text(league_text, "league")
    except LeagueError as e:
        fail(422, f"'league': {e}", "league")
    if league.containers.runtime or any(b.limits is not None and b.limits.runtime for b in league.bots):
        # a runtime the Docker daemon lacks: refused now, not at every team's admission
        from ...bots.base import BotError
        from ...bots.container import check_runtimes

        try:
            await asyncio.to_thread(check_runtimes, [league.containers, *(league.limits_for(b) for b in league.bots)])
        except BotError as e:
            fail(422, f"'league': {e}", "league")
    if not request.app[SETTINGS].allow_house_commands:
        for bot in league.bots:
            if bot.command is not None and bot.image is None:
                fail(422, f"'league': house bot {bot.name!r} is a command: a league sent through the web may "
                          "not start programs on the server (referee serve --allow-house-commands allows it)",
                     "league")
            if bot.url is not None and bot.url.startswith("unix:"):
                fail(422, f"'league': house bot {bot.name!r} is a unix socket: a league sent through the web "
                          "may not open sockets on the server (referee serve --allow-house-commands allows it)",
                     "league")
    settings = request.app[SETTINGS]
    try:  # a house URL bot is where a team's URL may be: refused now, not at the first run
        await pin_house_urls(league, settings.bot_policy, anywhere=settings.house_urls_anywhere)
    except StartError as e:
        fail(422, f"'league': {e.message}", "league")
    return await db.call(ServiceDB.add_competition, name, league_text)


async def new_competition(request: web.Request) -> web.Response:
    await require_admin(request)
    body = await read_body(request, NewCompetition)
    comp = await create_competition(request, body.name, body.league)
    return json_response(CompetitionCreated(id=comp.id, name=comp.name, created_at=comp.created_at), 201)
