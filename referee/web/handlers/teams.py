"""Teams: the admin adds them and lists them; a team submits its bot and reads it back."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from ...service.store import Competition, ServiceDB, SlotRevoked, Submission, Team
from ...tournament.league import LeagueError
from ..admission_queue import PIPELINE, team_dir
from ..app_state import DB, SETTINGS
from ..auth import require_admin, require_team
from ..boardcache import forget
from ..data import numbered, submission_detail, submission_info
from ..errors import fail
from ..run_start import containers_enabled, house_bots
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
from ..storage import begin_upload
from ..uploads import check_length, new_upload_path, save_body
from ..validation import check_extras, check_name, check_submission, path_int, read_body
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
    return json_response(await request.app[DB].call(_teams_with_bots, comp.id))


async def check_team_name(request: web.Request, comp: Competition, name: str) -> str:
    """A new team's name in `comp`, or 422 saying what is wrong with it."""
    db = request.app[DB]
    name = check_name(name, "name", 40)
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
    return name


async def new_team(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, NewTeam)
    name = await check_team_name(request, comp, body.name)
    team, token = await request.app[DB].call(ServiceDB.add_team, comp.id, name)
    forget(request.app, comp.id)
    return json_response(TeamCreated(id=team.id, name=team.name, competition=comp.id, token=token), 201)


async def make_submission(
    request: web.Request,
    team: Team,
    *,
    kind: str,
    url: str | None = None,
    image: str | None = None,
    secret: str | None = None,
    note: str = "",
    upload: Path | None = None,
    slot: str | None = None,
) -> Submission:
    """Record a submission and queue it for its admission check; 429 (and
    the upload deleted) over the team's rate. `slot`: the upload slot its
    file was streamed under (:func:`referee.web.storage.begin_upload`), used up here."""
    settings = request.app[SETTINGS]
    limit = (settings.submissions_per_window, settings.window_s)
    db = request.app[DB]
    comp = await db.call(ServiceDB.competition, team.competition_id)
    if comp is not None and comp.phase in ("frozen", "final"):
        if upload is not None:
            upload.unlink(missing_ok=True)
        fail(
            409,
            f"submissions are closed: the competition is {comp.phase} (the final plays the versions "
            "accepted before the freeze)",
        )
    try:
        sub = await db.call(
            ServiceDB.add_submission,
            team.id,
            kind=kind,
            url=url,
            image=image,
            secret=secret,
            note=note,
            rate_limit=limit,
            upload=None if upload is None else str(upload),
            slot=slot,
        )
    except SlotRevoked:
        if upload is not None:
            upload.unlink(missing_ok=True)
        fail(
            401,
            "the upload was not stored: the team's token was replaced (or the team withdrawn) while it "
            "streamed, and the old token no longer submits. Upload again with the team's new token (on "
            "the team page: sign in again with it)",
        )
    if sub is None:
        if upload is not None:
            upload.unlink(missing_ok=True)
        wait = await db.call(ServiceDB.retry_after, team.id, limit[1])
        fail(
            429,
            f"too many submissions: at most {settings.submissions_per_window} every "
            f"{settings.window_s:g} s; try again in {wait:.0f} s",
            headers={"Retry-After": str(int(wait + 0.999))},
        )
    request.app[PIPELINE].enqueue(sub.id)
    return sub


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
    sub = await make_submission(
        request, team, kind=kind, url=url, image=image, secret=body.secret, note=body.note
    )
    version = await request.app[DB].call(ServiceDB.submission_number, sub.id)
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
    if not containers_enabled():
        fail(
            422,
            "uploads are not enabled on this server (container bots are not available here): "
            "submit the 'url' of a running bot instead",
            "kind",
        )
    secret = request.headers.get("X-Bot-Secret")
    note = request.headers.get("X-Note", "")
    check_extras(secret, note)
    settings = request.app[SETTINGS]
    check_length(request, settings.max_upload)
    # the slot, the disk's floor and the quota before a byte is read (issue 24)
    guard = await begin_upload(request.app, team, request.content_length)
    try:
        path = new_upload_path(team_dir(request.app[DB].data_dir, team.id) / "uploads", UPLOAD_KINDS[kind])
        await save_body(request, path, settings.max_upload, guard.check)
        sub = await make_submission(
            request, team, kind=kind, secret=secret, note=note, upload=path, slot=guard.slot
        )
    finally:
        await guard.release()
    version = await request.app[DB].call(ServiceDB.submission_number, sub.id)
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
    return json_response(await request.app[DB].call(_own_bot, team))


