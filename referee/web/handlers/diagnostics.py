"""A team's private diagnostics of its bot in a run (issue 14): every fault
with the exact request that caused it, its latency distribution, the end of
its own output, and its games with its seat (for the replay viewer's view
from that seat). Its own token or its signed-in session only."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
from aiohttp import web

from ...diagnostics import LATENCY_BUCKETS_MS, BotDiagnostics, diagnose
from ...record import LatencyStats
from ...tournament.ladder import ladder_entries
from .. import pages
from ..auth import require_team
from ..db import Competition, Run, ServiceDB, Team
from ..errors import fail
from ..state import DB
from ..validation import query_id
from .common import competition_of, json_response, team_of


def bot_logs(out_dir: Path, name: str) -> list[Path]:
    """The team bot's own output in a run's folder: its container's log (a
    URL bot has none here). Found by the exact name's key, never by a name
    another team's could share."""
    from ...bots.container import log_file_of

    path = log_file_of(out_dir, name)
    return [path] if path.is_file() else []


async def _run_for(request: web.Request, comp: Competition) -> Run | None:
    db = request.app[DB]
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


async def diagnostics_of(request: web.Request, comp: Competition, team: Team) -> tuple[Viewed, BotDiagnostics]:
    run = await _run_for(request, comp)
    if run is None or not run.out_dir:
        return Viewed(run=run, version=team.name, versions=[]), BotDiagnostics(
            bot=team.name, games=[], fault_count=0, faults=[], latency=LatencyStats(),
            histogram=[0] * (len(LATENCY_BUCKETS_MS) + 1))
    out = Path(run.out_dir)
    name = team.name
    versions: list[str] = []
    if run.kind == "ladder":  # one of the team's versions: ?version=NAME, else its newest that played
        entries = [e for e in await asyncio.to_thread(ladder_entries, out) if e.team == team.name]
        # Every version, also those dropped or unreachable (issue 26: a faulting
        # version's diagnostics stay the team's to see after it submits again).
        versions = [e.name for e in entries]
        played = [e.name for e in entries if e.status != "unreachable"]
        want = request.query.get("version")
        if want is not None and want not in versions:
            fail(404, f"no version {want[:60]!r} of team {team.name!r} in the ladder")
        name = want or (played[-1] if played else versions[-1] if versions else team.name)
    diag = await asyncio.to_thread(diagnose, out, name, log_paths=bot_logs(out, name))
    return Viewed(run=run, version=name, versions=versions), diag


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
    from .team_pages import signed_in_or_login

    who = await signed_in_or_login(request)
    comp = await request.app[DB].call(ServiceDB.competition, who.team.competition_id)
    assert comp is not None
    viewed, diag = await diagnostics_of(request, comp, who.team)
    runs = [r for r in await request.app[DB].call(ServiceDB.runs, comp.id) if r.out_dir]
    bounds = [f"≤ {b} ms" for b in LATENCY_BUCKETS_MS] + [f"> {LATENCY_BUCKETS_MS[-1]} ms"]
    return pages.render(request, "diagnostics.html", {
        "team": who.team, "comp": comp, "run": viewed.run, "diag": diag, "viewed": viewed,
        "runs": list(reversed(runs)),
        "buckets": list(zip(bounds, diag.histogram)), "most": max(diag.histogram or [0]) or 1})
