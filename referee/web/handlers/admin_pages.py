"""The admin's pages (issue 15, part): sign in with the admin token, create a
competition from a form (the league's errors shown with their line, the text
kept), add teams in bulk (one name a line; their tokens shown once, with a
CSV to download), and every team's bot status. Everything here is also in
the JSON API; the checks are the API's own."""

from __future__ import annotations

import io
from urllib.parse import quote

from aiohttp import web

from ...service import grading
from ...service.default_league import DEFAULT_LEAGUE
from ...service.edits import kept_by_ladder
from ...service.errors import ServiceError
from ...service.finals import PairEstimate
from ...service.ladder import ladder_waiting
from ...service.runs import check_league_text
from ...service.store import Competition, Run, ServiceDB, Team
from ...textsafe import Verbatim, csv_writer
from ...tournament.ladder import entry_submissions, ladder_entries
from ...tournament.league import LeagueError, league_notes
from .. import pages
from ..app_state import ROOM
from ..data import submission_detail, submission_info, team_standings
from ..deadline_pages import page_context
from ..errors import fail, field_of, message_of, status_of
from ..paging import Page, page_of, query_page
from ..schemas import LeagueVersionInfo, SubmissionInfo
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
from .teams import own_submission

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
    if not token or not await request.app[ROOM].db.call(ServiceDB.is_admin, token):
        response = pages.render(request, "admin_login.html", {"error": "that is not the admin token"})
        response.set_status(401)
        return response
    sid, _ = await request.app[ROOM].db.call(ServiceDB.new_admin_session)
    response = web.HTTPSeeOther("/admin")
    set_admin_cookie(request, response, sid)
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    same_origin(request)
    who = await require_signed_in(request)
    check_csrf(who.csrf, (await _form(request)).get("csrf"))
    await request.app[ROOM].db.call(ServiceDB.end_admin_session, who.sid)
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
    league: str = DEFAULT_LEAGUE,
    alerts: dict[int, int] | None = None,
    error_field: str | None = None,
) -> web.Response:
    response = pages.render(
        request,
        "admin.html",
        {
            "csrf": who.csrf,
            "competitions": comps,
            "error": error,
            "name": name,
            "league": league,
            "alerts": alerts or {},
            "error_field": error_field,
        },
    )
    if error:
        response.set_status(422)
    return response


async def home(request: web.Request) -> web.Response:
    who = await require_signed_in(request)
    db = request.app[ROOM].db
    return _home(request, who, await db.call(ServiceDB.competitions), alerts=await db.call(_alert_counts))


def _alert_counts(db: ServiceDB) -> dict[int, int]:
    """How many alerts stand for each competition (the service-wide ones: under 0)."""
    out: dict[int, int] = {}
    for a in db.standing_alerts():
        out[a.competition_id or 0] = out.get(a.competition_id or 0, 0) + 1
    return out


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
        comps = await request.app[ROOM].db.call(ServiceDB.competitions)
        return _home(
            request, who, comps, error=message_of(e), name=name, league=league, error_field=field_of(e)
        )
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}")


#: The teams a page of the admin's competition page lists (a term has hundreds).
TEAMS_PAGE_SIZE = 100


def _teams_view(db: ServiceDB, cid: int, number: int = 1) -> tuple[list[dict[str, object]], Page]:
    """Page `number` of the teams (:data:`TEAMS_PAGE_SIZE` a page, in the
    order they were added): each one's newest submission, its version in
    play, and that version's standing in the ladder (its newest entry:
    active, dropped...)."""
    all_teams = db.teams(cid)
    page = page_of(number, len(all_teams), TEAMS_PAGE_SIZE)
    shown = all_teams[(page.number - 1) * page.size : page.number * page.size]
    ladder = db.latest_run_of(cid, "ladder")
    # each team's version in play, else its newest (an earlier version is back in play when a new one is dropped),
    # chosen from the entries' names and statuses, those chosen alone read whole (a term's ladder has thousands)
    found = entry_submissions(ladder.out_dir) if ladder is not None else []
    # by team id through each entry's submission, never by a name (issue 32: a rename is a label)
    team_of = grading.entry_teams(db, ladder) if ladder is not None else {}
    chosen = {team_of[n]: n for n, _, st in sorted(found, key=lambda e: e[2] == "active") if n in team_of}
    on_page = [chosen[t.id] for t in shown if t.id in chosen]
    read = {e.name: e for e in ladder_entries(ladder.out_dir, on_page)} if ladder is not None else {}
    entries = {tid: read[n] for tid, n in chosen.items() if n in read}
    # every team's count, newest and version in play in two queries, not four a team (issue 37)
    counts = db.submission_counts(cid)
    subs = db.numbered_by_ids(
        i for t in shown for i in counts.get(t.id, (0, None, None))[1:] if i is not None
    )

    def info(sid: int | None) -> SubmissionInfo | None:
        return submission_info(*subs[sid]) if sid is not None and sid in subs else None

    out: list[dict[str, object]] = []
    for t in shown:
        count, latest, playing = counts.get(t.id, (0, None, None))
        out.append(
            {
                "team": t,
                "latest": info(latest),
                "playing": info(playing),
                "count": count,
                "entry": entries.get(t.id),
            }
        )
    return out, page


