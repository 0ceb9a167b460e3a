"""A team's private diagnostics of its bot in a run (issue 14): every fault
with the exact request that caused it, its latency distribution, the end of
its own output, and its games with its seat (for the replay viewer's view
from that seat). Its own token or its signed-in session only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

from ...admission import AdmissionReport, ValidationGame
from ...diagnostics import (
    GAME_OUTPUT_CAP,
    LATENCY_BUCKETS_MS,
    BotDiagnostics,
    diagnose,
    output_by_game,
    output_by_request,
)
from ...record import LatencyStats
from ...replay import ReplayError, frames
from ...replay import read as read_replay
from ...service.grading import team_bots
from ...service.store import Competition, Run, ServiceDB, Submission, Team
from ...tournament.ladder import ladder_entries
from ...tournament.results import game_seats, games_stamp, replay_path
from .. import pages
from ..app_state import ROOM
from ..auth import require_team
from ..data import CACHES
from ..errors import fail
from ..paging import page_of, query_page
from ..sessions import SignedIn, signed_in
from ..validation import path_int, query_id
from .common import competition_of, json_response, team_of


async def signed_in_or_login(request: web.Request) -> SignedIn:
    """The signed-in team; a redirect to the sign-in page otherwise (as
    :func:`.team_pages.signed_in_or_login`, which imports this module)."""
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther("/login")
    return who


def bot_logs(out_dir: Path, name: str) -> list[Path]:
    """The team bot's own output in a run's folder: its container's logs, on
    this machine and on each cluster node that played it (a URL bot has none
    here). Found by the exact name's key, never by a name another team's
    could share."""
    from ...bots.sandbox.container_limits import log_files_of

    return log_files_of(out_dir, name)


async def _run_for(request: web.Request, comp: Competition) -> Run | None:
    db = request.app[ROOM].db
    want = query_id(request, "run")  # 404 unless an id
    if want is None:
        return await db.call(ServiceDB.latest_run, comp.id)
    run = await db.call(ServiceDB.run, want)
    if run is None or run.competition_id != comp.id:
        fail(404, f"no run {want} in competition {comp.id}")
    return run


class Viewed(msgspec.Struct, kw_only=True):
    """Which diagnostics a page shows: its run, the version of the team's bot
    (a ladder's entry name, else the team's name), and the team's other
    versions in that run (oldest first), for the version selector."""

    run: Run | None
    version: str
    versions: list[str]


def _nothing(team: Team) -> BotDiagnostics:
    """The diagnostics of a team that played no game of the run shown."""
    return BotDiagnostics(
        bot=team.name,
        games=[],
        fault_count=0,
        faults=[],
        latency=LatencyStats(),
        histogram=[0] * (len(LATENCY_BUCKETS_MS) + 1),
    )


async def diagnostics_of(
    request: web.Request, comp: Competition, team: Team
) -> tuple[Viewed, BotDiagnostics]:
    run = await _run_for(request, comp)
    if run is None or not run.out_dir:
        return Viewed(run=run, version=team.name, versions=[]), _nothing(team)
    out = Path(run.out_dir)
    # the names the team's bot played under, found by its id (issue 32: never by its name now)
    mine = await request.app[ROOM].db.call(team_bots, run, team)
    name = mine[0] if mine else team.name
    versions: list[str] = []
    if run.kind == "ladder":  # one of the team's versions: ?version=NAME, else its newest that played
        entries = await asyncio.to_thread(ladder_entries, out, mine)
        # Every version, also those dropped or unreachable (issue 26: a faulting
        # version's diagnostics stay the team's to see after it submits again).
        versions = [e.name for e in entries]
        played = [e.name for e in entries if e.status != "unreachable"]
        want = request.query.get("version")
        if want is not None and want not in versions:
            fail(404, f"no version {want[:60]!r} of team {team.name!r} in the ladder")
        name = want or (played[-1] if played else versions[-1] if versions else "")
    if name not in mine:  # the team played no game of this run: nothing of another bot's is shown
        return Viewed(run=run, version=team.name, versions=versions), _nothing(team)
    logs = bot_logs(out, name)
    # kept until the bot plays again or its logs grow (a term's bot has played a thousand games)
    key = await asyncio.to_thread(_diagnostics_key, out, name, logs)
    diag = request.app[CACHES].diagnostics.get(key)
    if diag is None:
        diag = await asyncio.to_thread(diagnose, out, name, log_paths=logs)
        request.app[CACHES].diagnostics.put(key, diag)
    return Viewed(run=run, version=name, versions=versions), diag


def _diagnostics_key(out: Path, name: str, logs: list[Path]) -> tuple[object, ...]:
    """What a bot's diagnostics depend on: its games (their stamp: a game
    recorded changes it, with its faults) and its logs as they are now."""
    seen = []
    for p in logs:
        try:
            st = p.stat()
        except OSError:
            continue
        seen.append((str(p), st.st_size, st.st_mtime_ns))
    return (str(out), name, games_stamp(out, [name]), tuple(seen))


async def team_diagnostics(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/teams/{tid}/diagnostics[?run=R][&version=NAME]``"""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team)
    _, diag = await diagnostics_of(request, comp, team)
    return json_response(diag)


