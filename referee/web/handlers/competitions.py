"""Competitions: the index, the leaderboard (and its live part), creating one."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ...service.errors import Invalid, ServiceError
from ...service.store import Competition, LeagueVersion, ServiceDB
from ...tournament.league import League, LeagueError
from .. import data, pages
from ..app_state import DB, SETTINGS
from ..auth import require_admin
from ..boardcache import BOARDS, BoardKey, forget, latest_board, rendered
from ..deadlines import page_context
from ..errors import fail
from ..paging import page_of, query_page
from ..run_start import check_league_text, pin_house_urls
from ..schemas import (
    CompetitionCreated,
    Leaderboard,
    LeagueEdit,
    LeagueVersionInfo,
    NewCompetition,
    VersionRun,
)
from ..validation import check_name, read_body
from .common import competition_of, json_response, shown_run


async def index_page(request: web.Request) -> web.Response:
    return pages.render(request, "index.html", {"competitions": await data.index(request.app)})


async def list_competitions(request: web.Request) -> web.Response:
    return json_response(await data.index(request.app))


async def shown_board(request: web.Request, comp: Competition) -> Leaderboard:
    """The board of the run a page shows (:func:`~.common.shown_run`), from
    the cache all its viewers share (:mod:`referee.web.boardcache`)."""
    app = request.app
    if "run" not in request.query:
        return await latest_board(app, comp)
    run, pinned = await shown_run(request, comp)  # 404 unless the run is comp's
    assert run is not None
    return await app[BOARDS].get(
        BoardKey(comp.id, run.id, pinned), lambda: data.leaderboard(app, comp, run, pinned)
    )


async def leaderboard_page(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    # its live part rendered once per board, shared with the live streams and /live
    live_part = pages.rendered(live_html(request, board))
    await page_context(request, comp)  # the deadlines' countdown
    runs = page_of(query_page(request), len(board.runs))  # the list of runs, newest first
    return pages.render(request, "leaderboard.html", {"board": board, "live_part": live_part, "runs": runs})


async def live_fragment(request: web.Request) -> web.Response:
    """The live part of the leaderboard (the team page and a pinned run's
    page fetch it on every update; the latest board's page gets it in its
    event stream instead, ``?view=live``)."""
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    resp = web.Response(body=live_html(request, board), content_type="text/html", charset="utf-8")
    resp.headers["Cache-Control"] = "no-store"
    return resp


def live_html(request: web.Request, board: Leaderboard) -> bytes:
    """``live.html`` of ``board``, rendered once for all its viewers."""
    return rendered(
        request.app,
        board,
        "live.html",
        lambda: pages.render_string(request, "live.html", {"board": board}).encode(),
    )


async def get_competition(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    return json_response(await shown_board(request, comp))


async def create_competition(request: web.Request, name: str, league_text: str) -> Competition:
    """A new competition, checked as the API checks it (422 naming the field and the league's line)."""
    db = request.app[DB]
    name = check_name(name, "name", 80, slash=True)
    if await db.call(ServiceDB.competition_named, name) is not None:
        fail(422, f"a competition named {name!r} exists already", "name")
    await check_league_input(request, league_text)
    return await db.call(ServiceDB.add_competition, name, league_text)


async def check_league_input(request: web.Request, league_text: str) -> League:
    """A league file the admin sends (a new competition's, or an edit):
    422 naming the field 'league' and its line, or the house bot refused."""
    try:
        league = check_league_text(league_text, "league")
    except LeagueError as e:
        fail(422, f"'league': {e}", "league")
    if league.containers.runtime or any(b.limits is not None and b.limits.runtime for b in league.bots):
        # a runtime the Docker daemon lacks: refused now, not at every team's admission
        from ...bots.base import BotError
        from ...bots.sandbox.docker_daemon import check_runtimes

        try:
            await asyncio.to_thread(
                check_runtimes, [league.containers, *(league.limits_for(b) for b in league.bots)]
            )
        except BotError as e:
            fail(422, f"'league': {e}", "league")
    settings = request.app[SETTINGS]
    try:  # a house command bot needs the flag; a house URL bot is where a team's URL may be: refused now
        await pin_house_urls(
            league,
            settings.bot_policy,
            anywhere=settings.house_urls_anywhere,
            allow_commands=settings.allow_house_commands,
        )
    except ServiceError as e:  # the house bot refused: said about the league the admin sends
        raise Invalid(f"'league': {e.message}", field="league") from None
    return league


async def new_competition(request: web.Request) -> web.Response:
    await require_admin(request)
    body = await read_body(request, NewCompetition)
    comp = await create_competition(request, body.name, body.league)
    return json_response(CompetitionCreated(id=comp.id, name=comp.name, created_at=comp.created_at), 201)


# ------------------------------------------------- editing the league (issue 25)

#: What an edit means for what plays: the rule the page and the API state.
EDIT_RULE = (
    "A new version is for what starts after it: every run and final started from now on plays it, and "
    "so does a ladder opened for the first time. A ladder already made (open, or frozen and reopened) "
    "keeps the version it was opened with, house bots and timeouts included, so its games stay "
    "comparable; runs already played keep theirs."
)


async def edit_league(request: web.Request, league_text: str, who: str) -> LeagueVersion:
    """The competition's new league file, checked as a new competition's is
    (422 naming 'league' and the line; nothing stored then), kept as its next version."""
    comp = await competition_of(request)
    db = request.app[DB]
    league = await check_league_input(request, league_text)
    teams = {t.name for t in await db.call(ServiceDB.teams, comp.id)}
    for bot in league.bots:
        if bot.name in teams:
            fail(
                422,
                f"'league': house bot {bot.name!r} has the name of a team of this competition: "
                "rename the house bot",
                "league",
            )
    version = await db.call(ServiceDB.set_league, comp.id, league_text, who)
    forget(request.app, comp.id)
    return version


def league_history(db: ServiceDB, cid: int) -> list[LeagueVersionInfo]:
    """Each version of the competition's league, newest first, with the runs that played it."""
    runs = db.runs(cid)
    out = []
    for v in db.league_versions(cid):
        played = [
            VersionRun(id=r.id, kind=r.kind, status=r.status, started_at=r.started_at)
            for r in runs
            if r.league_version == v.id
        ]
        out.append(
            LeagueVersionInfo(
                id=v.id,
                version=v.version,
                league=v.league_toml,
                created_at=v.created_at,
                who=v.who,
                runs=played,
            )
        )
    unversioned = [
        VersionRun(id=r.id, kind=r.kind, status=r.status, started_at=r.started_at)
        for r in runs
        if r.league_version is None
    ]
    if unversioned and out:  # runs played before versions were kept: with the oldest
        out[-1].runs = unversioned + out[-1].runs
    return out


async def put_league(request: web.Request) -> web.Response:
    """``PUT /api/competitions/{cid}/league`` ``{"league": TEXT}``: the new version (201)."""
    await require_admin(request)
    body = await read_body(request, LeagueEdit)
    version = await edit_league(request, body.league, "admin (API)")
    history = await request.app[DB].call(league_history, version.competition_id)
    return json_response(history[0], 201)


async def get_league(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/league``: every version, newest first, with its runs (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    return json_response(await request.app[DB].call(league_history, comp.id))
