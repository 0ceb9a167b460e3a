"""Deadlines (issue 25, item 5): a competition freezes and starts its final
by itself.

A competition's ``freeze_at`` and ``final_at`` come from its league file's
``[competition]`` table, or from the admin page (which, once used, takes
over from the league file's until reset). While the service runs,
:func:`watch` looks every :data:`TICK_S` seconds: an open
competition whose ``freeze_at`` (or ``final_at``) has passed freezes, with
submissions closed as of the deadline itself; a frozen one whose
``final_at`` has passed starts its final (if submissions made before the
freeze are still being checked, as soon as they are done). At the start of
the server, before the ladders play again, a deadline that passed while it
was down is applied at once.

A deadline applies once: reopening a competition whose deadline has passed
is refused until the admin moves or clears it (:func:`passed_for_open`).
The leaderboard and the team page show a countdown (:func:`countdowns`;
:mod:`referee.web.deadline_pages` renders it, kept ticking by the page's script).
"""

from __future__ import annotations

import datetime
import functools
import logging
import time

import msgspec

from ..tournament.league import LeagueError, deadline_problem
from . import alerts, ladder
from .errors import ServiceError
from .room import Room
from .runs import check_league_text
from .store import Competition, ServiceDB

log = logging.getLogger("referee.web")

#: How often the deadlines are looked at, in seconds.
TICK_S = 1.0


class Deadlines(msgspec.Struct, frozen=True):
    freeze_at: float | None = None
    final_at: float | None = None
    #: "league" (the league file's ``[competition]``) or "admin" (set on the admin page).
    source: str = "league"


@functools.lru_cache(maxsize=256)
def _league_times(text: str) -> tuple[float | None, float | None]:
    try:
        times = check_league_text(text).competition
    except LeagueError:
        return None, None
    return (
        times.freeze_at.timestamp() if times.freeze_at else None,
        times.final_at.timestamp() if times.final_at else None,
    )


def deadlines_of(db: ServiceDB, comp: Competition) -> Deadlines:
    """The competition's deadlines in force (in the database's thread). A
    stored time no page can show (before 1970 or past the year 9999: stored
    before they were refused, or restored) is no deadline."""
    override = db.deadlines(comp.id)
    if override is not None:
        return Deadlines(_shown(override[0]), _shown(override[1]), source="admin")
    return Deadlines(*_league_times(comp.league_toml))


def _shown(t: float | None) -> float | None:
    return t if t is not None and deadline_problem(t, None) is None else None


def parse_time(text: str, field: str, now: float) -> float | None:
    """An ISO 8601 time with its zone as a Unix time ('' : none), from 1970
    to ten years after `now`; ValueError naming `field` otherwise."""
    text = text.strip()
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"'{field}': not an ISO 8601 time: {text!r} (e.g. 2026-06-01T17:00:00+02:00)"
        ) from None
    if when.tzinfo is None:
        raise ValueError(
            f"'{field}': {text} has no time zone: write it with its offset or Z "
            f"(e.g. {text}+02:00, {text}Z for UTC)"
        )
    problem = deadline_problem(when.timestamp(), now)
    if problem is not None:
        raise ValueError(f"'{field}': {text} {problem}")
    return when.timestamp()


