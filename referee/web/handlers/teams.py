"""Teams: the admin adds them and lists them; a team submits its bot and reads it back."""

from __future__ import annotations

from aiohttp import web

from ...service.disk import begin_upload
from ...service.pipeline import team_dir
from ...service.store import ServiceDB, Submission, Team
from ..app_state import ROOM
from ..auth import require_admin, require_team
from ..data import numbered, submission_detail, submission_info
from ..errors import fail
from ..schemas import (
    BotSubmission,
    NewTeam,
    OwnBot,
    Submitted,
    TeamChanged,
    TeamCreated,
    TeamInfo,
    TeamRename,
)
from ..uploads import check_length, new_upload_path, save_body
from ..validation import check_extras, check_submission, path_int, read_body
from .common import competition_of, json_response, team_of


def _teams_with_bots(db: ServiceDB, cid: int) -> list[TeamInfo]:
    return [
        TeamInfo(
            id=t.id,
            name=t.name,
            created_at=t.created_at,
            submissions=db.count_submissions(t.id),
            bot=numbered(db, db.latest_submission(t.id)),
            withdrawn_at=t.withdrawn_at,
        )
        for t in db.teams(cid)
    ]


async def list_teams(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    return json_response(await request.app[ROOM].db.call(_teams_with_bots, comp.id))


async def new_team(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, NewTeam)
    team, token = await request.app[ROOM].add_team(comp.id, body.name)
    return json_response(TeamCreated(id=team.id, name=team.name, competition=comp.id, token=token), 201)


def _submitted(team: Team, sub: Submission, version: int) -> Submitted:
    info = submission_info(sub, version)
    assert info is not None
    return Submitted(
        team=team.id,
        bot=team.name,
        id=info.id,
        kind=info.kind,
        url=info.url,
        image=info.image,
        has_secret=info.has_secret,
        status=sub.status,
        note="queued for its admission check: once accepted, the next run plays it",
        created_at=info.created_at,
        version=version,
    )


async def submit_bot(request: web.Request) -> web.Response:
    """A URL (the team) or an image on the server (the admin, for a team)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    admin = await require_team(request, team, admin_too=True)
    body = await read_body(request, BotSubmission)
    kind, url, image = check_submission(body, admin=admin)
    if kind == "url" and admin:
        fail(403, "bots are submitted with the team's own token, not the admin token")
    sub = await request.app[ROOM].submit(
        team, kind=kind, url=url, image=image, secret=body.secret, note=body.note
    )
    version = await request.app[ROOM].db.call(ServiceDB.submission_number, sub.id)
    return json_response(_submitted(team, sub, version), 201)


UPLOAD_KINDS = {"archive": ".tar", "source": ".archive"}


async def upload_bot(request: web.Request) -> web.Response:
    """``POST .../uploads?kind=archive`` (the output of ``docker save``) or
    ``?kind=source`` (a .zip or .tar.gz of a Python or Node bot): the body is
    the file, streamed to disk with the size cap. The bot's secret and a
    note come as the headers ``X-Bot-Secret`` and ``X-Note`` (a query string
    would put the secret in the access log)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    kind = request.query.get("kind", "")
    if kind not in UPLOAD_KINDS:
        fail(
            422,
            f"'kind' must be 'archive' (the output of docker save) or 'source' (a .zip or .tar.gz), "
            f"got {kind[:40]!r}",
            "kind",
        )
    request.app[ROOM].verify_uploads(kind)  # before a byte is read: the install lacks Docker's client
    secret = request.headers.get("X-Bot-Secret")
    note = request.headers.get("X-Note", "")
    check_extras(secret, note)
    settings = request.app[ROOM].settings
    check_length(request, settings.max_upload)
    # the slot, the disk's floor and the quota before a byte is read (issue 24)
    guard = await begin_upload(request.app[ROOM], team, request.content_length)
    try:
        path = new_upload_path(
            team_dir(request.app[ROOM].db.data_dir, team.id) / "uploads", UPLOAD_KINDS[kind]
        )
        await save_body(request, path, settings.max_upload, guard.check)
        sub = await request.app[ROOM].submit(
            team, kind=kind, secret=secret, note=note, upload=path, slot=guard.slot
        )
    finally:
        await guard.release()
    version = await request.app[ROOM].db.call(ServiceDB.submission_number, sub.id)
    return json_response(_submitted(team, sub, version), 201)


def _own_bot(db: ServiceDB, team: Team) -> OwnBot:
    return OwnBot(
        team=team.id,
        name=team.name,
        submissions=db.count_submissions(team.id),
        bot=numbered(db, db.latest_submission(team.id)),
        playing=numbered(db, db.playing_submission(team.id)),
    )


async def own_bot(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    return json_response(await request.app[ROOM].db.call(_own_bot, team))


async def list_submissions(request: web.Request) -> web.Response:
    """The team's submissions, newest first, with status and reason (its own token)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    subs = await request.app[ROOM].db.call(ServiceDB.numbered_submissions, team.id)
    return json_response([submission_info(s, v) for s, v in subs])


async def own_submission(request: web.Request, team: Team) -> Submission:
    sub = await request.app[ROOM].db.call(ServiceDB.submission, path_int(request, "sid"))
    if sub is None or sub.team_id != team.id:
        fail(404, f"no submission {request.match_info['sid']} of team {team.id}")
    return sub


async def get_submission(request: web.Request) -> web.Response:
    """One submission with its admission report and build log (its own token)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    sub = await own_submission(request, team)
    version = await request.app[ROOM].db.call(ServiceDB.submission_number, sub.id)
    return json_response(submission_detail(sub, version))


# ------------------------------------------------- changing a team (issue 25)
#
# A rename keeps the team's id, token, sessions and submissions: runs started
# after it play under the new name (in an open ladder its version in play
# enters again under the new name, the old entry retiring with its games);
# runs played before keep the name they were played under. A withdrawn team
# plays no more (its ladder entries retire, no run or final takes it), its
# token and sessions stop at once; its history, replays and pages stay. A
# new token replaces the old one's hash: the old token and every session
# signed in with it stop at once.


async def patch_team(request: web.Request) -> web.Response:
    """``PATCH /api/competitions/{cid}/teams/{tid}`` ``{"name": NEW}`` (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await team_of(request, comp)
    body = await read_body(request, TeamRename)
    team = await request.app[ROOM].rename_team(team, body.name)
    return json_response(
        TeamChanged(id=team.id, name=team.name, competition=comp.id, withdrawn_at=team.withdrawn_at)
    )


async def post_withdraw(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/teams/{tid}/withdraw`` (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await request.app[ROOM].withdraw_team(await team_of(request, comp))
    return json_response(
        TeamChanged(id=team.id, name=team.name, competition=comp.id, withdrawn_at=team.withdrawn_at)
    )


async def post_token(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/teams/{tid}/token`` (the admin): the new token, shown this once."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await team_of(request, comp)
    token = await request.app[ROOM].renew_token(team)
    resp = json_response(TeamChanged(id=team.id, name=team.name, competition=comp.id, token=token), 201)
    resp.headers["Cache-Control"] = "no-store"
    return resp
