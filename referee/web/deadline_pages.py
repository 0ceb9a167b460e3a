"""The deadlines on the pages: the countdown of the leaderboard and the team
page, and the admin page's deadlines form shown again as typed when refused
(the deadlines themselves: :mod:`referee.service.deadlines`)."""

from __future__ import annotations

import aiohttp_jinja2
import msgspec
from aiohttp import web

from ..service.deadlines import Countdown, countdowns, deadlines_of, iso_z
from ..service.store import Competition
from .app_state import ROOM


async def countdown_of(request: web.Request, comp: Competition) -> list[Countdown]:
    return countdowns(comp, await request.app[ROOM].db.call(deadlines_of, comp))


class Refused(msgspec.Struct, frozen=True):
    """The admin's deadlines form refused: what was typed, shown again, and why."""

    freeze_at: str
    final_at: str
    error: str
    #: The field refused ("freeze_at", "final_at"; None: the form as a whole): its message is shown beside it.
    field: str | None = None


#: Where the deadlines form's handler leaves its :class:`Refused` on the
#: request for :func:`page_context`.
REFUSED = "referee.deadlines_refused"


async def page_context(request: web.Request, comp: Competition) -> None:
    """What the pages' countdown (``countdown.html``) and the admin page's
    deadlines form need, added to the request's template context:
    ``countdown`` and ``deadlines`` (with ``deadline_values``: as ISO in UTC,
    or as typed with ``deadlines_error`` beside ``deadlines_field`` when the form was refused)."""
    d = await request.app[ROOM].db.call(deadlines_of, comp)
    refused: Refused | None = request.get(REFUSED)
    values = {"freeze_at": iso_z(d.freeze_at) or "", "final_at": iso_z(d.final_at) or ""}
    extra = {
        "countdown": countdowns(comp, d),
        "deadlines": d,
        "deadline_values": values
        if refused is None
        else {"freeze_at": refused.freeze_at, "final_at": refused.final_at},
        "deadlines_error": refused.error if refused is not None else None,
        "deadlines_field": refused.field if refused is not None else None,
    }
    request[aiohttp_jinja2.REQUEST_CONTEXT_KEY] = {
        **request.get(aiohttp_jinja2.REQUEST_CONTEXT_KEY, {}),
        **extra,
    }
