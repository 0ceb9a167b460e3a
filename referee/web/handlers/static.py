"""The pages' stylesheet and script (:mod:`referee.web.assets`)."""

from __future__ import annotations

from aiohttp import web

from ..assets import CSS, JS


async def stylesheet(request: web.Request) -> web.Response:
    return web.Response(text=CSS, content_type="text/css")


async def script(request: web.Request) -> web.Response:
    return web.Response(text=JS, content_type="application/javascript")
