"""A team signed in from the browser: a session cookie and CSRF-safe form posts (issue 14).

The team types its token into a form (POSTed: the token is never in a URL,
so never in a log or a browser's history). The service answers with a
random session id in a cookie that is HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it), Path=/, and Secure with
``--secure-cookies``; only the id's SHA-256 is stored. Every form the team
posts carries the session's CSRF token (a hidden field, compared in
constant time), and a post whose Origin names another site is refused even
before that.
"""

from __future__ import annotations

import hmac
from typing import NamedTuple

from aiohttp import web

from ..service.store import SESSION_S, ServiceDB, Session, Team
from .app_state import ROOM
from .errors import fail

COOKIE = "referee_session"


class SignedIn(NamedTuple):
    team: Team
    session: Session
    #: The cookie's value (to end the session).
    sid: str


def _lookup(db: ServiceDB, sid: str) -> tuple[Team, Session] | None:
    session = db.session(sid)
    if session is None:
        return None
    team = db.team(session.team_id)
    return None if team is None else (team, session)


async def signed_in(request: web.Request) -> SignedIn | None:
    """The team signed in with this request's cookie, if any."""
    sid = request.cookies.get(COOKIE)
    if not sid or len(sid) > 200:
        return None
    found = await request.app[ROOM].db.call(_lookup, sid)
    return None if found is None else SignedIn(found[0], found[1], sid)


def set_cookie(request: web.Request, response: web.StreamResponse, sid: str) -> None:
    response.set_cookie(
        COOKIE,
        sid,
        max_age=int(SESSION_S),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.app[ROOM].settings.secure_cookies,
    )


def clear_cookie(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/")


def same_origin(request: web.Request) -> None:
    """Refuse a form post from another site's page (403). Browsers send
    Origin on every POST; a request without one (curl) is left to the CSRF
    token."""
    origin = request.headers.get("Origin")
    if origin is None or origin == "null" and request.headers.get("Sec-Fetch-Site") == "same-origin":
        return
    host = request.headers.get("Host", "")
    if origin.split("://", 1)[-1] != host:
        fail(403, "this form was sent from another site's page: sign in on this server's own page")


def check_csrf(expected: str, given: str | None) -> None:
    """A form's CSRF token against its session's (a team's or the admin's), in constant time."""
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        fail(403, "the form's CSRF token is missing or wrong: reload the page and send it again")


# ------------------------------------------------------------------ the admin

ADMIN_COOKIE = "referee_admin"


class AdminSignedIn(NamedTuple):
    sid: str
    csrf: str


async def admin_signed_in(request: web.Request) -> AdminSignedIn | None:
    """The admin's signed-in session of this request, if any (same rules as a team's)."""
    sid = request.cookies.get(ADMIN_COOKIE)
    if not sid or len(sid) > 200:
        return None
    csrf = await request.app[ROOM].db.call(ServiceDB.admin_session, sid)
    return None if csrf is None else AdminSignedIn(sid, csrf)


def set_admin_cookie(request: web.Request, response: web.StreamResponse, sid: str) -> None:
    response.set_cookie(
        ADMIN_COOKIE,
        sid,
        max_age=int(SESSION_S),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.app[ROOM].settings.secure_cookies,
    )
