"""Alerts (issue 34, item 3): no automatic step fails in silence.

When a step the service takes by itself cannot go on (the **freeze** or the
**final** a deadline asks for, the **ladder** waiting for players or failed,
**admission** stuck on a service fault), it raises an alert: the competition
(none for a service-wide one), what could not go on, the cause, the action
(what the teacher does), and a public version that names nothing private
(for the leaderboard: no team's error, no server path). It is kept in the
database (``alerts``) from when it was first raised to when it was last
seen, and stands until it is **resolved by itself**: the step succeeds (the
final starts, the ladder plays again, the service is well), or what asked
for it is gone (the deadline moved or cleared, the competition reopened or
frozen). There is no "dismiss": an alert that stands is true, and the way to
clear it is its action.

Raised and resolved where each step runs (:mod:`.deadlines`, :mod:`.ladder`,
:class:`~referee.service.classroom.Classroom`), and by :func:`sweep`, which
the deadline watch runs every tick for what happens in other threads (a
ladder's waiting or failure, the health of admission). The admin page shows
them at its top with their action, the leaderboard their public words.
"""

from __future__ import annotations

import logging
import re

from .room import Room
from .store import ServiceDB
from .store.alerts import AlertRow

log = logging.getLogger("referee.service.alerts")

#: What can fail to go on.
STEPS = ("freeze", "final", "ladder", "admission")

Alert = AlertRow

#: What each step's alert says in public (the leaderboard): nothing private.
PUBLIC = {
    "freeze": "The deadline to close submissions has passed but the competition could not freeze yet; "
    "the organiser has been told.",
    "final": "The final is due but could not start yet; the organiser has been told.",
    "ladder": "The ladder is not playing now; the organiser has been told.",
    "ladder-waiting": "The ladder is waiting for more players; it starts by itself.",
    "admission": "Submissions wait to be checked: the server has a problem (nothing is wrong with the teams' "
    "bots); they are checked by themselves once it is fixed, no need to upload again.",
}


async def raise_alert(
    room: Room, cid: int | None, step: str, cause: str, action: str, public: str | None = None
) -> AlertRow:
    """The alert of `step` stands (raised, or seen again) with its cause and action."""
    assert step in STEPS, step
    row = await room.db.call(
        ServiceDB.raise_alert, cid, step, cause, action, public or PUBLIC[step], room.clock.time()
    )
    if row.first_at == row.last_at:
        where = "the service" if cid is None else f"competition {cid}"
        log.warning("%s: the %s cannot go on: %s (what to do: %s)", where, step, cause, action)
    room.changed(cid or 0)
    return row


async def resolve(room: Room, cid: int | None, *steps: str) -> None:
    """The alerts of `steps` (for `cid`) resolved: the step went on, or is no longer asked for."""
    for step in steps:
        if await room.db.call(ServiceDB.resolve_alert, cid, step, room.clock.time()):
            log.info(
                "%s: the %s's alert is resolved", "the service" if cid is None else f"competition {cid}", step
            )
            room.changed(cid or 0)


async def standing(room: Room, cid: int) -> list[AlertRow]:
    """The alerts that stand for competition `cid`, the service-wide ones included."""
    return await room.db.call(ServiceDB.standing_alerts, cid)


def final_refused(message: str) -> tuple[str, str]:
    """The cause and the action of a final that could not start (its refusal's `message`)."""
    message = message.removeprefix("cannot start the final: ")
    if "still being checked" in message:
        return message, (
            "nothing: the final starts by itself once those submissions are accepted or refused "
            "(within a second of the last verdict)"
        )
    if "is open" in message or "is setup" in message or "is final" in message:
        return message, "freeze the competition (Phase, above), or move or clear final_at (Deadlines)"
    return message, (
        "give the final enough players: add a house bot to the league file ([[bots]], League file below) "
        "or a team with an accepted bot, or lower table_size; it then starts by itself within a second "
        "(or press Start the final). Or move final_at (Deadlines) to wait"
    )


_WAITING = re.compile(r"^(?P<cause>.*\(tables of \d+\) and has \d+ \(.*\))\. (?P<action>[A-Z].*)$", re.S)


def ladder_waiting(text: str) -> tuple[str, str]:
    """The cause and the action of a ladder's waiting (:attr:`LadderWork.waiting`, one text)."""
    found = _WAITING.match(text)
    if found is None:
        return text, "see the cause"
    return found["cause"], found["action"]


async def sweep(room: Room) -> None:
    """The alerts of what runs in other threads, brought up to date: each
    competition's ladder (waiting, failed, or playing again) and admission
    (the service degraded, or well again)."""
    for cid, lad in list(room.ladders.items()):
        if lad.alive():
            waiting = lad.waiting
            if waiting is None:
                await resolve(room, cid, "ladder")
            else:
                cause, action = ladder_waiting(waiting)
                await raise_alert(room, cid, "ladder", cause, action, PUBLIC["ladder-waiting"])
        elif lad.status == "failed":
            await raise_alert(
                room,
                cid,
                "ladder",
                f"the ladder failed and stopped: {lad.error or 'no error was given'}",
                "read the server's log for the error, fix its cause (the disk, Docker, the league file), "
                "then freeze and reopen the competition (Phase, above): the ladder starts again over its "
                "folder, nothing is lost",
            )
    for alert in await room.db.call(ServiceDB.standing_alerts):
        if (
            alert.step == "ladder"
            and alert.competition_id is not None
            and alert.competition_id not in room.ladders
        ):
            comp = await room.db.call(ServiceDB.competition, alert.competition_id)
            if comp is None or comp.phase != "open":  # frozen, or never reopened: no ladder is asked for
                await resolve(room, alert.competition_id, "ladder")
    degraded = room.health.degraded
    if degraded is None:
        await resolve(room, None, "admission")
    else:
        await raise_alert(
            room,
            None,
            "admission",
            f"admission cannot check submissions: {degraded.cause} ({degraded.waiting} waiting)",
            "fix the server (start Docker, free disk space...; see the cause): the waiting submissions "
            "are checked by themselves at the next try, no team needs to upload again",
        )


__all__ = [
    "PUBLIC",
    "STEPS",
    "Alert",
    "final_refused",
    "ladder_waiting",
    "raise_alert",
    "resolve",
    "standing",
    "sweep",
]