async def list_submissions(request: web.Request) -> web.Response:
    """The team's submissions, newest first, with status and reason (its own token)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    subs = await request.app[DB].call(ServiceDB.numbered_submissions, team.id)
    return json_response([submission_info(s, v) for s, v in subs])


async def own_submission(request: web.Request, team: Team) -> Submission:
    sub = await request.app[DB].call(ServiceDB.submission, path_int(request, "sid"))
    if sub is None or sub.team_id != team.id:
        fail(404, f"no submission {request.match_info['sid']} of team {team.id}")
    return sub


async def get_submission(request: web.Request) -> web.Response:
    """One submission with its admission report and build log (its own token)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    sub = await own_submission(request, team)
    version = await request.app[DB].call(ServiceDB.submission_number, sub.id)
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


async def _reconcile(request: web.Request, cid: int) -> None:
    """An open ladder takes the change in now (a withdrawn team's entries retire, a renamed one's re-enter)."""
    from ..ladder_service import submission_accepted

    await submission_accepted(request.app, cid)
    forget(request.app, cid)


async def rename_team(request: web.Request, comp: Competition, team: Team, name: str) -> Team:
    """The team under its new name, checked as a new team's is (422 naming 'name')."""
    name = await check_team_name(request, comp, name)
    await request.app[DB].call(ServiceDB.rename_team, team.id, name)
    await _reconcile(request, comp.id)
    renamed = await request.app[DB].call(ServiceDB.team, team.id)
    assert renamed is not None
    return renamed


async def withdraw_team(request: web.Request, comp: Competition, team: Team) -> Team:
    await request.app[DB].call(ServiceDB.withdraw_team, team.id)
    await _reconcile(request, comp.id)
    gone = await request.app[DB].call(ServiceDB.team, team.id)
    assert gone is not None
    return gone


async def renew_token(request: web.Request, team: Team) -> str:
    """A new token for the team (409 for a withdrawn team: it has none)."""
    if team.withdrawn_at is not None:
        fail(409, f"team {team.name!r} is withdrawn: a withdrawn team has no token")
    return await request.app[DB].call(ServiceDB.new_team_token, team.id)


async def patch_team(request: web.Request) -> web.Response:
    """``PATCH /api/competitions/{cid}/teams/{tid}`` ``{"name": NEW}`` (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await team_of(request, comp)
    body = await read_body(request, TeamRename)
    team = await rename_team(request, comp, team, body.name)
    return json_response(
        TeamChanged(id=team.id, name=team.name, competition=comp.id, withdrawn_at=team.withdrawn_at)
    )


async def post_withdraw(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/teams/{tid}/withdraw`` (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await withdraw_team(request, comp, await team_of(request, comp))
    return json_response(
        TeamChanged(id=team.id, name=team.name, competition=comp.id, withdrawn_at=team.withdrawn_at)
    )


async def post_token(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/teams/{tid}/token`` (the admin): the new token, shown this once."""
    await require_admin(request)
    comp = await competition_of(request)
    team = await team_of(request, comp)
    token = await renew_token(request, team)
    resp = json_response(TeamChanged(id=team.id, name=team.name, competition=comp.id, token=token), 201)
    resp.headers["Cache-Control"] = "no-store"
    return resp
