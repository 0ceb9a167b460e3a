"""Who is asking: the admin or a team, from ``Authorization: Bearer <token>``.

Tokens are stored as SHA-256 hashes and compared in constant time
(:meth:`ServiceDB.is_admin`, :meth:`ServiceDB.team_token_matches`). No token
or an unknown one is a 401 (with ``WWW-Authenticate``); a known token without
the right is a 403 saying whose it is.
"""

from __future__ import annotations

from typing import NamedTuple

from aiohttp import web

from ..service.store import Competition, ServiceDB, Team
from .app_state import ROOM
from .errors import fail

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="referee"'}


def bearer(request: web.Request) -> str | None:
    """The request's bearer token, if any."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Identity(NamedTuple):
    #: The admin token.
    admin: bool
    #: The team whose token it is.
    team: Team | None


def identify(db: ServiceDB, token: str) -> Identity:
    """Whose token this is (in the database's thread)."""
    return Identity(admin=db.is_admin(token), team=db.team_by_token(token))


async def is_admin(request: web.Request) -> bool:
    """Whether the request carries the admin token (no error either way)."""
    token = bearer(request)
    return token is not None and bool(await request.app[ROOM].db.call(ServiceDB.is_admin, token))


async def require_admin(request: web.Request) -> None:
    """Let the admin through; 401 or 403 for anyone else."""
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <admin token>'", headers=_CHALLENGE)
    who = await request.app[ROOM].db.call(identify, token)
    if who.admin:
        return
    if who.team is not None:
        fail(403, "a team token cannot do this: it needs the admin token")
    fail(401, "unknown token", headers=_CHALLENGE)


async def require_team(request: web.Request, team: Team, *, admin_too: bool = False) -> bool:
    """Let ``team`` through with its own token (False), or the admin when
    `admin_too` (True); 401 or 403 for anyone else (another team; the admin
    otherwise: a team's own diagnostics and uploads are the team's)."""
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <team token>'", headers=_CHALLENGE)
    db = request.app[ROOM].db
    if await db.call(ServiceDB.team_token_matches, team.id, token):
        return False
    who = await db.call(identify, token)
    if who.team is not None:
        fail(403, f"this token belongs to another team, not to team {team.id}")
    if who.admin:
        if admin_too:
            return True
        fail(403, "bots are submitted with the team's own token, not the admin token")
    fail(401, "unknown token", headers=_CHALLENGE)


async def require_member(request: web.Request, comp: Competition) -> None:
    """Let a team of `comp` (its own token) or the admin through; 401 for
    no token or an unknown one, 403 for a team of another competition."""
    token = bearer(request)
    if token is None:
        fail(401, "missing token: send 'Authorization: Bearer <team token>'", headers=_CHALLENGE)
    who = await request.app[ROOM].db.call(identify, token)
    if who.admin or (who.team is not None and who.team.competition_id == comp.id):
        return
    if who.team is not None:
        fail(403, f"this token belongs to a team of another competition, not of competition {comp.id}")
    fail(401, "unknown token", headers=_CHALLENGE)
