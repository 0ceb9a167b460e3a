"""A team member's seat at a practice game, in the browser (issue 36).

``POST /team/practice/seat`` (the practice page's second form: the
opponents, the CSRF token) starts the game in the service
(:meth:`~referee.service.classroom.Classroom.play_practice_human`) and
sends the browser to ``/team/practice/{pid}/play``, whose script opens the
WebSocket ``/team/practice/{pid}/seat``.

The WebSocket carries the bot protocol itself. Each message to the page is
one line naming the message (``start``, ``act``, ``end``), a newline, then
byte for byte the body a bot at that seat would be POSTed (the prompt's
bytes: the same view, built by the same code, nothing more); the page
answers an ``act`` with the body a bot would reply
(``{"request_id": ..., "index": N}``), checked as a bot's is. Besides:
``closed`` + the request id when a request's time ran out (the safe
default was played), ``replay`` + the replay's address once the game is
recorded. Closing the page leaves the seat
(:meth:`~referee.bots.human.HumanSeat.leave`: the fault policy plays on).

Only the signed-in session of the seat's team may open it (anyone else:
404, as for its practice games), from this server's own page (the
``Origin`` check that guards every form), and one page at a time.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import WSMsgType, web

from ...bots.human import Prompt
from ...service.human_practice import HumanGame
from ...service.store.practice import get_game
from .. import pages
from ..app_state import ROOM
from ..errors import fail
from ..sessions import check_csrf, same_origin
from ..validation import path_int
from .team_pages import signed_in_or_login

_watches: set[asyncio.Task[None]] = set()
#: The largest message a page may send (a bot's reply is a few dozen bytes).
MAX_ANSWER = 4096


async def seat_submit(request: web.Request) -> web.StreamResponse:
    """The practice page's "take a seat yourself" form: one opponent per other seat."""
    same_origin(request)
    who = await signed_in_or_login(request)
    if request.content_length is not None and request.content_length > 16384:
        fail(413, "the practice form is too large")
    form = await request.post()
    check_csrf(who.session.csrf, str(form.get("csrf", "")))
    picks = [str(v) for v in form.getall("opponent", []) if str(v)]
    hg = await request.app[ROOM].play_practice_human(who.team, picks)
    raise web.HTTPSeeOther(f"/team/practice/{hg.game.id}/play")


async def play_page(request: web.Request) -> web.StreamResponse:
    """The table, while the game plays; its replay once it is over."""
    who = await signed_in_or_login(request)
    pid = path_int(request, "pid")
    game = await request.app[ROOM].db.call(get_game, pid)
    if game is None or game.team_id != who.team.id:
        fail(404, f"no practice game {pid} of team {who.team.id}")
    if pid not in request.app[ROOM].human_games:
        raise web.HTTPSeeOther(f"/team/practice/{pid}")
    return pages.render(
        request,
        "seat.html",
        {"team": who.team, "game": game, "socket": f"/team/practice/{pid}/seat"},
    )


async def seat_socket(request: web.Request) -> web.StreamResponse:
    """The WebSocket of the team's seat (see the module's docstring)."""
    same_origin(request)  # a WebSocket is not bound by the same-origin policy: its Origin is checked here
    who = await signed_in_or_login(request)
    hg = request.app[ROOM].human_game(path_int(request, "pid"), who.team)
    if not hg.hold():
        fail(409, "this seat is open in another page already (or was left): close that one")
    ws = web.WebSocketResponse(heartbeat=20, max_msg_size=MAX_ANSWER)
    try:
        await ws.prepare(request)
        await _serve(ws, hg)
    finally:
        if not hg.over.is_set():
            hg.seat.leave()  # the page is gone: the fault policy plays on for the seat
        hg.held = False
    return ws


async def _serve(ws: web.WebSocketResponse, hg: HumanGame) -> None:
    state: dict[str, Prompt] = {}
    sender = asyncio.create_task(_send_prompts(ws, hg, state))
    try:
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                break
            prompt = state.get("act")
            if prompt is None or not prompt.answer(msg.data.encode()):
                await ws.send_str("late\n")
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sender


async def _send_prompts(ws: web.WebSocketResponse, hg: HumanGame, state: dict[str, Prompt]) -> None:
    while True:
        prompt = await hg.seat.prompts.get()
        if prompt.kind == "act":
            state["act"] = prompt
        await ws.send_str(f"{prompt.kind}\n{prompt.body.decode()}")
        if prompt.kind == "act":
            watch = asyncio.create_task(_closed(ws, prompt))
            _watches.add(watch)
            watch.add_done_callback(_watches.discard)
        if prompt.kind == "end":
            await hg.over.wait()
            await ws.send_str(f"replay\n/team/practice/{hg.game.id}")
            await ws.close()
            return


async def _closed(ws: web.WebSocketResponse, prompt: Prompt) -> None:
    """Tell the page when a request closes without its answer (its time ran out)."""
    await prompt.settled()
    if not prompt.answered and not ws.closed:
        with contextlib.suppress(ConnectionError):
            await ws.send_str(f"closed\n{prompt.request_id}")
