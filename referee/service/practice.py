"""Practice games on demand (issue 26): a team plays its newest accepted
version against the opponents it picks, unrated and private.

The opponents a team may pick (:func:`choices`): the league file's house
bots, its own earlier accepted versions, and the other teams' versions in
play when the league file's ``[ladder] practice_against_teams = true``. A
practice game seats the competition's ``table_size`` bots for one deal at
every seat rotation (as the ladder deals it: the same cards each rotation
when the league is ``duplicate``, so the team's bot holds every seat's
cards; ``table_size`` games), under its rules,
timeouts, fault policy and container limits, with the same bot factory
and executor as the ladder (:class:`~referee.tournament.runner.Tournament`
of one game in a folder of its own, ``competition-N/practice/game-M``):
nothing of it reaches the ladder's store, the standings or the ratings.

Limits, per team: one game in flight (queued or playing) and
``practice_per_hour`` asked for in the last hour (then 429 with
``Retry-After``).

The ladder keeps its pace (:class:`PracticeQueue`): the whole service plays
one practice game at a time, each in a **child process** of its own
(:class:`PracticeProcess`, :mod:`~referee.service.practice_worker`) at the
lowest CPU priority (nice 19, set before it imports anything: on a busy
machine the ladder is always scheduled first), so it shares neither the
ladder's interpreter lock nor its event loop, and never takes a slot of a
ladder's concurrency or a ladder's bots. The child is given, explicitly, the
pinned league (over its stdin, with the bots' secrets), the game's folder,
the operator's container runtime, the service's instance (its containers'
names and labels), the executor (in the child, or on the service's Ray
cluster, its images through the service's ``--registry``) and
``DOCKER_HOST`` (:meth:`PracticeQueue.job_of`); the bot address policy is
applied here, when the league is pinned (every URL bot at the address
admitted), so the child resolves no name. Its stdout and stderr
go to the game folder's ``practice.log``. ``benchmarks/practice.py``
measures the ladder's pace during a flood of practice games.

Whose failure it is, as data: a bot's faults are the team's, recorded in
the game as on the ladder; the child killed (``kill -9``, the OOM killer),
crashing, failing to start, or running past ``practice_timeout_s``
(``referee serve --practice-timeout``) fails the game with a message that
says it is the service's (:data:`SERVICE_FAULT`), the containers a killed
child left removed, and the queue plays on. Stopping the service closes the
child's stdin (it abandons the game, stopping its bots and containers; it is
killed :data:`STOP_GRACE_S` later if it has not exited) and the game is
queued again, played from the start at the next start; a child whose
service died sees its stdin end and stops the same way.

Private: only the team's own token or session, and the admin, see its
practice games; anyone else is told there is no such game (404).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import msgspec

from ..bots.factory import BotSpec
from ..bots.netpolicy import AddressPolicy, PinnedURL
from ..bots.sandbox.docker_daemon import RUNTIME_ENV
from ..bots.sandbox.instance import Instance
from ..tournament.ladder import entry_name
from ..tournament.league import League, LeagueError
from ..tournament.results import games_list
from .db_check import inside
from .errors import Conflict, Invalid, RateLimited, ServiceError
from .practice_worker import LOG_FILE, OUTCOME_FILE, Outcome, PracticeJob
from .practice_worker import play as play_job
from .room import Room
from .runs import (
    check_league_text,
    league_filename,
    pin_house_text,
    pinned_house,
    still_allowed,
    team_entry,
)
from .store import Competition, ServiceDB, Submission, Team
from .store.practice import (
    PracticeGame,
    PracticeStatus,
    Result,
    Seat,
    add_game,
    limits_of,
    next_queued,
    requeue_playing,
    set_ended,
    set_playing,
)

log = logging.getLogger("referee.web")

#: The placeholder address of a person's seat in a practice league (never dialled).
HUMAN_URL = "human:"
#: Retry-After (seconds) while a team's practice game is in flight.
IN_FLIGHT_RETRY_S = 15
#: The CPU priority of the practice process (the ladder's is the service's, 0).
NICE = 19


class Choice(msgspec.Struct, kw_only=True):
    value: str
    label: str


class PracticeInfo(msgspec.Struct, kw_only=True):
    """A practice game as the API answers it."""

    id: int
    status: PracticeStatus
    opponents: list[str]
    error: str | None
    created_at: float
    finished_at: float | None
    results: list[Result]
    #: Each game's replay from the team's seat, once played.
    replays: list[str]
    #: Whether a team member took the team's seat (in the browser) instead of its bot.
    human: bool = False


class PracticeList(msgspec.Struct, kw_only=True):
    games: list[PracticeInfo]
    #: The opponents the team may pick now, and how many a game seats.
    choices: list[Choice]
    opponents: int
    per_hour: int


class PracticeRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    #: ``table_size - 1`` picks among the choices (a pick may repeat).
    opponents: list[str]


def info(g: PracticeGame) -> PracticeInfo:
    return PracticeInfo(
        id=g.id,
        status=g.status,
        opponents=[s.name for s in g.seats if s.kind not in ("self", "human")],
        error=g.error,
        created_at=g.created_at,
        finished_at=g.finished_at,
        results=g.results,
        replays=[f"/team/practice/{g.id}?game={r.index}&seat={r.seat}" for r in g.results],
        human=any(s.kind == "human" for s in g.seats),
    )


# ------------------------------------------------------------ the picks


def league_of(comp: Competition, db: ServiceDB) -> League:
    return check_league_text(comp.league_toml, league_filename(db, comp.id))


def choices(
    db: ServiceDB, team: Team, gone: frozenset[str] = frozenset(), *, human: bool = False
) -> tuple[list[Choice], int]:
    """What `team` may pick as opponents now, and how many a game seats
    besides its own bot: never a withdrawn team's bot, nor an earlier
    version whose image is `gone` from the server (pruned: :func:`images_gone`).
    `human`: a team member takes the team's seat, so its newest version is
    an opponent too. :class:`LeagueError` when the league is broken."""
    comp = db.competition(team.competition_id)
    assert comp is not None
    league = league_of(comp, db)
    out = [Choice(value=f"house:{b.name}", label=f"house bot {b.name}") for b in league.bots]
    newest = db.playing_submission(team.id)
    for sub in db.submissions(team.id, limit=1000):
        if sub.status != "accepted" or image_of(sub) in gone:
            continue
        number = db.submission_number(sub.id)
        if newest is None or sub.id != newest.id:
            out.append(Choice(value=f"version:{sub.id}", label=f"your earlier version v{number}"))
        elif human:
            out.append(Choice(value=f"version:{sub.id}", label=f"your current version v{number}"))
    if league.ladder.practice_against_teams:
        for other in db.playing_teams(team.competition_id):  # a withdrawn team's bot is gone (issue 32)
            if other.id != team.id and db.playing_submission(other.id) is not None:
                out.append(Choice(value=f"team:{other.id}", label=f"team {other.name}'s current version"))
    return out, league.tournament.table_size - 1


def image_of(sub: Submission) -> str | None:
    """The image a submission's bot runs (None: a URL bot)."""
    return None if sub.kind == "url" else sub.image_id or sub.image


