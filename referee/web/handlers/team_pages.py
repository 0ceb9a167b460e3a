"""A team's own pages: sign in with the token, see the submissions and why
each was accepted or refused, submit a new version (issue 14).

Signed in by the session cookie of :mod:`referee.web.sessions`; every post
carries the session's CSRF token. The JSON API mirrors all of it with the
team's bearer token (:mod:`.teams`).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import BodyPartReader, web

from ...service.disk import UploadGuard, begin_upload
from ...service.pipeline import team_dir
from ...service.store import Competition, ServiceDB, Team
from .. import pages
from ..app_state import ROOM
from ..data import head_to_head, numbered, submission_detail, submission_info, team_standings
from ..deadline_pages import page_context
from ..errors import fail
from ..paging import H2H_SHOWN, page_of, query_page
from ..sessions import SignedIn, check_csrf, clear_cookie, same_origin, set_cookie, signed_in
from ..uploads import check_length, new_upload_path, save_part
from ..validation import check_extras, check_url_field
from .sdk import index_url
from .teams import UPLOAD_KINDS, own_submission

#: The longest a form's text field may be.
FIELD_MAX = 4096


async def login_page(request: web.Request) -> web.Response:
    if await signed_in(request) is not None:
        raise web.HTTPSeeOther("/team")
    return pages.render(request, "login.html", {"error": None})


async def login(request: web.Request) -> web.StreamResponse:
    same_origin(request)
    if request.content_length is not None and request.content_length > 4096:
        fail(413, "the sign-in form is too large")
    form = await request.post()
    token = str(form.get("token", "")).strip()
    team = await request.app[ROOM].db.call(ServiceDB.team_by_token, token) if token else None
    if team is None:
        response = pages.render(request, "login.html", {"error": "unknown token: check it and try again"})
        response.set_status(401)
        return response
    sid, _ = await request.app[ROOM].db.call(ServiceDB.new_session, team.id)
    response = web.HTTPSeeOther("/team")
    set_cookie(request, response, sid)
    raise response


async def signed_in_or_login(request: web.Request) -> SignedIn:
    """The signed-in team; a redirect to the sign-in page otherwise."""
    who = await signed_in(request)
    if who is None:
        raise web.HTTPSeeOther("/login")
    return who


async def logout(request: web.Request) -> web.StreamResponse:
    same_origin(request)
    who = await signed_in_or_login(request)
    form = await request.post()
    check_csrf(who.session.csrf, str(form.get("csrf", "")))
    await request.app[ROOM].db.call(ServiceDB.end_session, who.sid)
    response = web.HTTPSeeOther("/login")
    clear_cookie(response)
    raise response


def _team_view(db: ServiceDB, team: Team, number: int) -> dict[str, object]:
    """The team's page `number` of its submissions (newest first: :mod:`..paging`)."""
    comp = db.competition(team.competition_id)
    page = page_of(number, db.count_submissions(team.id))
    subs = db.numbered_submissions(team.id, page.size, page.offset)
    playing = db.playing_submission(team.id)
    return {
        "competition": comp,
        "submissions": [submission_info(s, v) for s, v in subs],
        "page": page,
        "playing": numbered(db, playing),
        "pending": any(s.pending for s, _ in subs),
    }


async def team_page(request: web.Request) -> web.Response:
    who = await signed_in_or_login(request)
    view = await request.app[ROOM].db.call(_team_view, who.team, query_page(request))
    comp = view["competition"]
    assert isinstance(comp, Competition)
    run, versions = await team_standings(request.app, comp, who.team)
    met = await head_to_head(request.app, comp, run, [v.name for v in versions])  # its own versions' only
    opponents = {v.name: met[v.name] for v in versions if met[v.name]}  # newest first, those that played
    status = {v.name: v.status for v in versions}
    await page_context(request, comp)  # the deadlines' countdown
    return pages.render(
        request,
        "team.html",
        {
            "team": who.team,
            "csrf": who.session.csrf,
            "uploads": request.app[ROOM].uploads_missing is None,
            "uploads_missing": request.app[ROOM].uploads_missing,
            "sdk_url": index_url(request),  # the Python kit's pip install (issue 35)
            "max_upload_mb": request.app[ROOM].settings.max_upload // 2**20,
            "run": run,
            "versions": versions,
            "head_to_head": opponents,
            "h2h_shown": H2H_SHOWN,
            "status_of": status,
            **view,
        },
    )


