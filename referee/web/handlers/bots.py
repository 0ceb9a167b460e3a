"""A bot of a competition: its statistics, rating history and games."""

from __future__ import annotations

from aiohttp import web

from ...service.runs import decode_league
from ...tournament.store import GameRow
from .. import data, pages
from ..data import run_info
from ..paging import H2H_SHOWN, PAGE_SIZE, page_links, page_of, query_api_page, query_games_filter, query_page
from .common import competition_of, json_response, shown_run


async def bot_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    number = query_page(request)
    where, filters = query_games_filter(request)
    name = request.match_info["bot"]
    bot = await data.bot(request.app, comp, run, name, where, games=False)
    games: list[GameRow] = []
    total = 0
    if run is not None and bot.in_run:  # its games a page at a time, newest first, that page's rows only
        games, total = await data.bot_games(run, name, where, (number - 1) * PAGE_SIZE, PAGE_SIZE, True)
    page = page_of(number, total)
    query = {"run": request.query["run"]} if "run" in request.query else {}
    return pages.render(
        request,
        "bot.html",
        {
            "comp": comp,
            "run": run_info(run) if run else None,
            "bot": bot,
            "games": games,
            "page": page,
            "query": {**query, **filters},  # paging keeps the run and the filters
            "run_query": query,
            "filters": filters,
            "seats": decode_league(run.league_json).tournament.table_size if run else 0,
            "h2h_shown": None if request.query.get("h2h") == "all" else H2H_SHOWN,
        },
    )


async def get_bot(request: web.Request) -> web.Response:
    """The bot page's data; ``?opponent=`` and ``?result=`` filter its games
    as on the page. ``?page=N&per_page=M``: its games a page at a time, in
    schedule order (1: its first games), with ``X-Total-Count`` and ``Link``
    headers as the games API; without either, every game as before."""
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    where, _ = query_games_filter(request)
    asked = query_api_page(request)
    name = request.match_info["bot"]
    bot = await data.bot(request.app, comp, run, name, where, games=asked is None)
    if asked is None:
        return json_response(bot)
    number, size = asked
    total = 0
    if run is not None and bot.in_run:
        bot.games, total = await data.bot_games(run, name, where, min((number - 1) * size, 10**12), size)
    response = json_response(bot)
    response.headers.update(page_links(request, number, size, total))
    return response
