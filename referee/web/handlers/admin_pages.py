"""The admin's pages (issue 15, part): sign in with the admin token, create a
competition from a form (the league's errors shown with their line, the text
kept), add teams in bulk (one name a line; their tokens shown once, with a
CSV to download), and every team's bot status. Everything here is also in
the JSON API; the checks are the API's own."""

from __future__ import annotations

import io
from urllib.parse import quote

from aiohttp import web

from ...service.errors import ServiceError
from ...service.store import Competition, Run, ServiceDB, Team
from ...textsafe import Verbatim, csv_writer
from ...tournament.ladder import ladder_entries
from .. import grading, pages
from ..app_state import DB
from ..boardcache import forget
from ..data import numbered, submission_detail, team_standings
from ..deadlines import page_context
from ..errors import fail, message_of, status_of
from ..ladder_service import ladder_waiting
from ..paging import query_page
from ..schemas import LeagueVersionInfo
from ..sessions import (
    ADMIN_COOKIE,
    AdminSignedIn,
    admin_signed_in,
    check_csrf,
    same_origin,
    set_admin_cookie,
)
from .common import competition_of, team_of
from .competitions import EDIT_RULE, create_competition, edit_league, league_history
from .teams import check_team_name, own_submission, rename_team, renew_token, withdraw_team

#: The most teams one paste may add.
MAX_TEAMS = 500


async def require_signed_in(request: web.Request) -> AdminSignedIn:
    who = await admin_signed_in(request)
    if who is None:
        raise web.HTTPSeeOther("/admin/login")
    return who


async def _form(request: web.Request, limit: int = 256 * 1024) -> dict[str, str]:
    if request.content_length is not None and request.content_length > limit:
        fail(413, f"the form is too large: at most {limit} bytes")
    form = await request.post()
    return {k: str(v) for k, v in form.items() if isinstance(v, str)}


async def login_page(request: web.Request) -> web.Response:
    if await admin_signed_in(request) is not None:
        raise web.HTTPSeeOther("/admin")
    return pages.render(request, "admin_login.html", {"error": None})


async def login(request: web.Request) -> web.StreamResponse:
    same_origin(request)
    form = await _form(request, 4096)
    token = form.get("token", "").strip()
    if not token or not await request.app[DB].call(ServiceDB.is_admin, token):
        response = pages.render(request, "admin_login.html", {"error": "that is not the admin token"})
        response.set_status(401)
        return response
    sid, _ = await request.app[DB].call(ServiceDB.new_admin_session)
    response = web.HTTPSeeOther("/admin")
    set_admin_cookie(request, response, sid)
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    same_origin(request)
    who = await require_signed_in(request)
    check_csrf(who.csrf, (await _form(request)).get("csrf"))
    await request.app[DB].call(ServiceDB.end_admin_session, who.sid)
    response = web.HTTPSeeOther("/admin/login")
    response.del_cookie(ADMIN_COOKIE, path="/")
    raise response


def _home(
    request: web.Request,
    who: AdminSignedIn,
    comps: list[Competition],
    *,
    error: str | None = None,
    name: str = "",
    league: str = "",
) -> web.Response:
    response = pages.render(
        request,
        "admin.html",
        {"csrf": who.csrf, "competitions": comps, "error": error, "name": name, "league": league},
    )
    if error:
        response.set_status(422)
    return response


async def home(request: web.Request) -> web.Response:
    who = await require_signed_in(request)
    return _home(request, who, await request.app[DB].call(ServiceDB.competitions))


async def new_competition(request: web.Request) -> web.StreamResponse:
    """The form's competition: on an error, the page again with the error
    (the league's line named) and what was typed kept."""
    same_origin(request)
    who = await require_signed_in(request)
    form = await _form(request)
    check_csrf(who.csrf, form.get("csrf"))
    name, league = form.get("name", ""), form.get("league", "")
    try:
        comp = await create_competition(request, name, league)
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) != 422:
            raise
        comps = await request.app[DB].call(ServiceDB.competitions)
        return _home(request, who, comps, error=message_of(e), name=name, league=league)
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}")


