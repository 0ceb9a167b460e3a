"""A team's practice games (issue 26): ask for one with the opponents
picked, list them, open one's replay from the team's seat.

The API with the team's bearer token (the admin's too, to read), the page
``/team/practice`` with the signed-in session. Private: a game of another
team, asked for with any other token or session, is not there (404).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from ...replay import ReplayError
from ...service.practice import (
    IN_FLIGHT_RETRY_S,
    Choice,
    PracticeList,
    PracticeRequest,
    choices,
    gone_images,
    info,
)
from ...service.store import ServiceDB, Team
from ...service.store.practice import PracticeGame, get_game, team_games
from .. import pages
from ..app_state import ROOM
from ..auth import bearer, identify, require_team
from ..data import kept_replay, replay_file
from ..errors import fail
from ..sessions import check_csrf, same_origin
from ..validation import path_int, read_body
from .common import competition_of, json_response, team_of
from .diagnostics import _own_frames, bot_logs
from .team_pages import signed_in_or_login

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="referee"'}


async def _reader(request: web.Request, team: Team) -> None:
    """The team's own token, or the admin's; anyone else is told there is nothing here (404)."""
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <team token>'", headers=_CHALLENGE)
    db = request.app[ROOM].db
    if await db.call(ServiceDB.team_token_matches, team.id, token):
        return
    who = await db.call(identify, token)
    if who.admin:
        return
    if who.team is None:
        fail(401, "unknown token", headers=_CHALLENGE)
    fail(404, f"no practice games of team {team.id} for this token: a team's practice games are its own")


async def _listing(app: web.Application, team: Team) -> PracticeList:
    gone = await gone_images(app[ROOM], team)  # not offered: an earlier version whose image was pruned

    def read(db: ServiceDB) -> PracticeList:
        try:
            allowed, wanted = choices(db, team, gone)
        except Exception:  # noqa: BLE001 - a broken league file: nothing to pick (asking says why)
            allowed, wanted = [], 0
        return PracticeList(
            games=[info(g) for g in team_games(db, team.id)],
            choices=allowed,
            opponents=wanted,
            per_hour=app[ROOM].settings.practice_per_hour,
        )

    return await app[ROOM].db.call(read)


async def _own_game(request: web.Request, team: Team) -> PracticeGame:
    game = await request.app[ROOM].db.call(get_game, path_int(request, "pid"))
    if game is None or game.team_id != team.id:
        fail(404, f"no practice game {request.match_info['pid']} of team {team.id}")
    return game


async def _frames(app: web.Application, game: PracticeGame, index: int) -> dict[str, Any]:
    if game.status != "finished":
        fail(409, f"practice game {game.id} is {game.status}: its replay comes once it is played")
    if index not in {r.index for r in game.results}:
        fail(
            404,
            f"practice game {game.id} has no game {index} (its games: "
            f"{', '.join(str(r.index) for r in game.results)})",
        )
    found = await asyncio.to_thread(replay_file, game.out_dir, index)
    if found is None:
        fail(404, f"practice game {game.id} has no replay")
    path, mtime = found
    seat = next(r.seat for r in game.results if r.index == index)
    own = game.seats[0].name  # the team's newest version, as named in the game
    # from the team's seat, with what its bot printed at each of its moves (issue 26, item 5); a
    # finished game's logs no longer change either: kept with the runs' replays, by file and seat
    try:
        return await kept_replay(
            app,
            (f"{path}#seat={seat}", mtime),
            lambda: _own_frames(path, seat, bot_logs(Path(game.out_dir), own)),
        )
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
    return json_response(info(await request.app[ROOM].ask_practice(team, body.opponents)), 202)


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
    return json_response(await _frames(request.app, await _own_game(request, team), _index(request)))


# ------------------------------------------------------------ the pages


async def practice_page(request: web.Request) -> web.Response:
    who = await signed_in_or_login(request)
    listing = await _listing(request.app, who.team)
    gone = await gone_images(request.app[ROOM], who.team)

    def seat_choices(db: ServiceDB) -> list[Choice]:  # a team member seated: its current version too
        try:
            return choices(db, who.team, gone, human=True)[0]
        except Exception:  # noqa: BLE001 - a broken league file: nothing to pick (asking says why)
            return []

    room = request.app[ROOM]
    return pages.render(
        request,
        "practice.html",
        {
            "team": who.team,
            "csrf": who.session.csrf,
            "listing": listing,
            "retry": IN_FLIGHT_RETRY_S,
            "seat_choices": await room.db.call(seat_choices),
            "seated": sorted(pid for pid, hg in room.human_games.items() if hg.team_id == who.team.id),
        },
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
    await request.app[ROOM].ask_practice(who.team, picks)
    raise web.HTTPSeeOther("/team/practice")


async def practice_replay(request: web.Request) -> web.StreamResponse:
    """A practice game's replay, from the team's seat (``?seat=N``)."""
    who = await signed_in_or_login(request)
    game = await _own_game(request, who.team)
    index = _index(request)
    result = next((r for r in game.results if r.index == index), None)
    if "seat" not in request.query and result is not None:
        raise web.HTTPSeeOther(f"/team/practice/{game.id}?game={index}&seat={result.seat}")
    data = await _frames(request.app, game, index)
    comp = await request.app[ROOM].db.call(ServiceDB.competition, game.competition_id)
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
