"""A bot for the output tests: it prints ``turn N`` (the request's turn) on
every ``/act`` and plays the first legal action; with ``--raise-at-act`` it
prints a traceback and answers HTTP 500 instead (what an author's bug does).

``python talker.py --port P [--raise-at-act]`` or ``--unix PATH``; with no
address, on ``$BOT_UNIX`` (in a container: a team's source upload ``bot.py``),
raising when a file ``raise`` lies next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from aiohttp import web


def app(raise_at_act: bool) -> web.Application:
    async def info(request: web.Request) -> web.Response:
        return web.json_response({"name": "talker", "version": "1", "author": "t", "apiversion": "1"})

    async def start(request: web.Request) -> web.Response:
        return web.json_response({})

    async def act(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        print(f"turn {body['turn']} of {body['game_id']}", flush=True)
        if raise_at_act:
            try:
                raise RuntimeError("talker cannot count its cards")
            except RuntimeError:
                traceback.print_exc()
                sys.stderr.flush()
            return web.Response(status=500, text="internal error")
        return web.json_response({"request_id": body["request_id"], "index": 0})

    async def end(request: web.Request) -> web.Response:
        return web.json_response({})

    a = web.Application()
    a.router.add_get("/", info)
    a.router.add_post("/start", start)
    a.router.add_post("/act", act)
    a.router.add_post("/end", end)
    return a


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--unix")
    p.add_argument("--raise-at-act", action="store_true")
    a = p.parse_args()
    a.unix = a.unix or (os.environ.get("BOT_UNIX") if a.port is None else None)
    a.raise_at_act = a.raise_at_act or os.path.exists(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "raise")
    )
    if a.unix:
        web.run_app(app(a.raise_at_act), path=a.unix, print=None, access_log=None)
    else:
        web.run_app(app(a.raise_at_act), host="127.0.0.1", port=a.port, print=None, access_log=None)