def iso(t: float) -> str:
    """A deadline as shown: UTC, to the second."""
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_z(t: float | None) -> str | None:
    """A deadline as ISO 8601 in UTC (the API's, and the admin form's value)."""
    if t is None:
        return None
    return (
        datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def remaining(seconds: float) -> str:
    """``2 d 3 h``, ``1 h 05 min``, ``4 min 07 s``, ``9 s`` (as the page's script writes it)."""
    s = max(0, int(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d} d {h} h"
    if h:
        return f"{h} h {m:02d} min"
    if m:
        return f"{m} min {s:02d} s"
    return f"{s} s"


class Countdown(msgspec.Struct, frozen=True):
    #: "freeze" or "final".
    kind: str
    at: float
    #: What comes: "Submissions close", "The final starts".
    label: str
    #: What the page says once it is past.
    done: str
    text: str
    when: str


def countdowns(comp: Competition, d: Deadlines, now: float | None = None) -> list[Countdown]:
    """The deadlines still to come for the competition in its phase."""
    now = time.time() if now is None else now
    out = []
    if d.freeze_at is not None and comp.phase in ("setup", "open") and d.freeze_at > now:
        out.append(
            Countdown(
                kind="freeze",
                at=d.freeze_at,
                label="Submissions close",
                done="Submissions are closing now",
                text=f"Submissions close in {remaining(d.freeze_at - now)}",
                when=iso(d.freeze_at),
            )
        )
    if d.final_at is not None and comp.phase in ("setup", "open", "frozen") and d.final_at > now:
        closes = "" if d.freeze_at is not None and d.freeze_at <= d.final_at else " (submissions close then)"
        out.append(
            Countdown(
                kind="final",
                at=d.final_at,
                label=f"The final starts{closes}",
                done="The final is starting now",
                text=f"The final starts{closes} in {remaining(d.final_at - now)}",
                when=iso(d.final_at),
            )
        )
    return out


def passed_for_open(d: Deadlines, now: float | None = None) -> str | None:
    """Why a competition may not (re)open now: a deadline of it has passed."""
    now = time.time() if now is None else now
    for key, at in (("freeze_at", d.freeze_at), ("final_at", d.final_at)):
        if at is not None and at <= now:
            return (
                f"its {key} ({iso(at)}) has passed: move it or clear it (admin page, Deadlines) before "
                "opening"
            )
    return None


# ------------------------------------------------------------ applying them


async def apply_due(room: Room) -> None:
    """Freeze and start the finals whose deadlines have passed. One that
    cannot go on raises an alert (:mod:`.alerts`: the cause, what to do),
    tried again at each tick; the alert is resolved once it goes on, or once
    its deadline is moved or cleared."""
    db = room.db
    now = room.clock.time()
    for phase in ("open", "frozen"):
        for comp in await db.call(ServiceDB.competitions_in, phase):
            d = await db.call(deadlines_of, comp)
            due = [t for t in (d.freeze_at, d.final_at) if t is not None and t <= now]
            if not due:
                await alerts.resolve(
                    room, comp.id, "freeze", "final"
                )  # moved or cleared: nothing asks for it
                continue
            step = "freeze"
            try:
                if comp.phase == "open":
                    log.info("competition %s: its deadline %s has passed: it freezes", comp.id, iso(min(due)))
                    await ladder.freeze(room, comp)
                    await db.call(ServiceDB.set_frozen_at, comp.id, min(due))
                    fresh = await db.call(ServiceDB.competition, comp.id)
                    if fresh is None:
                        continue
                    comp = fresh
                await alerts.resolve(room, comp.id, "freeze")
                step = "final"
                if comp.phase == "frozen" and d.final_at is not None and d.final_at <= now:
                    run = await ladder.start_final(room, comp)
                    await alerts.resolve(room, comp.id, "final")
                    log.info(
                        "competition %s: final_at %s has passed: its final plays (run %s)",
                        comp.id,
                        iso(d.final_at),
                        run.id,
                    )
                else:
                    await alerts.resolve(room, comp.id, "final")
            except ServiceError as e:  # the phase cannot change now: an alert, tried again at each tick
                if step == "final":
                    cause, action = alerts.final_refused(e.message)
                    cause = (
                        f"final_at ({iso(d.final_at or now)}) has passed but the final cannot start: {cause}"
                    )
                else:
                    cause = f"its deadline ({iso(min(due))}) has passed but it cannot freeze: {e.message}"
                    action = "freeze it by hand (Phase, above), or move or clear the deadline (Deadlines)"
                await alerts.raise_alert(
                    room, comp.id, step, cause, f"{action}; tried again every {TICK_S:.0f} s"
                )
            except Exception as e:  # noqa: BLE001 - a bug, or the disk: said, and tried again
                log.exception("competition %s: its %s failed", comp.id, step)
                await alerts.raise_alert(
                    room,
                    comp.id,
                    step,
                    f"the {step} failed in the service: {type(e).__name__}: {e}",
                    f"read the server's log for the error and fix its cause; tried again every {TICK_S:.0f} s",
                )
            finally:
                room.changed(comp.id)


async def watch(room: Room) -> None:
    """The deadlines watched while the service runs, every :data:`TICK_S` on its clock (and the alerts swept)."""
    while True:
        await room.clock.sleep(TICK_S)
        try:
            await apply_due(room)
            await alerts.sweep(room)  # the ladders' and admission's alerts, from their threads
        except Exception:  # noqa: BLE001 - the deadlines keep being watched
            log.exception("the deadlines could not be applied; tried again in %.0f s", TICK_S)