def _teams_view(db: ServiceDB, cid: int) -> list[dict[str, object]]:
    """Each team's newest submission, its version in play, and that
    version's standing in the ladder (its newest entry: active, dropped...)."""
    ladder = db.latest_run_of(cid, "ladder")
    # each team's version in play, else its newest (an earlier version is back in play when a new one is dropped)
    found = ladder_entries(ladder.out_dir) if ladder is not None else []
    # by team id through each entry's submission, never by a name (issue 32: a rename is a label)
    who = grading.whose(db, ladder) if ladder is not None else {}
    entries = {
        who[e.name].team.id: e for e in sorted(found, key=lambda e: e.status == "active") if e.name in who
    }
    out: list[dict[str, object]] = []
    for t in db.teams(cid):
        latest = db.latest_submission(t.id)
        playing = db.playing_submission(t.id)
        out.append(
            {
                "team": t,
                "latest": numbered(db, latest),
                "playing": numbered(db, playing),
                "count": db.count_submissions(t.id),
                "entry": entries.get(t.id),
            }
        )
    return out


def _competition_page(
    request: web.Request,
    who: AdminSignedIn,
    comp: Competition,
    teams: list[dict[str, object]],
    *,
    error: str | None = None,
    names: str = "",
    created: list[tuple[int, str, str]] | None = None,
    final: Run | None = None,
    league_error: str | None = None,
    league_text: str | None = None,
    versions: list[LeagueVersionInfo] | None = None,
) -> web.Response:
    csv_href = None
    if created:
        buf = io.StringIO()
        writer = csv_writer(buf)  # a team named =HYPERLINK(...) is text to a spreadsheet
        writer.writerow(["team_id", "team", "token"])
        writer.writerows((tid, name, Verbatim(token)) for tid, name, token in created)
        csv_href = "data:text/csv;charset=utf-8," + quote(buf.getvalue())
    response = pages.render(
        request,
        "admin_competition.html",
        {
            "csrf": who.csrf,
            "comp": comp,
            "teams": teams,
            "error": error,
            "names": names,
            "created": created or [],
            "csv_href": csv_href,
            "final": final,
            "waiting": ladder_waiting(request.app, comp.id),
            "league_error": league_error,
            "league_text": comp.league_toml if league_text is None else league_text,
            "versions": versions or [],
            "edit_rule": EDIT_RULE,
        },
    )
    response.headers["Cache-Control"] = "no-store"  # tokens may be on it
    if error or league_error:
        response.set_status(422)
    return response


async def competition_page(request: web.Request) -> web.Response:
    who = await require_signed_in(request)
    comp = await competition_of(request)
    db = request.app[DB]
    final = await db.call(ServiceDB.latest_run_of, comp.id, "final")
    await page_context(request, comp)  # the deadlines form
    return _competition_page(
        request,
        who,
        comp,
        await db.call(_teams_view, comp.id),
        final=final,
        versions=await db.call(league_history, comp.id),
    )


async def add_teams(request: web.Request) -> web.Response:
    """One team a line; all are added or none (each problem named by its line)."""
    same_origin(request)
    who = await require_signed_in(request)
    comp = await competition_of(request)
    form = await _form(request)
    check_csrf(who.csrf, form.get("csrf"))
    text = form.get("names", "")
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    problems: list[str] = []
    if not lines:
        problems.append("paste the teams' names, one a line")
    if len(lines) > MAX_TEAMS:
        problems.append(f"{len(lines)} names: at most {MAX_TEAMS} at once")
    seen: dict[str, int] = {}
    names = []
    for number, name in lines[:MAX_TEAMS]:
        if name in seen:
            problems.append(f"line {number}: {name!r} is on line {seen[name]} already")
            continue
        seen[name] = number
        try:
            names.append(await check_team_name(request, comp, name))
        except (web.HTTPException, ServiceError) as e:
            if status_of(e) != 422:
                raise
            problems.append(f"line {number}: {message_of(e)}")
    db = request.app[DB]
    if problems:
        teams = await db.call(_teams_view, comp.id)
        return _competition_page(
            request,
            who,
            comp,
            teams,
            error="; ".join(problems[:20]),
            names=text,
            versions=await db.call(league_history, comp.id),
        )
    made = await db.call(ServiceDB.add_teams, comp.id, names)
    forget(request.app, comp.id)
    teams = await db.call(_teams_view, comp.id)
    return _competition_page(
        request,
        who,
        comp,
        teams,
        created=[(t.id, t.name, token) for t, token in made],
        versions=await db.call(league_history, comp.id),
    )


