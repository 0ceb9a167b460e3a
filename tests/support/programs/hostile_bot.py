"""A bot whose words are terminal escape sequences (issue 32 item 13).

Its self-declared name, author and version (``GET /``), what it prints to
stderr at every ``/act``, and its answer's HTTP reason carry an OSC window
title (ESC ] 0;pwned BEL), a clear screen (ESC [ 2J), a DCS string
(ESC P ... ESC \\), an 8-bit CSI (U+009B) and a right-to-left override
(U+202E). Its ``/act`` answers HTTP 500: every request is a fault whose
detail and output the referee reports.

``python tests/support/programs/hostile_bot.py --port P``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiohttp import web

from protocol import APIVERSION

#: This file, to run the bot as a process.
SCRIPT = str(Path(__file__).resolve())

#: Each attack, then the text it hides among: what the terminal must show.
ATTACKS = {
    "osc": "\x1b]0;pwned\x07",
    "csi": "\x1b[2J",
    "dcs": "\x1bPq#0;2;0;0;0\x1b\\",
    "c1": "\x9b31m",
    "bidi": "\u202egnp.exe",
}
HOSTILE = "bot" + "".join(ATTACKS.values())


def app() -> web.Application:
    async def info(request: web.Request) -> web.Response:
        body = {"apiversion": APIVERSION, "name": HOSTILE, "author": HOSTILE, "version": HOSTILE}
        return web.Response(body=json.dumps(body), content_type="application/json")

    async def ok(request: web.Request) -> web.Response:
        return web.Response(body=b"{}", content_type="application/json")

    async def act(request: web.Request) -> web.Response:
        await request.read()
        print(f"thinking {HOSTILE}", file=sys.stderr, flush=True)
        return web.Response(status=500, text=HOSTILE)

    a = web.Application()
    a.router.add_get("/", info)
    a.router.add_post("/start", ok)
    a.router.add_post("/end", ok)
    a.router.add_post("/act", act)
    return a


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    web.run_app(app(), host="127.0.0.1", port=port, print=None, access_log=None, shutdown_timeout=0.1)
