"""Competitions: the index, the leaderboard (and its live part), creating one."""

from __future__ import annotations

from aiohttp import web

from ...service.store import Competition, LeagueVersion, ServiceDB
from ...tournament.league import League
from .. import data, pages
from ..app_state import ROOM
from ..auth import require_admin, require_member
from ..boardcache import BOARDS, BoardKey, forget, latest_board, rendered
from ..deadline_pages import page_context
from ..paging import page_of, query_page
from ..schemas import (
    CompetitionCreated,
    Leaderboard,
    LeagueEdit,
    LeagueVersionInfo,
    NewCompetition,
    VersionRun,
)
from ..validation import read_body
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
    # what could not go on, in public words (no team's error, no server path): each said once
    notices = list(dict.fromkeys(a.public for a in await request.app[ROOM].standing_alerts(comp.id)))
    return pages.render(
        request,
        "leaderboard.html",
        {"board": board, "live_part": live_part, "runs": runs, "notices": notices},
    )


async def live_fragment(request: web.Request) -> web.Response:
    """The live part of the leaderboard (the team page and a pinned run's
    page fetch it on every update; the latest board's page gets it in its
    event stream instead, ``?view=live``)."""
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    resp = web.Response(body=live_html(request, board), content_type="text/html", charset="utf-8")
    resp.headers["Cache-Control"] = "no-store"
    return resp


#: A ladder's earlier versions the leaderboard shows (the best ranked): a
#: term's ladder has thousands (10 versions a team), which made the page
#: megabytes; all of them are on :func:`earlier_page`, a page at a time.
RETIRED_SHOWN = 20
#: The earlier versions a page of :func:`earlier_page` shows.
EARLIER_PAGE_SIZE = 100


def live_html(request: web.Request, board: Leaderboard) -> bytes:
    """``live.html`` of ``board``, rendered once for all its viewers."""
    return rendered(
        request.app,
        board,
        "live.html",
        lambda: pages.render_string(
            request, "live.html", {"board": board, "retired_shown": RETIRED_SHOWN}
        ).encode(),
    )


async def earlier_page(request: web.Request) -> web.Response:
    """``/c/{cid}/earlier[?run=R][&page=N]``: the shown run's earlier versions
    (a ladder's retired and dropped entries), :data:`EARLIER_PAGE_SIZE` a
    page, by rank (page 1: the best ranked)."""
    comp = await competition_of(request)
    board = await shown_board(request, comp)
    page = page_of(query_page(request), len(board.retired), EARLIER_PAGE_SIZE)
    rows = board.retired[page.offset : page.offset + page.size]
    query = {"run": request.query["run"]} if "run" in request.query else {}
    return pages.render(request, "earlier.html", {"board": board, "rows": rows, "page": page, "query": query})


async def get_competition(request: web.Request) -> web.Response:
    comp = await competition_of(request)
    return json_response(await shown_board(request, comp))


async def create_competition(request: web.Request, name: str, league_text: str | None) -> Competition:
    """A new competition, checked as the service checks it (422 naming the
    field and the league's line); no league text: the default league."""
    return await request.app[ROOM].create_competition(name, league_text)


async def check_league_input(request: web.Request, league_text: str) -> League:
    """A league file the admin sends (a new competition's, or an edit),
    checked as the service checks it (422 naming 'league' and its line)."""
    return await request.app[ROOM].check_league(league_text)


async def new_competition(request: web.Request) -> web.Response:
    await require_admin(request)
    body = await read_body(request, NewCompetition)
    comp = await create_competition(request, body.name, body.league)
    return json_response(CompetitionCreated(id=comp.id, name=comp.name, created_at=comp.created_at), 201)


# ------------------------------------------------- editing the league (issue 25)

#: What an edit means for what plays: the rule the page and the API state.
EDIT_RULE = (
    "A new version is for every run and final started after it, and an open ladder plays it from its "
    "next games: its house bots (added ones enter, removed ones retire), its timeouts, its table size "
    "(when the ladder's rules allow that many players) and its [ladder] table. An open ladder keeps "
    "its rules, fault policy, ratings, duplicate deals and container limits, so its games stay "
    "comparable: saving says so when the new version changes them. A frozen ladder takes the newest "
    "version when it opens again; runs already played keep theirs."
)


async def edit_league(request: web.Request, league_text: str, who: str) -> tuple[LeagueVersion, list[str]]:
    """The competition's new league file (:meth:`~referee.service.classroom.Classroom.edit_league`:
    422 naming 'league' and the line, nothing stored then), and what the edit says."""
    comp = await competition_of(request)
    version, notes = await request.app[ROOM].edit_league(comp.id, league_text, who)
    forget(request.app, comp.id)
    return version, notes


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
    version, notes = await edit_league(request, body.league, "admin (API)")
    history = await request.app[ROOM].db.call(league_history, version.competition_id)
    history[0].notes = notes
    return json_response(history[0], 201)


async def get_admission(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/admission``: the admission check a
    submission to the competition plays (its league's rules, timeouts, fault
    policy and table; the service's validation games and time budget), for
    ``referee check --competition`` to play the same. A team's own token (or
    the admin's): nothing of another team is in it."""
    comp = await competition_of(request)
    await require_member(request, comp)
    return json_response(await request.app[ROOM].admission_settings(comp.id))


async def get_league(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/league``: every version, newest first, with its runs (the admin)."""
    await require_admin(request)
    comp = await competition_of(request)
    return json_response(await request.app[ROOM].db.call(league_history, comp.id))