def earlier_images(db: ServiceDB, team: Team) -> list[str]:
    """The images of the team's accepted versions (those practice may seat)."""
    return [i for s in db.submissions(team.id, limit=1000) if s.status == "accepted" and (i := image_of(s))]


def images_gone(images: list[str]) -> frozenset[str]:
    """Those of `images` no longer on the Docker daemon (a superseded
    version's image is pruned once nothing needs it: :mod:`.storage`);
    blocking. None gone when Docker cannot be asked (a game then fails with
    Docker's own reason, as the service's)."""
    if not images:
        return frozenset()
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, image_exists

    try:
        client = docker_client()
        return frozenset(i for i in images if not image_exists(i, client))
    except (DockerUnavailable, ImportError):  # no Docker here: nothing can be told gone
        return frozenset()


async def gone_images(room: Room, team: Team) -> frozenset[str]:
    """The team's earlier versions' images no longer on the server (:func:`images_gone`)."""
    images = await room.db.call(earlier_images, team)
    return await asyncio.to_thread(images_gone, images)


def new_game(
    db: ServiceDB,
    team: Team,
    picks: list[str],
    per_hour: int,
    gone: frozenset[str],
    now: float,
    human: str | None = None,
) -> PracticeGame:
    """The game asked for; :class:`RateLimited` when the limits say no (in one go, in the db's thread).
    `human`: the name of a team member's seat (the game is playing at once:
    it is played in the service's process, never queued)."""
    flying, times = limits_of(db, team.id, now - 3600)
    if flying:
        raise RateLimited(
            "your practice game is still being played: one at a time per team, ask again once it is over",
            retry_after=IN_FLIGHT_RETRY_S,
        )
    if len(times) >= per_hour:
        wait = int(times[0] + 3600 - now + 0.999)
        raise RateLimited(
            f"{per_hour} practice games an hour per team: the next one may be asked for in {wait} s",
            retry_after=wait,
        )
    game = add_game(db, team, seats_for(db, team, picks, gone, human), now)
    if human is not None:
        set_playing(db, game.id)
        game.status = "playing"
    return game