async def team_live(request: web.Request) -> web.Response:
    """The live part of the team's page: its versions in the latest run
    (the ladder: each version it entered), fetched again on every update."""
    who = await signed_in_or_login(request)
    comp = await request.app[ROOM].db.call(ServiceDB.competition, who.team.competition_id)
    assert comp is not None
    run, versions = await team_standings(request.app, comp, who.team)
    resp = pages.render(request, "team_live.html", {"run": run, "versions": versions, "competition": comp})
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def submission_page(request: web.Request) -> web.Response:
    who = await signed_in_or_login(request)
    sub = await own_submission(request, who.team)
    from .diagnostics import check_games_output  # issue 26: the validation games kept

    version = await request.app[ROOM].db.call(ServiceDB.submission_number, sub.id)
    return pages.render(
        request,
        "submission.html",
        {
            "team": who.team,
            "detail": submission_detail(sub, version),
            "pending": sub.pending,
            "outputs": await check_games_output(request, who.team, sub),
        },
    )


async def _text(part: BodyPartReader) -> str:
    data = await part.read(decode=False)
    if len(data) > FIELD_MAX:
        fail(413, f"the form field {part.name!r} is too long")
    return data.decode("utf-8", "replace")


#: The submit form's text fields.
FIELDS = ("csrf", "kind", "url", "secret", "note")


async def _multipart(
    request: web.Request, who: SignedIn, limit: int, into: dict[str, str], guards: list[UploadGuard]
) -> Path | None:
    """The multipart form's text fields into `into`, its file streamed to the
    team's uploads folder (the CSRF token is checked, and the team's upload
    slot taken into `guards`, before a byte of it is written): the file's
    path, or None when none was sent."""
    upload: Path | None = None
    reader = await request.multipart()
    try:
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                fail(422, "nested multipart forms are not accepted")
            if part.name == "file":
                if into.get("csrf") is None:
                    fail(422, "the form's fields come in the wrong order: the CSRF token must come first")
                check_csrf(who.session.csrf, into.get("csrf"))
                kind = into.get("kind", "")
                if kind not in UPLOAD_KINDS or not part.filename:
                    await part.release()
                    continue
                if guards or upload is not None:
                    fail(422, "one file per form")
                guards.append(await begin_upload(request.app[ROOM], who.team, request.content_length))
                upload = new_upload_path(
                    team_dir(request.app[ROOM].db.data_dir, who.team.id) / "uploads", UPLOAD_KINDS[kind]
                )
                if await save_part(part, upload, limit, guards[0].check) == 0:
                    upload.unlink(missing_ok=True)
                    upload = None
            elif part.name in FIELDS:
                into[part.name] = await _text(part)
            else:
                await part.release()
    except BaseException:
        if upload is not None:
            upload.unlink(missing_ok=True)
        raise
    return upload


async def submit(request: web.Request) -> web.StreamResponse:
    """The page's form: a URL, or a file (``docker save`` archive or source
    archive, multipart only); a form without a file may come urlencoded."""
    same_origin(request)
    who = await signed_in_or_login(request)
    settings = request.app[ROOM].settings
    check_length(request, settings.max_upload)
    multipart = request.content_type.startswith("multipart/")
    fields: dict[str, str] = {}
    upload: Path | None = None
    guards: list[UploadGuard] = []
    try:
        if multipart:
            upload = await _multipart(request, who, settings.max_upload, fields, guards)
        else:
            form = await request.post()  # client_max_size bounds it
            fields = {k: str(form[k]) for k in FIELDS if k in form}
        check_csrf(who.session.csrf, fields.get("csrf"))
        kind = fields.get("kind", "")
        secret = fields.get("secret") or None
        note = fields.get("note", "")
        check_extras(secret, note)
        if kind == "url":
            url = check_url_field(fields.get("url", "").strip())
            await request.app[ROOM].submit(who.team, kind="url", url=url, secret=secret, note=note)
        elif kind in UPLOAD_KINDS:
            request.app[ROOM].verify_uploads(kind)
            if upload is None:
                fail(
                    422,
                    "choose the file to upload"
                    if multipart
                    else "a file upload must be sent as multipart/form-data",
                )
            await request.app[ROOM].submit(
                who.team,
                kind=kind,
                secret=secret,
                note=note,
                upload=upload,
                slot=guards[0].slot if guards else None,
            )
            upload = None  # the pipeline owns it now
        else:
            fail(422, "choose what you submit: a URL, a docker save archive or a source archive", "kind")
    finally:
        if upload is not None:
            upload.unlink(missing_ok=True)
        for guard in guards:
            await guard.release()
    raise web.HTTPSeeOther("/team")


__all__ = ["login", "login_page", "logout", "submission_page", "submit", "team_page"]
