"""A competition that plays itself (issue 15): its ladder while it is open,
its final once frozen.

The phases (:data:`referee.service.store.COMPETITION_PHASES`): the admin **opens** a
competition and its ladder plays all the time (:class:`LadderWork`, one
:class:`~referee.tournament.ladder.Ladder` in a thread of its own); a
submission accepted meanwhile enters at once (:func:`submission_accepted`).
**Freezing** closes submissions and stops the ladder after its games in
flight. The **final** is an adaptive league of the frozen bots (each team's
newest version accepted before the freeze) from fresh ratings on a new
secret seed, played until settled at the league's ``[stop]`` confidence or
its game budget; its seed and games are public once it is finished.

A restart loses nothing: an open competition's ladder starts again over its
folder (the planned games not yet recorded first), and an unfinished final
resumes (:func:`autoplay`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping

import msgspec

from ..bots.factory import BotSpec
from ..bots.netpolicy import AddressPolicy, PinnedURL
from ..tournament.ladder import EntryResult, Wanted, entry_name, ladder_entries, set_team_ids
from ..tournament.league import League, LeagueError
from ..tournament.schedule import make_scheduler
from . import alerts
from .edits import latest_ladder_league, store_ladder_league
from .errors import Conflict, NotFound, ServiceError
from .ladder_work import LadderWork
from .room import Room
from .runs import (
    build_league,
    check_house_commands,
    check_league_text,
    decode_league,
    encode_league,
    league_filename,
    pin_house_text,
    pinned_house,
    prepare_run,
    still_allowed,
    team_entry,
    with_secrets,
)
from .store import Competition, Run, ServiceDB, Team

log = logging.getLogger("referee.web")


def _secret_seed() -> int:
    """A deal seed nobody knows before it is published (a league file's seed may be shared)."""
    return secrets.randbits(62)


# ------------------------------------------------------------ the entries


def wanted_of(
    db: ServiceDB,
    cid: int,
    policy: AddressPolicy | None,
    house: Mapping[str, PinnedURL] | None = None,
    images: Mapping[str, str] | None = None,
) -> list[Wanted]:
    """The entries an open competition's ladder should have: its house bots
    (a URL one at its address in `house`, :func:`~.runs.pin_house_urls`)
    and each team's version in play (a URL bot only while its pinned address
    is one `policy` allows), with their secrets."""
    comp = db.competition(cid)
    if comp is None:
        return []
    ladder = db.latest_run_of(cid, "ladder")
    if ladder is None:
        house_bots = pinned_house(check_league_text(comp.league_toml).bots, house, images)
    else:  # the house bots of the league version the ladder plays (an edit reaches it: .edits)
        kept = decode_league(ladder.league_json).bots
        same = {n: p for n, p in (house or {}).items() if any(b.name == n and b.url == p.url for b in kept)}
        house_bots = pinned_house(kept, same, images)
    out = [Wanted(name=b.name, spec=b) for b in house_bots]
    entries = ladder_entries(ladder.out_dir) if ladder is not None and ladder.out_dir else []
    named = {e.submission: e.name for e in entries if e.submission is not None}
    taken = {e.name for e in entries} | {b.name for b in house_bots}
    for team in db.playing_teams(cid):  # a withdrawn team's entries retire
        sub = db.playing_submission(team.id)
        if sub is None or not still_allowed(sub, policy):
            continue
        spec = msgspec.structs.replace(team_entry(team, sub), secret=sub.secret)
        name = named.get(sub.id) or new_entry_name(team, db.submission_number(sub.id), taken)
        taken.add(name)
        out.append(Wanted(name=name, team=team.name, team_id=team.id, submission=sub.id, spec=spec))
    return out


def new_entry_name(team: Team, version: int, taken: set[str]) -> str:
    """The ladder's name of a team's version entering it: "NAME vN" under the
    team's name now. An entry keeps the name it came in with (issue 32: a
    renamed team's versions in play keep theirs; who an entry is, is its team
    id and submission), so a name two teams' versions would share after a
    rename takes the team's id too."""
    name = entry_name(team.name, version)
    suffix, i = f" (team {team.id})", 1
    while name in taken:
        name = f"{entry_name(team.name, version)}{suffix}" + (f" #{i}" if i > 1 else "")
        i += 1
    return name


def team_of_submission(db: ServiceDB, sid: int) -> int | None:
    """The id of the team whose submission `sid` is (None: there is none)."""
    sub = db.submission(sid)
    return None if sub is None else sub.team_id


def known_of(db: ServiceDB, out_dir: str) -> dict[str, BotSpec]:
    """The specs, with their secrets, of a ladder's earlier entries (a
    retired version may still owe the rotations of a deal it was dealt into)."""
    out: dict[str, BotSpec] = {}
    for e in ladder_entries(out_dir):
        if e.submission is None:
            continue
        sub = db.submission(e.submission)
        team = db.team(sub.team_id) if sub is not None else None
        if sub is None or team is None:
            continue
        out[e.name] = msgspec.structs.replace(team_entry(team, sub), name=e.name, secret=sub.secret)
    return out


# ------------------------------------------------------------ the thread


# ------------------------------------------------------------ the phases


async def _house_pins(room: Room, comp: Competition, what: str) -> Mapping[str, PinnedURL]:
    """The competition's house URL bots admitted and pinned
    (:func:`~.runs.pin_house_urls`); :class:`Conflict` naming the one refused, after `what`."""
    settings = room.settings
    try:
        return await pin_house_text(
            comp.league_toml,
            settings.bot_policy,
            anywhere=settings.house_urls_anywhere,
            allow_commands=settings.allow_house_commands,
        )
    except ServiceError as e:
        raise e.reworded(f"{what}: {e.message}") from None


def _start_ladder(
    db: ServiceDB,
    cid: int,
    policy: AddressPolicy | None,
    concurrency: int | None,
    house: Mapping[str, PinnedURL] | None = None,
    *,
    allow_commands: bool = False,
    images: Mapping[str, str] | None = None,
) -> tuple[Run, League, list[Wanted], dict[str, BotSpec]]:
    """Mark the competition open and its ladder running: the same ladder as
    before when it has one (reopened, or the server restarted), else a new
    one on a secret seed; its house URL bots at their addresses in `house`.
    A stored ladder whose house bots need ``--allow-house-commands`` (the
    league edited after it opened under the flag, a restored or edited
    database) is refused when the service runs without it, as a new one is
    (issue 32)."""
    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    last = db.latest_run_of(cid, "ladder")
    if last is not None:
        league = decode_league(last.league_json)
        try:  # its stored entries may hold those house bots: checked before any newer version
            check_house_commands(league, allow_commands=allow_commands)
        except ServiceError as e:
            raise e.reworded(f"cannot open: its ladder's stored league: {e.message}") from None
        try:  # the newest league version, as an edit reaches an open ladder (.edits)
            league, _, version = latest_ladder_league(db, comp, league, house)
        except LeagueError:
            version = None  # a league that no longer parses: the ladder plays on as it was
        check_house_commands(league, allow_commands=allow_commands)
        run = db.begin_run(
            cid, out_dir=last.out_dir, league_json=last.league_json, total_games=0, resume_run=last.id
        )
        if not isinstance(run, str) and version is not None:
            store_ladder_league(db, run.id, league, version)
            run.league_json, run.league_version = encode_league(league), version.id
    else:
        try:
            league = check_league_text(comp.league_toml, league_filename(db, cid))
        except LeagueError as e:
            raise Conflict(f"cannot open: {e}") from None
        league.tournament.seed = _secret_seed()
        league.path = league_filename(db, cid)
        league.bots = pinned_house(league.bots, house, images)
        run = db.begin_run(cid, out_dir="", league_json=encode_league(league), total_games=0, kind="ladder")
        if not isinstance(run, str):
            out = db.data_dir / f"competition-{cid}" / f"ladder-{run.id}"
            db.set_out_dir(run.id, str(out))
            run.out_dir = str(out)
    if isinstance(run, str):
        raise Conflict(f"cannot open: {run}")
    db.set_phase(cid, "open", concurrency=concurrency)
    if run.out_dir:  # a ladder from before entries had team ids: each gets its submission's team's
        set_team_ids(run.out_dir, lambda sid: team_of_submission(db, sid))
    return run, league, wanted_of(db, cid, policy, house, images), known_of(db, run.out_dir)


async def open_competition(room: Room, comp: Competition, concurrency: int | None = None) -> Run:
    """Open the competition (from setup or frozen): its ladder plays from now on."""
    if comp.phase not in ("setup", "frozen"):
        raise Conflict(f"competition {comp.id} is {comp.phase}: only a competition in setup or frozen opens")
    if comp.id in room.ladders and room.ladders[comp.id].alive():
        raise Conflict(f"competition {comp.id}'s ladder is playing already")
    db, settings = room.db, room.settings
    house = await _house_pins(room, comp, "cannot open")
    run, league, wanted, known = await db.call(
        _start_ladder,
        comp.id,
        settings.bot_policy,
        concurrency,
        house,
        allow_commands=settings.allow_house_commands,
        images=room.house_images,
    )
    thread = LadderWork(
        room, run, league, wanted, known, concurrency if concurrency is not None else comp.ladder_concurrency
    )
    thread.house = house
    room.ladders[comp.id] = thread
    thread.start()
    return run


def ladder_waiting(room: Room, cid: int) -> str | None:
    """Why the competition's ladder, playing, plays no game now and what to do (None: it plays)."""
    thread = room.ladders.get(cid)
    return thread.waiting if thread is not None else None


async def submission_accepted(room: Room, cid: int) -> list[EntryResult]:
    """A team's new version enters the competition's ladder at once (when it plays)."""
    thread = room.ladders.get(cid)
    if thread is None or not thread.alive():
        return []
    wanted = await room.db.call(wanted_of, cid, room.settings.bot_policy, thread.house, room.house_images)
    return await thread.reconcile(wanted)


async def stop_ladder(room: Room, cid: int, status: str, *, abandon: bool) -> None:
    thread = room.ladders.pop(cid, None)
    if thread is None:
        return
    thread.stop(status, abandon)
    await thread.join(120)


async def freeze(room: Room, comp: Competition) -> None:
    """Close submissions; the ladder stops once its games in flight end."""
    if comp.phase != "open":
        raise Conflict(f"competition {comp.id} is {comp.phase}: only an open competition freezes")
    await room.db.call(ServiceDB.set_phase, comp.id, "frozen")
    await stop_ladder(room, comp.id, "finished", abandon=False)


def _prepare_final(
    db: ServiceDB,
    cid: int,
    policy: AddressPolicy | None,
    seed: int | None = None,
    house: Mapping[str, PinnedURL] | None = None,
    images: Mapping[str, str] | None = None,
) -> tuple[Run, League]:
    """The final's run: the house bots (a URL one at its address in
    `house`, a built-in one as its image in `images` when built) and each
    team's newest version accepted before the freeze, on an adaptive
    schedule from fresh ratings and a new secret seed. Fewer bots than a
    table's seats (at least two): the empty seats are filled as the ladder
    fills them (``[ladder] fill``), by house bots."""
    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    if comp.phase != "frozen":
        raise Conflict(f"competition {cid} is {comp.phase}: the final starts once it is frozen")
    pending = [
        s
        for s in db.pending_submissions()
        if (t := db.team(s.team_id)) is not None and t.competition_id == cid
    ]
    if pending:
        raise Conflict(
            f"{len(pending)} submission(s) made before the freeze are still being checked: "
            "start the final once they are accepted or refused",
        )
    pairs = []
    for team in db.playing_teams(cid):
        sub = db.playing_submission(team.id, before=comp.frozen_at)
        if sub is not None and still_allowed(sub, policy):
            pairs.append((team, sub))
    try:
        league = build_league(comp.league_toml, pairs, league_filename(db, cid), house, images, fill=True)
    except LeagueError as e:
        raise Conflict(f"cannot start the final: {e}") from None
    league.tournament.schedule = "adaptive"
    league.tournament.seed = _secret_seed() if seed is None else seed
    limit = make_scheduler(league).limit or 0
    # every team bot's submission (not only those with a secret): who each bot of the run is (issue 32)
    secrets_from = msgspec.json.encode({t.name: s.id for t, s in pairs}).decode()
    run = db.begin_run(
        cid,
        out_dir="",
        league_json=encode_league(league),
        total_games=limit,
        secrets_from=secrets_from,
        kind="final",
    )
    if isinstance(run, str):
        raise Conflict(f"cannot start the final: {run}")
    out = db.data_dir / f"competition-{cid}" / f"final-{run.id}"
    db.set_out_dir(run.id, str(out))
    run.out_dir = str(out)
    db.set_phase(cid, "final")
    return run, with_secrets(db, league, secrets_from)


async def start_final(room: Room, comp: Competition, seed: int | None = None) -> Run:
    db, settings = room.db, room.settings
    house = await _house_pins(room, comp, "cannot start the final")
    run, league = await db.call(_prepare_final, comp.id, settings.bot_policy, seed, house, room.house_images)
    thread = room.run_work(run, league, resume=False)
    room.runs[run.id] = thread
    thread.start()
    return run


async def autoplay(room: Room) -> None:
    """At the server's start: open competitions play their ladder again,
    an unfinished final resumes."""
    db, settings = room.db, room.settings
    for comp in await db.call(ServiceDB.competitions_in, "open"):
        try:
            house = await _house_pins(room, comp, "cannot open")
            run, league, wanted, known = await db.call(
                _start_ladder,
                comp.id,
                settings.bot_policy,
                None,
                house,
                allow_commands=settings.allow_house_commands,
                images=room.house_images,
            )
        except ServiceError as e:
            await alerts.raise_alert(
                room,
                comp.id,
                "ladder",
                f"the ladder could not start again with the server: {e.message}",
                "fix what the cause names (the league file, the server's flags), then freeze and reopen the "
                "competition (Phase, above)",
            )
            continue
        thread = LadderWork(room, run, league, wanted, known, comp.ladder_concurrency)
        thread.house = house
        room.ladders[comp.id] = thread
        thread.start()
    for comp in await db.call(ServiceDB.competitions_in, "final"):
        final = await db.call(ServiceDB.latest_run_of, comp.id, "final")
        if final is None or final.status == "finished":
            continue
        try:
            run, league = await db.call(
                prepare_run,
                comp.id,
                resume=True,
                policy=settings.bot_policy,
                allow_commands=settings.allow_house_commands,
                images=room.house_images,
            )
        except ServiceError as e:
            await alerts.raise_alert(
                room,
                comp.id,
                "final",
                f"the final could not resume with the server: {e.message}",
                "fix what the cause names (the server's flags, the data folder), then restart the server: "
                "the final resumes where it stopped",
            )
            continue
        await alerts.resolve(room, comp.id, "final")
        final_thread = room.run_work(run, league, resume=True)
        room.runs[run.id] = final_thread
        final_thread.start()