async def ask(room: Room, team: Team, picks: list[str]) -> PracticeGame:
    """A practice game for `team` against `picks`; :class:`Conflict` when
    practice is off, :class:`RateLimited` past the team's limits."""
    per_hour = room.settings.practice_per_hour
    if per_hour <= 0:
        raise Conflict("practice games are off on this server (referee serve --practice-per-hour 0)")
    gone = await gone_images(room, team)  # an earlier version whose image was pruned cannot play
    return await room.db.call(new_game, team, picks, per_hour, gone, room.clock.time())


def gone_version(version: int) -> str:
    return (
        f"your earlier version v{version} can no longer play: its image was removed from the server to "
        "save space (the service keeps the images of the versions in play and of the games that still "
        "need them). Pick another opponent, or submit that version again to play against it"
    )


def seats_for(
    db: ServiceDB, team: Team, picks: list[str], gone: frozenset[str] = frozenset(), human: str | None = None
) -> list[Seat]:
    """The table a team's picks make, its own newest version first, or the
    seat of a team member named `human` (`gone`: the images no longer on
    the server); :class:`Conflict` or :class:`Invalid` (about the field
    ``opponents``) saying why not."""
    try:
        allowed, wanted = choices(db, team, gone, human=human is not None)
    except LeagueError as e:
        raise Conflict(
            f"the competition's league file is broken (the admin's to fix): {e}", field="opponents"
        ) from None
    newest = db.playing_submission(team.id)
    if newest is None and human is None:
        raise Conflict(
            "your team has no accepted version yet: a practice game plays your newest "
            "accepted version, so submit one and wait for its check",
            field="opponents",
        )
    if len(picks) != wanted:
        raise Invalid(
            f"a table of this competition seats {wanted + 1} bots: pick exactly {wanted} "
            f"opponent(s), not {len(picks)}",
            field="opponents",
        )
    values = {c.value for c in allowed}
    if human is not None:
        seats = [Seat(kind="human", name=human, pick="human")]
    else:
        assert newest is not None
        seats = [
            Seat(
                kind="self",
                name=entry_name(team.name, db.submission_number(newest.id)),
                pick="self",
                submission=newest.id,
            )
        ]
    for pick in picks:
        if pick not in values:
            kind, _, rest = pick.partition(":")
            picked = _picked(db, team, kind, rest)
            if isinstance(picked, Team):
                raise Conflict(
                    f"opponent {pick!r} cannot be picked: team {picked.name!r} was withdrawn from the "
                    "competition, and a withdrawn team's bot plays no more games, practice games included",
                    field="opponents",
                )
            if picked is not None and image_of(picked) in gone:
                raise Conflict(
                    f"opponent {pick!r} cannot be picked: {gone_version(db.submission_number(picked.id))}",
                    field="opponents",
                )
            if kind == "team":
                why = (
                    "this competition's league file does not let teams practise against other teams "
                    "([ladder] practice_against_teams = false)"
                )
            else:
                why = "it is none of your choices (house bots, your earlier accepted versions)"
            raise Invalid(f"opponent {pick!r} cannot be picked: {why}", field="opponents")
        kind, _, rest = pick.partition(":")
        if kind == "house":
            seats.append(Seat(kind="house", name=rest, pick=pick, house=rest))
        elif kind == "version":
            sid = int(rest)
            seats.append(
                Seat(
                    kind="version",
                    name=entry_name(team.name, db.submission_number(sid)),
                    pick=pick,
                    submission=sid,
                )
            )
        else:
            other = db.team(int(rest))
            sub = db.playing_submission(int(rest))
            assert other is not None and sub is not None
            seats.append(
                Seat(
                    kind="team",
                    name=entry_name(other.name, db.submission_number(sub.id)),
                    pick=pick,
                    submission=sub.id,
                )
            )
    seen: dict[str, int] = {}
    for s in seats:  # a bot picked twice sits twice, under two names
        seen[s.name] = seen.get(s.name, 0) + 1
        if seen[s.name] > 1:
            s.name = f"{s.name} #{seen[s.name]}"
    return seats