async def diagnostics_page(request: web.Request) -> web.Response:
    """``/team/diagnostics[?run=R][&version=NAME]``: the signed-in team's, with
    a run selector and, in a ladder, a selector of the team's versions."""
    who = await signed_in_or_login(request)
    comp = await request.app[ROOM].db.call(ServiceDB.competition, who.team.competition_id)
    assert comp is not None
    return await render_diagnostics(request, comp, who.team)


async def render_diagnostics(
    request: web.Request, comp: Competition, team: Team, *, back: str | None = None
) -> web.Response:
    """The diagnostics page of `team` (its own, or the admin's view with a
    `back` link): the run selector, its versions, faults, latency, output."""
    number = query_page(request)
    viewed, diag = await diagnostics_of(request, comp, team)
    runs = [r for r in await request.app[ROOM].db.call(ServiceDB.runs, comp.id) if r.out_dir]
    bounds = [f"≤ {b} ms" for b in LATENCY_BUCKETS_MS] + [f"> {LATENCY_BUCKETS_MS[-1]} ms"]
    # its games a page at a time, newest first (a term's bot has played thousands; the JSON has them all)
    page = page_of(number, len(diag.games))
    end = len(diag.games) - page.offset
    games = diag.games[max(0, end - page.size) : end][::-1]
    query = {k: v for k, v in request.query.items() if k in ("run", "version")}
    return pages.render(
        request,
        "diagnostics.html",
        {
            "team": team,
            "comp": comp,
            "run": viewed.run,
            "diag": diag,
            "viewed": viewed,
            "runs": list(reversed(runs)),
            "here": request.path,
            **({"back": back} if back else {}),
            "games": games,
            "page": page,
            "query": query,
            "buckets": list(zip(bounds, diag.histogram)),
            "most": max(diag.histogram or [0]) or 1,
        },
    )


# ------------------------------------------------- the team's own replays (issue 26)


def _seat_and_output(out_dir: Path, idx: int, names: set[str]) -> tuple[Path, int, str] | None:
    """Game `idx` of the run in `out_dir`: its replay, the seat of the
    team's bot (one of `names`) and that bot's name; None if not there."""
    seats, path = game_seats(out_dir, idx), replay_path(out_dir, idx)
    if seats is None or path is None or not path.exists():
        return None
    seat = next((i for i, n in enumerate(seats) if n in names), None)
    return None if seat is None else (path, seat, seats[seat])


def _own_frames(path: Path, seat: int, log_paths: list[Path]) -> dict[str, Any]:
    """The replay viewer's data with what the bot at `seat` printed during
    each of its turns (other seats' fault texts by their kind only)."""
    record = read_replay(path)
    outputs = output_by_request(log_paths, record.header.game_id)
    return frames(record, public=True, output_seat=seat, outputs=outputs)


