"""``/sdk/``: the SDK's wheel, for ``pip install`` anywhere (issue 35).

``GET /sdk/`` lists it (a page of links, which ``pip install referee-sdk
--find-links http://SERVER/sdk/`` reads); ``GET /sdk/<wheel>`` downloads it.
Public: it is this repository's protocol and SDK, nothing of a team's. The
wheel is built at the first request after the service starts (so an updated
referee serves its own SDK) into ``DATA/sdk/``, and served from there.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import threading
from pathlib import Path

from aiohttp import web

from .. import sdk_wheel
from ..app_state import ROOM
from ..errors import fail

__all__ = ["index_url", "sdk_index", "sdk_wheel_file"]

#: The wheels this process built, by data folder: each is built once a process.
_built: dict[Path, tuple[Path, str]] = {}
_lock = threading.Lock()


def _wheel_in(folder: Path) -> tuple[Path, str]:
    with _lock:
        done = _built.get(folder)
        if done is None or not done[0].is_file():
            path = sdk_wheel.write(folder)
            done = _built[folder] = (path, hashlib.sha256(path.read_bytes()).hexdigest())
        return done


async def _wheel(request: web.Request) -> tuple[Path, str]:
    """The wheel's path and its sha256, built first if this process has not yet."""
    return await asyncio.to_thread(_wheel_in, request.app[ROOM].db.data_dir / "sdk")


def index_url(request: web.Request) -> str:
    """``http://HOST/sdk/`` as the request reached this service."""
    return f"{request.url.origin()}/sdk/"


async def sdk_index(request: web.Request) -> web.Response:
    """``GET /sdk/``: a link to the wheel, with its hash (pip checks it)."""
    path, digest = await _wheel(request)
    name = html.escape(path.name)
    command = html.escape(f"pip install {sdk_wheel.DIST} --find-links {index_url(request)}")
    body = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>referee-sdk</title></head><body>"
        "<h1>referee-sdk: the bot protocol and SDK for Python 3.11+</h1>"
        f"<p>Install: <code>{command}</code> (needs msgspec alone).</p>"
        f'<p><a href="{name}#sha256={digest}">{name}</a></p></body></html>'
    )
    return web.Response(text=body, content_type="text/html", headers={"Cache-Control": "no-cache"})


async def sdk_wheel_file(request: web.Request) -> web.StreamResponse:
    """``GET /sdk/<wheel>``: the wheel (404 naming the one there is for any other name)."""
    path, _ = await _wheel(request)
    if request.match_info["name"] != path.name:
        fail(
            404, f"no {request.match_info['name'][:80]!r} here: the SDK is /sdk/{path.name} (listed at /sdk/)"
        )
    return web.FileResponse(
        path,
        headers={
            "Content-Type": "application/zip",
            "Content-Disposition": f'attachment; filename="{path.name}"',
        },
    )