def _picked(db: ServiceDB, team: Team, kind: str, rest: str) -> Team | Submission | None:
    """What a pick refused names, to say why: a withdrawn team of the
    competition, or an earlier accepted version of the team's own."""
    if not rest.isdigit() or len(rest) > 18:
        return None
    if kind == "team":
        other = db.team(int(rest))
        ok = other is not None and other.competition_id == team.competition_id and other.withdrawn_at
        return other if ok else None
    if kind == "version":
        sub = db.submission(int(rest))
        return sub if sub is not None and sub.team_id == team.id and sub.status == "accepted" else None
    return None


def practice_league(
    db: ServiceDB,
    game: PracticeGame,
    policy: AddressPolicy | None,
    house: Mapping[str, PinnedURL],
    images: Mapping[str, str] | None = None,
) -> League:
    """The one-game league of a practice game: the competition's league
    (rules, timeouts, faults, containers, table size) with the seats'
    bots, their secrets, on a fresh seed. :class:`Conflict` when a bot is
    gone (a URL the service no longer allows)."""
    comp = db.competition(game.competition_id)
    assert comp is not None
    league = league_of(comp, db)
    by_name = {b.name: b for b in pinned_house(league.bots, house, images)}
    bots: list[BotSpec] = []
    for s in game.seats:
        if s.kind == "human":  # played by the transport the game is given (:mod:`.human_practice`)
            spec = BotSpec(name=s.name, url=HUMAN_URL)
        elif s.kind == "house":
            house_bot = by_name.get(s.house or "")
            if house_bot is None:
                raise Conflict(f"house bot {s.house!r} is no longer in the league file")
            spec = house_bot
        else:
            assert s.submission is not None
            sub = db.submission(s.submission)
            team = db.team(sub.team_id) if sub is not None else None
            if team is not None and team.withdrawn_at is not None:
                raise Conflict(
                    f"{s.name} can no longer play: its team was withdrawn from the competition "
                    "(a withdrawn team's bot plays no more games)",
                )
            if sub is None or team is None or not still_allowed(sub, policy):
                raise Conflict(f"{s.name} can no longer play: its address is not one the service allows")
            spec = msgspec.structs.replace(team_entry(team, sub), secret=sub.secret)
        bots.append(msgspec.structs.replace(spec, name=s.name))
    t = msgspec.structs.replace(
        league.tournament,
        schedule="round-robin",
        rounds=1,
        concurrency=1,
        name=f"practice-{game.id}",
        seed=secrets.randbits(62),
    )
    return msgspec.structs.replace(league, bots=bots, tournament=t)


# ------------------------------------------------------------ playing

#: The child's first statement: the lowest CPU priority, before it imports
#: anything of the referee's (its start-up costs the ladder nothing either).
_BOOT = (
    "import os, sys; os.setpriority(os.PRIO_PROCESS, 0, int(sys.argv[1])); "
    "from referee.service.practice_worker import main; sys.exit(main())"
)
#: Seconds a stopped child has to abandon its game (its bots stopped, its
#: containers removed) before it is killed.
STOP_GRACE_S = 10.0
#: What a practice game's failure says when it is the service's.
SERVICE_FAULT = "a fault of the service, not of your bot: ask for the game again"


def _source_root() -> str:
    """The folder that holds this ``referee`` package: the child runs the service's own code."""
    return str(Path(__file__).resolve().parents[2])


def ray_address(kind: str, address: str | None) -> str | None:
    """The Ray cluster a child joins: the service's ``--executor-address``,
    else the cluster the service started (:func:`~.runs.start_ray`), else
    None (the child's executor starts one of its own, as a run's would)."""
    if kind != "ray" or address is not None:
        return address
    try:
        import ray  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().gcs_address)


