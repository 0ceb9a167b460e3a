"""A competition's phases (issue 15): open (its ladder plays), freeze, start
the final; the final's standings as CSV. The admin's JSON API and the admin
page's buttons, one check each (:mod:`referee.service.ladder`)."""

from __future__ import annotations

import time

import msgspec
from aiohttp import web

from ...service import alerts, deadlines, grading
from ...service.errors import ServiceError
from ...service.store import Competition, ServiceDB
from ...tournament.league import CONCURRENCY, SEED
from .. import deadline_pages
from ..app_state import ROOM
from ..auth import require_admin
from ..boardcache import forget
from ..data import run_info
from ..errors import fail, field_of, message_of, status_of
from ..schemas import ExtendFinal, OpenCompetition, StartFinal
from ..sessions import check_csrf, same_origin
from ..validation import has_body, read_body
from .admin_pages import competition_page, require_signed_in
from .common import competition_of, json_response, run_of


def _check_concurrency(concurrency: int | None) -> int | None:
    """The games a ladder plays at once: the league file's range (:data:`CONCURRENCY`)."""
    if concurrency is not None and (problem := CONCURRENCY.problem(concurrency)):
        fail(422, f"'concurrency': {problem}", "concurrency")
    return concurrency


async def _change(
    request: web.Request,
    comp: Competition,
    action: str,
    concurrency: int | None = None,
    seed: int | None = None,
) -> int:
    """Do `action` ("open", "freeze" or "final"): the run it started or stopped."""
    room = request.app[ROOM]
    if action == "open":
        return (await room.open(comp.id, concurrency)).id
    if action == "freeze":
        return await room.freeze(comp.id)
    return (await room.start_final(comp.id, seed)).id


async def _answer(request: web.Request, cid: int, rid: int, status: int) -> web.Response:
    db = request.app[ROOM].db
    comp = await db.call(ServiceDB.competition, cid)
    run = await db.call(ServiceDB.run, rid) if rid else None
    assert comp is not None
    return json_response(
        {
            "competition": comp.id,
            "phase": comp.phase,
            "run": run_info(run, private=True) if run is not None else None,
        },
        status,
    )


async def open_competition(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/open`` (``{"concurrency": N}`` optional)."""
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, OpenCompetition) if await has_body(request) else OpenCompetition()
    rid = await _change(request, comp, "open", _check_concurrency(body.concurrency))
    return await _answer(request, comp.id, rid, 202)


async def freeze(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    rid = await _change(request, comp, "freeze")
    return await _answer(request, comp.id, rid, 200)


async def start_final(request: web.Request) -> web.Response:
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, StartFinal) if await has_body(request) else StartFinal()
    if body.seed is not None and (problem := SEED.problem(body.seed)):
        fail(422, f"'seed': {problem}", "seed")
    rid = await _change(request, comp, "final", seed=body.seed)
    return await _answer(request, comp.id, rid, 202)


async def extend_final(request: web.Request) -> web.Response:
    """``POST /api/competitions/{cid}/final/extend`` ``{"games": N}``: the
    finished, unsettled final plays up to N more games (the same run and
    seed) until its order is settled; 409 unless there is such a final, 422
    naming 'games' outside the budget's range."""
    await require_admin(request)
    comp = await competition_of(request)
    body = await read_body(request, ExtendFinal)
    run = await request.app[ROOM].extend_final(comp.id, body.games)
    forget(request.app, comp.id)
    return await _answer(request, comp.id, run.id, 202)


async def admin_extend(request: web.Request) -> web.Response:
    """The admin page's *Extend the final* form; refused, the page again with why."""
    same_origin(request)
    who = await require_signed_in(request)
    comp = await competition_of(request)
    form = await request.post()
    check_csrf(who.csrf, str(form.get("csrf", "")))
    raw = str(form.get("games", "")).strip()
    try:
        try:
            games = int(raw)
        except ValueError:
            fail(422, f"'games': a whole number, got {raw[:20]!r}", "games")
        await request.app[ROOM].extend_final(comp.id, games)
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) not in (409, 422):
            raise
        page = await competition_page(request, extend_error=message_of(e))
        page.set_status(status_of(e))
        return page
    forget(request.app, comp.id)
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}")


