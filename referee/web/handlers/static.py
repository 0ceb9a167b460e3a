"""The pages' stylesheet, script and icon (files under ``referee/web/static/``, read by :mod:`referee.web.assets`)."""

from __future__ import annotations

from aiohttp import web

from ..assets import CSS, FAVICON_ICO, FAVICON_SVG, JS, SEAT_JS, TABLE_JS, WATCH_JS


async def stylesheet(request: web.Request) -> web.Response:
    return web.Response(text=CSS, content_type="text/css")


async def script(request: web.Request) -> web.Response:
    return web.Response(text=JS, content_type="application/javascript")


async def seat_script(request: web.Request) -> web.Response:
    return web.Response(text=SEAT_JS, content_type="application/javascript")


async def table_script(request: web.Request) -> web.Response:
    return web.Response(text=TABLE_JS, content_type="application/javascript")


async def watch_script(request: web.Request) -> web.Response:
    return web.Response(text=WATCH_JS, content_type="application/javascript")


async def favicon_ico(request: web.Request) -> web.Response:
    return web.Response(
        body=FAVICON_ICO, content_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"}
    )


async def favicon_svg(request: web.Request) -> web.Response:
    return web.Response(
        text=FAVICON_SVG, content_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"}
    )