class Ending(msgspec.Struct, kw_only=True):
    """How a child's game ended, as the service saw it."""

    #: The child's own report (None: it wrote none: it crashed, was killed or never started).
    outcome: Outcome | None = None
    #: The child's exit code (negative: the signal that killed it; None: it never started).
    returncode: int | None = None
    #: Why it could not start; or that the service stopped it past its bound.
    start_error: str | None = None
    timed_out: bool = False


#: How a practice game is played: its job and bound in seconds, its ending.
PracticeRunner = Callable[[PracticeJob, float], Awaitable[Ending]]


async def in_process(job: PracticeJob, bound_s: float) -> Ending:
    """A practice game played on the service's own loop (no child process):
    for a service driven by a test on one loop (``tests/service``), where the
    bots are in this process too. The real service plays each in a child
    (:class:`PracticeProcess`), so that a practice game never shares the ladder's interpreter."""
    Path(job.out_dir).mkdir(parents=True, exist_ok=True)
    outcome = await play_job(job)
    return Ending(outcome=outcome, returncode=0)


class PracticeProcess:
    """One practice game played by a child process at the lowest CPU priority
    (:mod:`~referee.service.practice_worker`), its output to the game folder's
    ``practice.log``. :meth:`stop` closes its stdin (it abandons the game and
    exits), and kills it :data:`STOP_GRACE_S` later if it has not."""

    def __init__(self, job: PracticeJob, *, nice: int = NICE, python: str = sys.executable) -> None:
        self.job = job
        self.out = Path(job.out_dir)
        self.argv = [python, "-c", _BOOT, str(nice)]
        self.process: asyncio.subprocess.Process | None = None
        self.stopped = False
        self._kill: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def environment(self) -> dict[str, str]:
        """The child's environment: the service's, with the settings the job
        carries set (or unset) explicitly and this package first on the path."""
        env = dict(os.environ)
        for key, value in ((RUNTIME_ENV, self.job.runtime), ("DOCKER_HOST", self.job.docker_host)):
            if value:
                env[key] = value
            else:
                env.pop(key, None)
        env["PYTHONPATH"] = os.pathsep.join([_source_root(), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["PYTHONUNBUFFERED"] = "1"
        return env

    async def play(self, bound_s: float) -> Ending:
        """Start the child, give it the job and wait for it (at most `bound_s`
        seconds: then it is stopped, and killed if it does not stop)."""
        self.out.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (self.out / OUTCOME_FILE).unlink()
        with (self.out / LOG_FILE).open("ab") as log_file:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=log_file,
                    stderr=log_file,
                    env=self.environment(),
                    cwd=os.getcwd(),
                    start_new_session=True,  # its own group: the terminal's Ctrl-C is the service's to handle
                )
            except OSError as e:
                log_file.write(f"--- the service could not start {self.argv[0]}: {e}\n".encode())
                return Ending(start_error=f"{type(e).__name__}: {e}")
        process = self.process
        assert process.stdin is not None
        timed_out = False
        try:
            process.stdin.write(msgspec.json.encode(self.job) + b"\n")
            with contextlib.suppress(ConnectionError):  # it died already: its exit code says how
                await process.stdin.drain()
            if self.stopped:  # asked to stop while it started
                self.stop()
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), bound_s)
            except TimeoutError:
                timed_out = not self.stopped
                self.stop()
                await process.wait()
        finally:
            if process.returncode is None:  # cancelled: never leave the child behind
                self.kill()
                with contextlib.suppress(Exception):
                    await asyncio.shield(process.wait())
            if self._kill is not None:
                self._kill.cancel()
            # whatever it started in its group (its own group: nothing of the service's)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        rc = process.returncode
        with contextlib.suppress(OSError), (self.out / LOG_FILE).open("ab") as log_file:
            how = f"killed by {_signal_name(rc)}" if rc is not None and rc < 0 else f"exit code {rc}"
            log_file.write(
                f"--- the service: the practice process ended ({how})"
                f"{', past its bound' if timed_out else ''}\n".encode()
            )
        outcome = None
        with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
            outcome = msgspec.json.decode((self.out / OUTCOME_FILE).read_bytes(), type=Outcome)
        return Ending(outcome=outcome, returncode=process.returncode, timed_out=timed_out)

    def stop(self) -> None:
        """Abandon the game: close the child's stdin; kill it if it is still there after the grace."""
        self.stopped = True
        process = self.process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        if self._kill is None:
            self._kill = asyncio.get_running_loop().call_later(STOP_GRACE_S, self.kill)

    def kill(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def service_fault(ending: Ending, bound_s: float) -> str | None:
    """What a child's ending says when the game ended through no bot's doing,
    naming the service as the one at fault; None when the child reported."""
    if ending.start_error is not None:
        return (
            f"the service could not start the practice game's process ({ending.start_error}): {SERVICE_FAULT}"
        )
    if ending.timed_out:
        return (
            f"the service stopped it after {bound_s:.0f} s, the longest it lets a practice game run "
            f"(its own limit: a bot within its move time is not to blame): {SERVICE_FAULT}"
        )
    rc = ending.returncode
    if rc is not None and rc < 0:
        return (
            f"the service's practice process was killed mid-game ({_signal_name(rc)}: out of memory, "
            f"or stopped on the server): {SERVICE_FAULT}"
        )
    if ending.outcome is None:
        return f"the service's practice process crashed (exit code {rc}) before it reported: {SERVICE_FAULT}"
    if ending.outcome.status == "crashed":
        return f"the service failed to play it ({ending.outcome.error}): {SERVICE_FAULT}"
    return None


def remove_orphans(out: str, instance: Instance) -> list[str]:
    """The containers a killed child left for this game (blocking): its own
    (``referee.out`` is the game's folder), of this instance, their referee process gone."""
    from ..bots.sandbox.docker_daemon import DockerUnavailable, cleanup_containers, docker_client

    try:
        client = docker_client()
    except DockerUnavailable:
        return []
    return cleanup_containers({"referee.out": out}, orphans_only=True, client=client, instance=instance)


def results_of(game: PracticeGame) -> list[Result]:
    """The games recorded in a practice game's folder, from the team's seat (blocking)."""
    own = game.seats[0].name
    return [
        Result(index=r.index, names=r.seats, places=r.places, seat=r.seats.index(own))
        for r in games_list(game.out_dir)
        if own in r.seats
    ]


class PracticeQueue:
    """The service's practice games, played one at a time, oldest first,
    each by a child process (:class:`PracticeProcess`)."""

    def __init__(self, room: Room, runner: PracticeRunner | None = None) -> None:
        self.room = room
        #: How a game is played: a child process (:func:`in_child`) unless the service was given another.
        self.runner = runner
        self.wake = asyncio.Event()
        self.current: PracticeProcess | None = None
        self.stopping = False
        self.task: asyncio.Task[None] | None = None
        #: The interpreter of the children (the service's own).
        self.python = sys.executable
        #: Practice games played since the server started.
        self.played = 0

    async def run(self) -> None:
        db = self.room.db
        while not self.stopping:
            game = await db.call(next_queued)
            if game is None:
                self.wake.clear()
                if await db.call(next_queued) is None:  # one asked for meanwhile: no wait
                    await self.wake.wait()  # until a game is asked for (:meth:`asked`) or the queue stops
                continue
            try:
                await self.play(game)
            except Exception:  # the queue plays on
                log.exception("practice game %s", game.id)
                await db.call(
                    set_ended,
                    game.id,
                    "failed",
                    f"the service failed to play it (the admin's to look at): {SERVICE_FAULT}",
                )
            self.room.changed(game.competition_id)  # its page, and whoever waits on it

    async def job_of(self, game: PracticeGame, league: League) -> tuple[PracticeJob, Instance]:
        """The child's job: the league and each setting of the service's it plays under, explicitly."""
        from .pipeline import service_instance

        db, settings = self.room.db, self.room.settings
        instance = await db.call(service_instance)
        pins = str(instance.pins_file) if instance.pins_file is not None else None
        job = PracticeJob(
            league=league,
            out_dir=game.out_dir,
            runtime=os.environ.get(RUNTIME_ENV) or None,
            instance_id=instance.id,
            pins_file=pins,
            executor=settings.executor,
            executor_address=ray_address(settings.executor, settings.executor_address),
            executor_workers=settings.executor_workers,
            executor_registry=settings.executor_registry,
            docker_host=os.environ.get("DOCKER_HOST") or None,
        )
        return job, instance

    async def run_job(self, job: PracticeJob) -> Ending:
        """Play `job` in a child process (:attr:`current` meanwhile), or as the service's runner says."""
        if self.runner is not None:
            return await self.runner(job, self.room.settings.practice_timeout_s)
        child = PracticeProcess(job, python=self.python)
        self.current = child
        try:
            if self.stopping:
                child.stopped = True
            return await child.play(self.room.settings.practice_timeout_s)
        finally:
            self.current = None

    async def play(self, game: PracticeGame) -> None:
        db, settings = self.room.db, self.room.settings
        comp = await db.call(ServiceDB.competition, game.competition_id)
        assert comp is not None
        try:
            house = await pin_house_text(
                comp.league_toml,
                settings.bot_policy,
                anywhere=settings.house_urls_anywhere,
                allow_commands=settings.allow_house_commands,
            )
            league = await db.call(practice_league, game, settings.bot_policy, house, self.room.house_images)
            await self._images_there(game, league)
        except ServiceError as e:  # a seat that can no longer play, a house bot refused
            await db.call(set_ended, game.id, "failed", e.message)
            return
        await db.call(set_playing, game.id)
        # a game the server stopped in the middle of is played again from the start;
        # its folder is removed only inside the data folder (a row edited by hand or
        # restored from elsewhere is refused at start, and never removes anything else)
        if not inside(game.out_dir, db.data_dir):
            await db.call(set_ended, game.id, "failed", "its folder is outside the data folder: not played")
            log.error(
                "practice game %s: its folder %s is outside the data folder: not played",
                game.id,
                game.out_dir,
            )
            return
        await asyncio.to_thread(shutil.rmtree, game.out_dir, True)
        job, instance = await self.job_of(game, league)
        ending = await self.run_job(job)
        outcome = ending.outcome
        ended_badly = outcome is None or outcome.status in ("interrupted", "crashed")
        if ended_badly and any(b.image is not None for b in league.bots):  # what a killed child left
            removed = await asyncio.to_thread(remove_orphans, game.out_dir, instance)
            if removed:
                log.warning(
                    "practice game %s: removed its containers left behind: %s", game.id, ", ".join(removed)
                )
        if self.stopping and (outcome is None or outcome.status != "played"):
            await db.call(requeue_playing)  # played again at the next start
            return
        self.played += 1
        results = await asyncio.to_thread(results_of, game)
        bound = settings.practice_timeout_s
        fault = service_fault(ending, bound)
        if fault is None and outcome is not None and outcome.status == "interrupted":
            fault = f"the practice process was stopped from outside the service ({outcome.error}): {SERVICE_FAULT}"
        if fault is not None:
            log.warning(
                "practice game %s failed: %s (its log: %s)", game.id, fault, Path(game.out_dir) / LOG_FILE
            )
            await db.call(set_ended, game.id, "failed", fault, results)
            return
        assert outcome is not None
        if not results or outcome.error is not None:
            why = outcome.error or "; ".join(outcome.log) or "no game was recorded"
            await db.call(set_ended, game.id, "failed", f"the game could not be played: {why}", results)
            return
        await db.call(set_ended, game.id, "finished", None, results)

    async def _images_there(self, game: PracticeGame, league: League) -> None:
        """:class:`Conflict` when a seat's image was pruned since the game was asked for."""
        gone = await asyncio.to_thread(images_gone, [b.image for b in league.bots if b.image])
        for seat, bot in zip(game.seats, league.bots, strict=True):
            if bot.image in gone and seat.submission is not None:
                version = await self.room.db.call(ServiceDB.submission_number, seat.submission)
                if seat.kind == "version":
                    raise Conflict(gone_version(version))
                raise Conflict(
                    f"{seat.name} can no longer play: its image is no longer on the server "
                    f"(the service's fault, not your bot's): {SERVICE_FAULT}",
                )

    async def start(self) -> None:
        """Play from now on (a game that was playing when the service stopped is played again)."""
        await self.room.db.call(requeue_playing)
        self.task = asyncio.create_task(self.run(), name="practice")

    def asked(self) -> None:
        """A game was asked for: the queue looks now."""
        self.wake.set()

    async def stop(self) -> None:
        """Stop promptly: the game playing is abandoned (played again at the next start)."""
        self.stopping = True
        self.wake.set()
        current = self.current
        if current is not None:
            current.stop()
        task = self.task
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), STOP_GRACE_S + 20)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
