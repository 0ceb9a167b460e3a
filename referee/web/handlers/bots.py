"""A bot of a competition: its statistics, rating history and games."""

from __future__ import annotations

from aiohttp import web

from .. import data, pages
from ..data import run_info
from .common import competition_of, json_response, shown_run


async def bot_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    bot = await data.bot(request.app, comp, run, request.match_info["bot"])
    return pages.render(request, "bot.html",
                        {"comp": comp, "run": run_info(run) if run else None, "bot": bot})


async def get_bot(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    run, _ = await shown_run(request, comp)
    return json_response(await data.bot(request.app, comp, run, request.match_info["bot"]))
