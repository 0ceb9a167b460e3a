"""The service's named rules (issue 33), in PokerKit's verify/can shape: a
``verify_*`` raises a :class:`~referee.service.errors.ServiceError` saying
why not and what to do; the operation of the
:class:`~referee.service.classroom.Classroom` calls it first, and a page
asks the same rule (``can_*``) to show or hide an action. A rule is said
here once, never again in a handler."""

from __future__ import annotations

import re
from collections.abc import Sized

from ..tournament.league import BOUNDS, MAX_GAMES, League, LeagueError
from .errors import Conflict, Invalid, NotReady, ServiceError
from .runs import house_bots
from .store import Competition, Run, ServiceDB, Team

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

#: The longest team name.
TEAM_NAME_MAX = 40


def check_name(value: str, field: str, max_len: int, *, slash: bool = False) -> str:
    """`value` as a name (of a team, a competition, a bot): :class:`Invalid` naming `field` otherwise."""
    if not value.strip():
        raise Invalid(f"'{field}' must not be empty", field=field)
    if value != value.strip():
        raise Invalid(f"'{field}' must not start or end with spaces", field=field)
    if len(value) > max_len:
        raise Invalid(f"'{field}' is too long: {len(value)} characters, at most {max_len}", field=field)
    if CONTROL.search(value):
        raise Invalid(f"'{field}' must not contain control characters", field=field)
    if not slash and "/" in value:
        raise Invalid(f"'{field}' must not contain '/'", field=field)
    return value


def verify_team_name(db: ServiceDB, comp: Competition, name: str) -> str:
    """A new (or renamed) team's name in `comp`: :class:`Invalid` naming
    'name' when it is malformed, taken by another team, reserved, or a house bot's."""
    name = check_name(name, "name", TEAM_NAME_MAX)
    if name.startswith("__team_slot_"):
        raise Invalid("'name': names starting with '__team_slot_' are reserved", field="name")
    if db.team_named(comp.id, name) is not None:
        raise Invalid(f"a team named {name!r} exists already in this competition", field="name")
    try:
        house = house_bots(comp.league_toml)
    except LeagueError:
        house = []
    if name in house:
        raise Invalid(f"{name!r} is the name of a house bot of this competition", field="name")
    return name


def verify_submissions_open(comp: Competition) -> None:
    """:class:`Conflict` once the competition is frozen or in its final."""
    if comp.phase in ("frozen", "final"):
        raise Conflict(
            f"submissions are closed: the competition is {comp.phase} (the final plays the versions "
            "accepted before the freeze)",
        )


#: The kinds of submission that need Docker on the server (a URL bot does not).
CONTAINER_KINDS = frozenset({"archive", "source", "image"})


def verify_uploads_ready(kind: str, missing: str | None) -> None:
    """:class:`NotReady` when a submission of `kind` needs Docker and the
    service is not set up for it (`missing`: what the organiser must
    install, :func:`~referee.service.health.uploads_missing`)."""
    if kind in CONTAINER_KINDS and missing is not None:
        raise NotReady(
            "this service is not ready for uploads yet, the organiser's to fix on the server (nothing is "
            f"wrong with your bot): {missing}. Until then, submit the 'url' of a running bot",
            field="kind",
        )


def can_submit(comp: Competition) -> bool:
    try:
        verify_submissions_open(comp)
    except ServiceError:
        return False
    return True


def verify_has_token(team: Team) -> None:
    """:class:`Conflict` for a withdrawn team: it has no token."""
    if team.withdrawn_at is not None:
        raise Conflict(f"team {team.name!r} is withdrawn: a withdrawn team has no token")


def verify_extend(
    comp: Competition,
    final: Run | None,
    league: League | None,
    games: int,
    *,
    budget: int,
    played: int,
    pairs: Sized,
) -> None:
    """Extending the final by `games` more games (issue 34 item 4): only a
    finished final (:class:`Conflict` otherwise, or when its order is
    settled already), `games` a whole number of at least one table's
    rotations and the new budget within ``[stop] max_games``'s range of the
    league file (:data:`~referee.tournament.league.BOUNDS`; :class:`Invalid`
    naming 'games')."""
    if comp.phase != "final" or final is None or league is None:
        raise Conflict(
            f"competition {comp.id} is {comp.phase}: only a finished final is extended "
            "(freeze the competition, then start its final)"
        )
    if final.status != "finished":
        what = (
            "it plays now: wait for its end"
            if final.status == "running"
            else "it resumes when the service starts"
        )
        raise Conflict(
            f"the final (run {final.id}) is {final.status}: only a finished final is extended ({what})"
        )
    if not pairs:
        raise Conflict(
            f"the final (run {final.id}) is settled: every neighbouring pair is separated at "
            f"{league.stop.confidence:.0%}, more games would change nothing"
        )
    table = league.tournament.table_size
    bound = BOUNDS["stop"]["max_games"]
    if isinstance(games, bool) or games < table:
        raise Invalid(
            f"'games': at least {table} (one table's rotations at tables of {table}), got {games}",
            field="games",
        )
    if (problem := bound.problem(budget + games)) is not None:
        raise Invalid(
            f"'games': the final's budget would be {budget + games} ({budget} now, {played} games played): "
            f"[stop] max_games {problem}; give at most {MAX_GAMES - budget}",
            field="games",
        )


def verify_house_names(db: ServiceDB, cid: int, league: League) -> None:
    """A league file's house bots may not take a team's name (:class:`Invalid` naming 'league')."""
    teams = {t.name for t in db.teams(cid)}
    for bot in league.bots:
        if bot.name in teams:
            raise Invalid(
                f"'league': house bot {bot.name!r} has the name of a team of this competition: rename the house bot",
                field="league",
            )
