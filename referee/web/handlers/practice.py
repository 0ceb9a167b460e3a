"""A team's practice games (issue 26): ask for one with the opponents
picked, list them, open one's replay from the team's seat.

The API with the team's bearer token (the admin's too, to read), the page
``/team/practice`` with the signed-in session. Private: a game of another
team, asked for with any other token or session, is not there (404).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from ...replay import ReplayError
from ...service.errors import Conflict, RateLimited
from ...service.store import ServiceDB, Team
from ...service.store.practice import PracticeGame, get_game, limits_of, team_games
from ...service.store.practice import add_game as _add_game
from ...tournament.results import replay_path
from .. import pages
from ..app_state import DB, SETTINGS
from ..auth import bearer, identify, require_team
from ..errors import fail
from ..practice import (
    IN_FLIGHT_RETRY_S,
    PRACTICE,
    PracticeList,
    PracticeRequest,
    choices,
    gone_images,
    info,
)
from ..practice import seats_for as _seats_for
from ..sessions import check_csrf, same_origin
from ..validation import path_int, read_body
from .common import competition_of, json_response, team_of
from .diagnostics import _own_frames, bot_logs
from .team_pages import signed_in_or_login

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="referee"'}


def _new_game(
    db: ServiceDB, team: Team, picks: list[str], per_hour: int, gone: frozenset[str]
) -> PracticeGame:
    """The game asked for; :class:`RateLimited` when the limits say no (in one go, in the db's thread)."""
    now = time.time()
    flying, times = limits_of(db, team.id, now - 3600)
    if flying:
        raise RateLimited(
            "your practice game is still being played: one at a time per team, ask again once it is over",
            retry_after=IN_FLIGHT_RETRY_S,
        )
    if len(times) >= per_hour:
        wait = int(times[0] + 3600 - now + 0.999)
        raise RateLimited(
            f"{per_hour} practice games an hour per team: the next one may be asked for in {wait} s",
            retry_after=wait,
        )
    return _add_game(db, team, _seats_for(db, team, picks, gone), now)


async def ask(app: web.Application, team: Team, picks: list[str]) -> PracticeGame:
    per_hour = app[SETTINGS].practice_per_hour
    if per_hour <= 0:
        raise Conflict("practice games are off on this server (referee serve --practice-per-hour 0)")
    gone = await gone_images(app, team)  # an earlier version whose image was pruned cannot play
    got = await app[DB].call(_new_game, team, picks, per_hour, gone)
    app[PRACTICE].wake.set()
    return got


async def _reader(request: web.Request, team: Team) -> None:
    """The team's own token, or the admin's; anyone else is told there is nothing here (404)."""
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <team token>'", headers=_CHALLENGE)
    db = request.app[DB]
    if await db.call(ServiceDB.team_token_matches, team.id, token):
        return
    who = await db.call(identify, token)
    if who.admin:
        return
    if who.team is None:
        fail(401, "unknown token", headers=_CHALLENGE)
    fail(404, f"no practice games of team {team.id} for this token: a team's practice games are its own")


async def _listing(app: web.Application, team: Team) -> PracticeList:
    gone = await gone_images(app, team)  # not offered: an earlier version whose image was pruned

    def read(db: ServiceDB) -> PracticeList:
        try:
            allowed, wanted = choices(db, team, gone)
        except Exception:  # noqa: BLE001 - a broken league file: nothing to pick (asking says why)
            allowed, wanted = [], 0
        return PracticeList(
            games=[info(g) for g in team_games(db, team.id)],
            choices=allowed,
            opponents=wanted,
            per_hour=app[SETTINGS].practice_per_hour,
        )

    return await app[DB].call(read)


async def _own_game(request: web.Request, team: Team) -> PracticeGame:
    game = await request.app[DB].call(get_game, path_int(request, "pid"))
    if game is None or game.team_id != team.id:
        fail(404, f"no practice game {request.match_info['pid']} of team {team.id}")
    return game


async def _frames(game: PracticeGame, index: int) -> dict[str, Any]:
    if game.status != "finished":
        fail(409, f"practice game {game.id} is {game.status}: its replay comes once it is played")
    if index not in {r.index for r in game.results}:
        fail(
            404,
            f"practice game {game.id} has no game {index} (its games: "
            f"{', '.join(str(r.index) for r in game.results)})",
        )
    path = await asyncio.to_thread(replay_path, game.out_dir, index)
    if path is None or not path.exists():
        fail(404, f"practice game {game.id} has no replay")
    seat = next(r.seat for r in game.results if r.index == index)
    own = game.seats[0].name  # the team's newest version, as named in the game
    try:  # from the team's seat, with what its bot printed at each of its moves (issue 26, item 5)
        return await asyncio.to_thread(_own_frames, path, seat, bot_logs(Path(game.out_dir), own))
    except ReplayError as e:
        fail(500, f"the replay of practice game {game.id} cannot be read: {e}")


def _index(request: web.Request) -> int:
    """``?game=`` (default 0): which game of a practice game's deal."""
    text = request.query.get("game", "0")
    if not text.isdigit() or len(text) > 6:
        fail(404, f"no game {text!r}: games are numbered from 0")
    return int(text)


# ------------------------------------------------------------ the API


async def api_ask(request: web.Request) -> web.Response:
    """``POST .../teams/{tid}/practice`` ``{"opponents": [...]}`` with the team's token: 202 and the game queued."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    body = await read_body(request, PracticeRequest)
    return json_response(info(await ask(request.app, team, body.opponents)), 202)


async def api_list(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await _reader(request, team)
    return json_response(await _listing(request.app, team))


async def api_game(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await _reader(request, team)
    return json_response(info(await _own_game(request, team)))


async def api_replay(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await _reader(request, team)
    return json_response(await _frames(await _own_game(request, team), _index(request)))


# ------------------------------------------------------------ the pages


async def practice_page(request: web.Request) -> web.Response:
    who = await signed_in_or_login(request)
    listing = await _listing(request.app, who.team)
    return pages.render(
        request,
        "practice.html",
        {"team": who.team, "csrf": who.session.csrf, "listing": listing, "retry": IN_FLIGHT_RETRY_S},
    )


async def practice_submit(request: web.Request) -> web.StreamResponse:
    """The page's form: one opponent per seat besides the team's own."""
    same_origin(request)
    who = await signed_in_or_login(request)
    if request.content_length is not None and request.content_length > 16384:
        fail(413, "the practice form is too large")
    form = await request.post()
    check_csrf(who.session.csrf, str(form.get("csrf", "")))
    picks = [str(v) for v in form.getall("opponent", []) if str(v)]
    await ask(request.app, who.team, picks)
    raise web.HTTPSeeOther("/team/practice")


async def practice_replay(request: web.Request) -> web.StreamResponse:
    """A practice game's replay, from the team's seat (``?seat=N``)."""
    who = await signed_in_or_login(request)
    game = await _own_game(request, who.team)
    index = _index(request)
    result = next((r for r in game.results if r.index == index), None)
    if "seat" not in request.query and result is not None:
        raise web.HTTPSeeOther(f"/team/practice/{game.id}?game={index}&seat={result.seat}")
    data = await _frames(game, index)
    comp = await request.app[DB].call(ServiceDB.competition, game.competition_id)
    return pages.render(
        request,
        "replay.html",
        {
            "data": data,
            "title": f"practice game {game.id} — {who.team.name}",
            "standalone": False,
            "comp": comp,
            "run": None,
            "idx": index,
            "practice": {
                "id": game.id,
                "json": f"/api/competitions/{game.competition_id}/teams/{game.team_id}"
                f"/practice/{game.id}/replay?game={index}",
            },
        },
    )
