"""A bot of a competition: its statistics, rating history and games."""

from __future__ import annotations

from aiohttp import web

from .. import data, pages
from ..data import run_info
from ..paging import page_of, query_page
from .common import competition_of, json_response, shown_run


async def bot_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    number = query_page(request)
    bot = await data.bot(request.app, comp, run, request.match_info["bot"])
    page = page_of(number, len(bot.games))  # its games a page at a time, newest first
    end = len(bot.games) - page.offset
    games = bot.games[max(0, end - page.size) : end]
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
            "query": query,
        },
    )


async def get_bot(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    return json_response(await data.bot(request.app, comp, run, request.match_info["bot"]))