# ------------------------------------------------- editing the league (issue 25)


async def edit_league_form(request: web.Request) -> web.StreamResponse:
    """The competition page's league form: a new version, or the page again
    with the error (the line named) and the text as typed (nothing stored)."""
    same_origin(request)
    who = await require_signed_in(request)
    comp = await competition_of(request)
    form = await _form(request)
    check_csrf(who.csrf, form.get("csrf"))
    text = form.get("league", "")
    db = request.app[DB]
    try:
        await edit_league(request, text, "admin (page)")
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) != 422:
            raise
        return _competition_page(
            request,
            who,
            comp,
            await db.call(_teams_view, comp.id),
            league_error=message_of(e),
            league_text=text,
            final=await db.call(ServiceDB.latest_run_of, comp.id, "final"),
            versions=await db.call(league_history, comp.id),
        )
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}#league")


# ------------------------------------------- a team, as the teacher sees it (issue 25)


def _admin_team_view(db: ServiceDB, team: Team, number: int) -> dict[str, object]:
    from .team_pages import _team_view

    return {**_team_view(db, team, number), "count": db.count_submissions(team.id)}


async def _team_page(
    request: web.Request,
    who: AdminSignedIn,
    comp: Competition,
    team: Team,
    *,
    error: str | None = None,
    token: str | None = None,
    status: int = 200,
) -> web.Response:
    view = await request.app[DB].call(_admin_team_view, team, query_page(request))
    run, versions = await team_standings(request.app, comp, team)
    response = pages.render(
        request,
        "admin_team.html",
        {
            "csrf": who.csrf,
            "comp": comp,
            "team": team,
            "error": error,
            "token": token,
            "run": run,
            "versions": versions,
            **view,
        },
    )
    response.headers["Cache-Control"] = "no-store"  # a new token may be on it
    response.set_status(status)
    return response


async def _admin_team(request: web.Request) -> tuple[AdminSignedIn, Competition, Team]:
    who = await require_signed_in(request)
    comp = await competition_of(request)
    return who, comp, await team_of(request, comp)


async def team_page(request: web.Request) -> web.Response:
    """``/admin/c/{cid}/teams/{tid}``: what the team sees of itself, and its rename, withdraw, new token."""
    who, comp, team = await _admin_team(request)
    return await _team_page(request, who, comp, team)


async def team_submission_page(request: web.Request) -> web.Response:
    """``/admin/c/{cid}/teams/{tid}/submissions/{sid}``: the team's own submission page, for the admin."""
    from .diagnostics import check_games_output  # the validation games' output, as the team's page shows it

    _, comp, team = await _admin_team(request)
    sub = await own_submission(request, team)
    version = await request.app[DB].call(ServiceDB.submission_number, sub.id)
    return pages.render(
        request,
        "submission.html",
        {
            "team": team,
            "detail": submission_detail(sub, version),
            "pending": sub.pending,
            "outputs": await check_games_output(request, team, sub),
            "back": f"/admin/c/{comp.id}/teams/{team.id}",
        },
    )


async def team_diagnostics_page(request: web.Request) -> web.Response:
    """``/admin/c/{cid}/teams/{tid}/diagnostics[?run=R]``: the team's diagnostics page, for the admin."""
    from .diagnostics import render_diagnostics

    _, comp, team = await _admin_team(request)
    return await render_diagnostics(request, comp, team, back=f"/admin/c/{comp.id}/teams/{team.id}")


async def team_action(request: web.Request) -> web.StreamResponse:
    """The team page's forms: ``rename`` (field ``name``), ``withdraw``, ``token`` (shown this once)."""
    same_origin(request)
    who, comp, team = await _admin_team(request)
    form = await _form(request, 4096)
    check_csrf(who.csrf, form.get("csrf"))
    action = request.match_info["action"]
    try:
        if action == "rename":
            await rename_team(request, comp, team, form.get("name", ""))
        elif action == "withdraw":
            await withdraw_team(request, comp, team)
        else:
            token = await renew_token(request, team)
            return await _team_page(request, who, comp, team, token=token)
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) not in (409, 422):
            raise
        return await _team_page(request, who, comp, team, error=message_of(e), status=status_of(e))
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}/teams/{team.id}")