async def own_run_game(request: web.Request, comp: Competition, team: Team) -> dict[str, Any]:
    """Game `idx` of run `rid` from the team's seat, with its bot's output
    by turn. The fair-play rule of the public replay holds (403 until every
    seat rotation of its deal is played); 404 when the team did not play it."""
    from .. import data

    db = request.app[ROOM].db
    rid, idx = path_int(request, "rid"), path_int(request, "idx")
    run = await db.call(ServiceDB.run, rid)
    if run is None or run.competition_id != comp.id or not run.out_dir:
        fail(404, f"no run {rid} in competition {comp.id}")
    await data.replay(request.app, run, idx)  # its 403 and 404
    out = Path(run.out_dir)
    mine = set(await db.call(team_bots, run, team))  # by the team's id (issue 32)
    found = await asyncio.to_thread(_seat_and_output, out, idx, mine)
    if found is None:
        fail(404, f"team {team.name!r} did not play game {idx} of run {rid}")
    path, seat, name = found
    try:
        return await asyncio.to_thread(_own_frames, path, seat, bot_logs(out, name))
    except ReplayError as e:
        fail(500, f"the replay of game {idx} cannot be read: {e}")


async def team_game(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/teams/{tid}/runs/{rid}/games/{idx}``: a
    game's replay data from the team's seat with its bot's output by turn
    (the team's token, or the admin's)."""
    comp = await competition_of(request)
    team = await team_of(request, comp)
    await require_team(request, team, admin_too=True)
    return json_response(await own_run_game(request, comp, team))


async def team_game_page(request: web.Request) -> web.Response:
    """``/team/runs/{rid}/games/{idx}``: the signed-in team's replay of a game
    from its seat, its bot's output next to each of its moves."""
    who = await signed_in_or_login(request)
    comp = await request.app[ROOM].db.call(ServiceDB.competition, who.team.competition_id)
    assert comp is not None
    frames_ = await own_run_game(request, comp, who.team)
    idx = path_int(request, "idx")
    return pages.render(
        request,
        "replay.html",
        {
            "data": frames_,
            "title": f"game {idx} from your seat — {comp.name}",
            "standalone": False,
            "back": ("/team/diagnostics?run=%d" % path_int(request, "rid"), "your diagnostics"),
            "json": None,
        },
    )


def _check_game(
    folder: Path, report: AdmissionReport, number: int
) -> tuple[ValidationGame, dict[str, Any]] | None:
    game = next((g for g in report.validation if g.number == number), None)
    if game is None:
        return None
    root = folder.resolve()
    path = (root / game.replay).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    logs = [p for p in ((root / o).resolve() for o in report.output) if p.is_relative_to(root)]
    return game, _own_frames(path, game.seat, logs)


async def check_game_page(request: web.Request) -> web.Response:
    """``/team/submissions/{sid}/games/{idx}``: a validation game of the
    submission's admission check from the team's seat, with its bot's output
    next to each of its moves (the signed-in team's)."""
    from ...service.pipeline import team_dir
    from .teams import own_submission

    who = await signed_in_or_login(request)
    sub = await own_submission(request, who.team)
    number = path_int(request, "idx")
    report = msgspec.json.decode(sub.report, type=AdmissionReport) if sub.report else None
    folder = team_dir(request.app[ROOM].db.data_dir, who.team.id) / f"check-{sub.id}"
    found = None if report is None else await asyncio.to_thread(_check_game, folder, report, number)
    if found is None:
        fail(404, f"no validation game {number} kept for submission {sub.id}")
    game, frames_ = found
    return pages.render(
        request,
        "replay.html",
        {
            "data": frames_,
            "title": f"validation game {number} of submission #{sub.id}",
            "standalone": False,
            "back": (f"/team/submissions/{sub.id}", f"submission #{sub.id}"),
            "json": None,
        },
    )


def check_outputs(folder: Path, report: AdmissionReport) -> dict[int, str]:
    """Each kept validation game's output of the bot (capped), by its number."""
    root = folder.resolve()
    logs = [p for p in ((root / o).resolve() for o in report.output) if p.is_relative_to(root)]
    by_game = output_by_game(logs)
    out = {}
    for g in report.validation:
        text = by_game.get(g.game_id, "")
        out[g.number] = text if len(text) <= GAME_OUTPUT_CAP else "…" + text[-GAME_OUTPUT_CAP:]
    return out


async def check_games_output(request: web.Request, team: Team, sub: Submission) -> dict[int, str]:
    """The submission page's: the bot's output in each kept validation game."""
    from ...service.pipeline import team_dir

    if not sub.report:
        return {}
    report = msgspec.json.decode(sub.report, type=AdmissionReport)
    if not report.validation:
        return {}
    folder = team_dir(request.app[ROOM].db.data_dir, team.id) / f"check-{sub.id}"
    return await asyncio.to_thread(check_outputs, folder, report)