async def _competition_page(
    request: web.Request,
    who: AdminSignedIn,
    comp: Competition,
    teams: tuple[list[dict[str, object]], Page],
    *,
    error: str | None = None,
    names: str = "",
    created: list[tuple[int, str, str]] | None = None,
    final: Run | None = None,
    league_error: str | None = None,
    league_text: str | None = None,
    versions: list[LeagueVersionInfo] | None = None,
    phase_error: str | None = None,
    phase_action: str | None = None,
    phase_field: str | None = None,
    concurrency: str | None = None,
    status: int | None = None,
    league_notes: list[str] | None = None,
    ladder_league: tuple[int | None, list[str]] = (None, []),
    estimate: tuple[list[PairEstimate], int | None] = ([], None),
    extend_error: str | None = None,
) -> web.Response:
    """The competition's admin page: its alerts first (what could not go on,
    why, what to do), its phase, deadlines, teams and league; a form refused
    is shown again as typed with its message (`status`: the refusal's)."""
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
            "teams": teams[0],
            "teams_page": teams[1],
            "error": error,
            "names": names,
            "created": created or [],
            "csv_href": csv_href,
            "final": final,
            "waiting": ladder_waiting(request.app[ROOM], comp.id),
            "league_error": league_error,
            "league_text": comp.league_toml if league_text is None else league_text,
            "versions": versions or [],
            "edit_rule": EDIT_RULE,
            "alerts": await request.app[ROOM].standing_alerts(comp.id),
            "phase_error": phase_error,
            "phase_action": phase_action,
            "phase_field": phase_field,
            # the games at once as typed (a refused open keeps it), else the competition's
            "concurrency": str(comp.ladder_concurrency or "") if concurrency is None else concurrency,
            "league_notes": league_notes or [],
            "ladder_version": ladder_league[0],
            "ladder_keeps": ladder_league[1],
            "unsettled": estimate[0],
            "suggested": estimate[1],
            "can_extend": final is not None and final.status == "finished" and bool(estimate[0]),
            "extend_error": extend_error,
        },
    )
    response.headers["Cache-Control"] = "no-store"  # tokens may be on it
    if status is not None:
        response.set_status(status)
    elif error or league_error or extend_error:
        response.set_status(422)
    return response


def notes_of(comp: Competition) -> list[str]:
    """What the competition's league file holds that has no meaning somewhere (:func:`league_notes`)."""
    try:
        return league_notes(check_league_text(comp.league_toml))
    except LeagueError:
        return []


async def competition_page(
    request: web.Request,
    *,
    phase_error: str | None = None,
    phase_action: str | None = None,
    phase_field: str | None = None,
    concurrency: str | None = None,
    status: int | None = None,
    extend_error: str | None = None,
) -> web.Response:
    """``/admin/c/{cid}``; also the page a refused phase button answers with
    (`phase_error`: why, `phase_action`: what to do, `status`: the refusal's)."""
    who = await require_signed_in(request)
    comp = await competition_of(request)
    room = request.app[ROOM]
    final, pairs, suggested = await room.final_estimate(comp.id)
    await page_context(request, comp)  # the deadlines form
    return await _competition_page(
        request,
        who,
        comp,
        await room.db.call(_teams_view, comp.id, query_page(request)),
        final=final,
        versions=await room.db.call(league_history, comp.id),
        league_notes=notes_of(comp),
        ladder_league=await room.db.call(kept_by_ladder, comp.id),
        estimate=(pairs, suggested),
        extend_error=extend_error,
        phase_error=phase_error,
        phase_action=phase_action,
        phase_field=phase_field,
        concurrency=concurrency,
        status=status,
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
            names.append(await request.app[ROOM].verify_team_name(comp, name))
        except (web.HTTPException, ServiceError) as e:
            if status_of(e) != 422:
                raise
            problems.append(f"line {number}: {message_of(e)}")
    db = request.app[ROOM].db
    if problems:
        teams = await db.call(_teams_view, comp.id)
        return await _competition_page(
            request,
            who,
            comp,
            teams,
            error="; ".join(problems[:20]),
            names=text,
            versions=await db.call(league_history, comp.id),
        )
    made = await request.app[ROOM].add_teams(comp.id, names)
    teams = await db.call(_teams_view, comp.id)
    return await _competition_page(
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
    db = request.app[ROOM].db
    try:
        await edit_league(request, text, "admin (page)")
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) != 422:
            raise
        return await _competition_page(
            request,
            who,
            comp,
            await db.call(_teams_view, comp.id),
            league_error=message_of(e),
            league_text=text,
            final=await db.call(ServiceDB.latest_run_of, comp.id, "final"),
            versions=await db.call(league_history, comp.id),
        )
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}#league")  # the page says what it means (league_notes)


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
    typed_name: str | None = None,
) -> web.Response:
    view = await request.app[ROOM].db.call(_admin_team_view, team, query_page(request))
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
            # the rename as typed when it was refused (its message beside it), else the team's name
            "typed_name": team.name if typed_name is None else typed_name,
            "rename_refused": typed_name is not None,
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
    version = await request.app[ROOM].db.call(ServiceDB.submission_number, sub.id)
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
            await request.app[ROOM].rename_team(team, form.get("name", ""))
        elif action == "withdraw":
            await request.app[ROOM].withdraw_team(team)
        else:
            token = await request.app[ROOM].renew_token(team)
            return await _team_page(request, who, comp, team, token=token)
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) not in (409, 422):
            raise
        typed = form.get("name", "") if action == "rename" else None
        return await _team_page(
            request, who, comp, team, error=message_of(e), status=status_of(e), typed_name=typed
        )
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}/teams/{team.id}")
