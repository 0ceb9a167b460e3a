"""Teams: the admin adds them and lists them; a team submits its bot and reads it back."""

from __future__ import annotations

from aiohttp import web

from ...tournament.league import LeagueError
from ..auth import require_admin, require_team
from ..data import submission_info
from ..db import ServiceDB, Submission, Team
from ..errors import fail
from ..runs import house_bots
from ..schemas import BotSubmission, NewTeam, OwnBot, Submitted, TeamCreated, TeamInfo
from ..state import DB, SETTINGS
from ..validation import check_name, check_submission, read_body
from .common import competition_of, json_response, team_of


def _teams_with_bots(db: ServiceDB, cid: int) -> list[TeamInfo]:
    return [
        TeamInfo(id=t.id, name=t.name, created_at=t.created_at, submissions=db.count_submissions(t.id),
                 bot=submission_info(db.latest_submission(t.id)))
        for t in db.teams(cid)
    ]


async def list_teams(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    return json_response(await request.app[DB].call(_teams_with_bots, comp.id))


async def new_team(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, NewTeam)
    db = request.app[DB]
    name = check_name(body.name, "name", 40)
    if name.startswith("__team_slot_"):
        fail(422, "'name': names starting with '__team_slot_' are reserved", "name")
    if await db.call(ServiceDB.team_named, comp.id, name) is not None:
        fail(422, f"a team named {name!r} exists already in this competition", "name")
    try:
        house = house_bots(comp.league_toml)
    except LeagueError:
        house = []
    if name in house:
        fail(422, f"{name!r} is the name of a house bot of this competition", "name")
    team, token = await db.call(ServiceDB.add_team, comp.id, name)
    return json_response(TeamCreated(id=team.id, name=team.name, competition=comp.id, token=token), 201)


def _submit(db: ServiceDB, team: Team, body: BotSubmission, kind: str, url: str | None, image: str | None,
            limit: tuple[int, float]) -> tuple[Submission | None, float]:
    """The new submission, or None and the seconds to wait (rate limit)."""
    sub = db.add_submission(team.id, kind=kind, url=url, image=image, secret=body.secret, note=body.note,
                            rate_limit=limit)
    return sub, 0.0 if sub is not None else db.retry_after(team.id, limit[1])


async def submit_bot(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    body = await read_body(request, BotSubmission)
    kind, url, image = check_submission(body)
    settings = request.app[SETTINGS]
    limit = (settings.submissions_per_window, settings.window_s)
    sub, wait = await request.app[DB].call(_submit, team, body, kind, url, image, limit)
    if sub is None:
        fail(429, f"too many submissions: at most {settings.submissions_per_window} every "
                  f"{settings.window_s:g} s; try again in {wait:.0f} s",
             headers={"Retry-After": str(int(wait + 0.999))})
    info = submission_info(sub)
    assert info is not None
    return json_response(Submitted(team=team.id, bot=team.name, id=info.id, kind=info.kind, url=info.url,
                                   image=info.image, has_secret=info.has_secret,
                                   note="the next run plays this bot", created_at=info.created_at), 201)


def _own_bot(db: ServiceDB, team: Team) -> OwnBot:
    return OwnBot(team=team.id, name=team.name, submissions=db.count_submissions(team.id),
                  bot=submission_info(db.latest_submission(team.id)))


async def own_bot(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    return json_response(await request.app[DB].call(_own_bot, team))
