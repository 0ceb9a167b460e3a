"""The admin's pages (issue 15, part): sign in with the admin token, create a
competition from a form (the league's errors shown with their line, the text
kept), add teams in bulk (one name a line; their tokens shown once, with a
CSV to download), and every team's bot status. Everything here is also in
the JSON API; the checks are the API's own."""

from __future__ import annotations

import csv
import io
from urllib.parse import quote

from aiohttp import web

from .. import pages
from ...tournament.ladder import ladder_entries
from ..boardcache import forget
from ..data import numbered
from ..db import Competition, Run, ServiceDB
from ..deadlines import page_context
from ..errors import fail, message_of
from ..ladders import ladder_waiting
from ..sessions import (
    ADMIN_COOKIE,
    AdminSignedIn,
    admin_signed_in,
    check_csrf,
    same_origin,
    set_admin_cookie,
)
from ..state import DB
from .common import competition_of
from .competitions import create_competition
from .teams import check_team_name

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


def _home(request: web.Request, who: AdminSignedIn, comps: list[Competition], *, error: str | None = None,
          name: str = "", league: str = "") -> web.Response:
    response = pages.render(request, "admin.html", {"csrf": who.csrf, "competitions": comps, "error": error,
                                                    "name": name, "league": league})
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
    except web.HTTPException as e:
        if e.status != 422:
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
    entries = {e.team: e for e in sorted(found, key=lambda e: e.status == "active")}
    out: list[dict[str, object]] = []
    for t in db.teams(cid):
        latest = db.latest_submission(t.id)
        playing = db.playing_submission(t.id)
        out.append({"team": t, "latest": numbered(db, latest), "playing": numbered(db, playing),
                    "count": db.count_submissions(t.id), "entry": entries.get(t.name)})
    return out


def _competition_page(request: web.Request, who: AdminSignedIn, comp: Competition,
                      teams: list[dict[str, object]], *, error: str | None = None, names: str = "",
                      created: list[tuple[int, str, str]] | None = None, final: Run | None = None) -> web.Response:
    csv_href = None
    if created:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["team_id", "team", "token"])
        writer.writerows(created)
        csv_href = "data:text/csv;charset=utf-8," + quote(buf.getvalue())
    response = pages.render(request, "admin_competition.html", {
        "csrf": who.csrf, "comp": comp, "teams": teams, "error": error, "names": names,
        "created": created or [], "csv_href": csv_href, "final": final,
        "waiting": ladder_waiting(request.app, comp.id)})
    response.headers["Cache-Control"] = "no-store"  # tokens may be on it
    if error:
        response.set_status(422)
    return response


async def competition_page(request: web.Request) -> web.Response:
    who = await require_signed_in(request)
    comp = await competition_of(request)
    db = request.app[DB]
    final = await db.call(ServiceDB.latest_run_of, comp.id, "final")
    await page_context(request, comp)  # the deadlines form
    return _competition_page(request, who, comp, await db.call(_teams_view, comp.id), final=final)


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
        except web.HTTPException as e:
            if e.status != 422:
                raise
            problems.append(f"line {number}: {message_of(e)}")
    db = request.app[DB]
    if problems:
        teams = await db.call(_teams_view, comp.id)
        return _competition_page(request, who, comp, teams, error="; ".join(problems[:20]), names=text)
    made = await db.call(ServiceDB.add_teams, comp.id, names)
    forget(request.app, comp.id)
    teams = await db.call(_teams_view, comp.id)
    return _competition_page(request, who, comp, teams,
                             created=[(t.id, t.name, token) for t, token in made])