async def standings_csv(request: web.Request) -> web.Response:
    """A finished run's standings as CSV (the final's, for grading): rank,
    whose bot (team id, team, version, submission, house), rating, the
    rank's 95% interval and whether it is settled (:mod:`..grading`);
    ``?house=0`` leaves the house bots out."""
    comp = await competition_of(request)
    run = await run_of(request, comp)
    if run.status != "finished":
        fail(409, f"run {run.id} is {run.status}: its standings are final once it is finished")
    house = request.query.get("house", "1")
    if house not in ("0", "1"):
        fail(400, f"?house={house[:20]!r}: give 0 (leave the house bots out) or 1 (the default: keep them)")
    text = await request.app[ROOM].db.call(grading.standings_csv, run, house == "1")
    if text is None:
        fail(404, f"run {run.id} wrote no standings")
    name = f"{comp.name}-{run.kind}-{run.id}.csv".replace("/", "-").replace('"', "")
    return web.Response(
        text=text,
        content_type="text/csv",
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def admin_action(request: web.Request) -> web.Response:
    """The admin page's buttons: ``POST /admin/c/{cid}/{action}``, then back
    to the page; refused, the page itself (with the refusal's status) says
    why and what to do beside the buttons."""
    same_origin(request)
    who = await require_signed_in(request)
    comp = await competition_of(request)
    form = await request.post()
    check_csrf(who.csrf, str(form.get("csrf", "")))
    action = request.match_info["action"]
    if action not in ("open", "freeze", "final"):
        fail(404, f"no action {action!r}")
    concurrency = None
    raw = str(form.get("concurrency", "")).strip()
    if action == "open" and raw:
        try:
            concurrency = int(raw)
        except ValueError:
            fail(422, f"'concurrency': a whole number, got {raw!r}", "concurrency")
    try:
        await _change(request, comp, action, _check_concurrency(concurrency))
    except (web.HTTPException, ServiceError) as e:  # refused: the page again, saying why and what to do
        if status_of(e) not in (409, 422):
            raise
        message = message_of(e)
        todo = alerts.final_refused(message)[1] if action == "final" else None
        return await competition_page(
            request,
            phase_error=message,
            phase_action=todo,
            status=status_of(e),
            phase_field=field_of(e),
            concurrency=raw,
        )
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}")


# ------------------------------------------------------------ deadlines (issue 25, item 5)


class SetDeadlines(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: ISO 8601 times with their zone; null or absent: no such deadline.
    freeze_at: str | None = None
    final_at: str | None = None


def _deadlines_json(d: deadlines.Deadlines) -> dict[str, object]:
    return {
        "freeze_at": deadlines.iso_z(d.freeze_at),
        "final_at": deadlines.iso_z(d.final_at),
        "source": d.source,
    }


async def _set_deadlines(
    request: web.Request, comp: Competition, freeze_at: str | None, final_at: str | None, reset: bool = False
) -> deadlines.Deadlines:
    db = request.app[ROOM].db
    if reset:
        await db.call(ServiceDB.set_deadlines, comp.id, None)
    else:
        times = []
        now = time.time()
        for field, text in (("freeze_at", freeze_at), ("final_at", final_at)):
            try:
                times.append(deadlines.parse_time(text or "", field, now))
            except ValueError as e:
                fail(422, str(e), field)
        freeze, final = times
        if freeze is not None and final is not None and final < freeze:
            fail(
                422,
                f"'final_at': {final_at} is before freeze_at ({freeze_at}): the final starts once frozen",
                "final_at",
            )
        await db.call(ServiceDB.set_deadlines, comp.id, (freeze, final))
    forget(request.app, comp.id)
    return await db.call(deadlines.deadlines_of, comp)


async def get_deadlines(request: web.Request) -> web.Response:
    """``GET /api/competitions/{cid}/deadlines``: the deadlines in force and where they come from."""
    comp = await competition_of(request)
    return json_response(_deadlines_json(await request.app[ROOM].db.call(deadlines.deadlines_of, comp)))


async def put_deadlines(request: web.Request) -> web.Response:
    """``PUT /api/competitions/{cid}/deadlines`` (``{"freeze_at": ISO, "final_at": ISO}``, either null):
    they replace the league file's; ``DELETE``: the league file's again."""
    await require_admin(request)
    comp = await competition_of(request)
    if request.method == "DELETE":
        return json_response(_deadlines_json(await _set_deadlines(request, comp, None, None, reset=True)))
    body = await read_body(request, SetDeadlines)
    return json_response(_deadlines_json(await _set_deadlines(request, comp, body.freeze_at, body.final_at)))


async def admin_deadlines(request: web.Request) -> web.Response:
    """The admin page's deadlines form: ``POST /admin/c/{cid}/deadlines``;
    refused, the page again (422) with the times as typed and why (nothing stored)."""
    same_origin(request)
    who = await require_signed_in(request)
    comp = await competition_of(request)
    form = await request.post()
    check_csrf(who.csrf, str(form.get("csrf", "")))
    freeze_at, final_at = str(form.get("freeze_at", "")), str(form.get("final_at", ""))
    try:
        await _set_deadlines(request, comp, freeze_at, final_at, reset="reset" in form)
    except (web.HTTPException, ServiceError) as e:
        if status_of(e) != 422:
            raise
        request[deadline_pages.REFUSED] = deadline_pages.Refused(
            freeze_at, final_at, message_of(e), field_of(e)
        )
        page = await competition_page(request)
        page.set_status(422)
        return page
    raise web.HTTPSeeOther(f"/admin/c/{comp.id}")
