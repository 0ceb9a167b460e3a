"""Competitions played as tournaments: the league of a run and starting it.

A competition's league file holds the rules, timeouts, ratings and any house
bots; the teams' latest submissions are added as ``[[bots]]`` when a run
starts, and the league actually played is stored with the run (so a resume
plays exactly the same league). A run is a :class:`referee.tournament.runner.Tournament`
writing into its own folder; reading its results from that folder is
:mod:`referee.tournament.results`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import logging
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from ..bots.factory import BotSpec
from ..bots.house import is_builtin, with_image
from ..bots.netpolicy import (
    AddressPolicy,
    AddressRefused,
    BotURLError,
    PinnedURL,
    Resolve,
    admit_url,
    check_url,
)
from ..tournament.executors import Executor, ExecutorError, InFlight, LocalExecutor, RayExecutor
from ..tournament.ladder import filler_spec
from ..tournament.league import (
    League,
    LeagueError,
    TomlLines,
    check_league,
    parse_league,
)
from ..tournament.results import RunRatings
from ..tournament.runner import Interrupted, Tournament
from .errors import Conflict, NotFound
from .hosts import Host
from .store import Run, ServiceDB, Submission, Team

log = logging.getLogger(__name__)


def containers_enabled() -> bool:
    """Image submissions are accepted when the container bots module exists."""
    try:
        return importlib.util.find_spec("referee.bots.sandbox.container") is not None
    except (ImportError, ValueError):
        return False


def check_league_text(text: str, filename: str = "league.toml") -> League:
    """Parse and check a competition's league text, teams' bots still to come.
    Raises :class:`LeagueError` naming the line."""
    return parse_league(text, filename, bots_to_come=True)


def house_bots(text: str) -> list[str]:
    return [b.name for b in check_league_text(text).bots]


def team_entry(team: Team, sub: Submission) -> BotSpec:
    """A team's bot as a league entry: an uploaded image by the id it was
    pinned to, a URL with the address it was pinned to at admission. No
    secret: it is read from the submission when the run starts
    (:func:`with_secrets`), so it is stored once."""
    if sub.kind in ("archive", "source"):
        assert sub.image_id is not None, f"submission {sub.id} has no image"
        return BotSpec(name=team.name, image=sub.image_id)
    if sub.kind == "image":
        return BotSpec(name=team.name, image=sub.image_id or sub.image)
    return BotSpec(name=team.name, url=sub.url, address=sub.address)


def build_league(
    text: str,
    teams: list[tuple[Team, Submission]],
    filename: str,
    house: Mapping[str, PinnedURL] | None = None,
    images: Mapping[str, str] | None = None,
    *,
    fill: bool = False,
) -> League:
    """The league a run plays: the competition's league, its house URL bots
    pinned to the addresses admitted (`house`, :func:`pin_house_urls`), its
    built-in house bots as the service's images when `images` holds them,
    with the teams' bots. `fill` (the final): fewer bots than a table's seats
    but at least two, the empty seats are filled with the league's ``[ladder]
    fill`` built-in bot, as the ladder fills them (``house-greedy-1``...)."""
    league = parse_league(text, filename, bots_to_come=True)
    league.bots = pinned_house(league.bots, house, images)
    league.bots += [team_entry(t, s) for t, s in teams]
    k = league.tournament.table_size
    if fill and league.ladder.fill != "none" and min(k, 2) <= len(league.bots) < k:
        taken = {b.name for b in league.bots}
        fillers = (filler_spec(league.ladder.fill, i, images) for i in itertools.count(1))
        league.bots += list(
            itertools.islice((b for b in fillers if b.name not in taken), k - len(league.bots))
        )
    check_league(league, filename, TomlLines(text))
    return league


def with_secrets(db: ServiceDB, league: League, secrets_from: str | None) -> League:
    """The league with each team bot's secret read from its submission."""
    if not secrets_from:
        return league
    ids = msgspec.json.decode(secrets_from, type=dict[str, int])
    bots = []
    for b in league.bots:
        sid = ids.get(b.name)
        sub = db.submission(sid) if sid is not None else None
        bots.append(msgspec.structs.replace(b, secret=sub.secret) if sub is not None and sub.secret else b)
    return msgspec.structs.replace(league, bots=bots)


def encode_league(league: League) -> str:
    return msgspec.json.encode(league).decode()


def decode_league(data: str) -> League:
    return msgspec.json.decode(data, type=League)


# ------------------------------------------------------------------ running


def executor_factory(
    kind: str, address: str | None = None, workers: int = 2, registry: str | None = None
) -> Callable[[], Executor]:
    """Where a run's games are played (``referee serve --executor``): a new
    executor for each run, made in the run's thread. With Ray, the cluster
    is joined once by the service (:func:`start_ray`); a run's executor has
    its own worker actors and leaves the cluster up when it closes; its
    image bots' images go to the nodes through `registry` (``--registry``)."""
    if kind == "ray":
        return lambda: RayExecutor(address=address, workers=workers, registry=registry)
    return LocalExecutor


def watched(executor: Executor, games: InFlight) -> Executor:
    """`executor`, listing its games in flight in `games` when it plays them
    in this process (:class:`LocalExecutor`); a Ray executor's games play in
    other processes and cannot be watched live."""
    if isinstance(executor, LocalExecutor):
        executor.in_flight = games
    return executor


def start_ray(address: str | None) -> None:
    """Join (or start, on loopback) the Ray cluster the service's runs play on;
    :class:`ExecutorError` when it cannot be."""
    RayExecutor(address=address, workers=0)


def record_end(db_path: Path, rid: int, status: str, error: str | None) -> None:
    """A run's (or a ladder's) end recorded in the service database, from
    the side of its host (its own connection: the host may be a thread).
    A finished run's ratings are checkpointed at its last game first (see
    :func:`seal_ratings`)."""
    db = ServiceDB(db_path)
    try:
        if status == "finished":
            seal_ratings(db, rid)
        db.end_run(rid, status, error)
    finally:
        db.close()


def seal_ratings(db: ServiceDB, rid: int) -> None:
    """Checkpoint the ratings of run `rid` at its last game, as the pages
    compute them (:class:`~referee.tournament.results.RunRatings` of its
    stored league): the first view after a start then replays no game,
    where it replayed up to a checkpoint's worth (1,000 games: seconds of
    TrueSkill). Never raises: without it the pages replay those games."""
    try:
        run = db.run(rid)
        if run is None or not run.out_dir or not run.league_json:
            return
        RunRatings(decode_league(run.league_json), ladder=run.kind == "ladder").update(run.out_dir, seal=True)
    except Exception as e:  # noqa: BLE001 - the standings do not need it: the pages replay instead
        log.warning("run %s: its ratings were not checkpointed at its end (%s)", rid, e)


class RunWork:
    """A run played on a :class:`~referee.service.hosts.Host` (by default a
    thread of its own with its own event loop: the service's loop stays free).
    `on_game`: called on the host's side after each game is recorded."""

    def __init__(
        self,
        db_path: Path,
        run: Run,
        league: League,
        *,
        resume: bool,
        host: Host,
        executor: Callable[[], Executor] = LocalExecutor,
        on_game: Callable[[int], None] | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self.db_path = db_path
        #: Called (on the host's side) once the run's end is recorded.
        self.on_end = on_end
        self.run = run
        self.league = league
        self.resume = resume
        self.host = host
        self.make_executor = executor
        self.on_game = on_game
        self.tournament: Tournament | None = None
        self.status = "running"
        self.error: str | None = None
        self._stop: bool | None = None  # asked to stop before the tournament was made: abandon or not
        #: Its games in flight, for those who watch them (a local executor's only).
        self.in_flight = InFlight()

    def start(self) -> None:
        self.host.start(self._main, self._ended)

    def _ended(self) -> None:
        record_end(self.db_path, self.run.id, self.status, self.error)
        if self.on_end is not None:
            self.on_end()

    async def _main(self) -> None:
        log: list[str] = []
        executor: Executor | None = None
        try:
            executor = watched(self.make_executor(), self.in_flight)
            self.tournament = Tournament(
                self.league,
                Path(self.run.out_dir),
                resume=self.resume,
                progress=False,
                log=log.append,
                drop_unreachable=True,
                executor=executor,
                on_game=self.on_game,
            )
            if self._stop is not None:
                self.tournament.stop(self._stop)
            await self.tournament.run()
            self.status = "finished"
        except Exception as e:  # noqa: BLE001 - a run's crash must not take the service down
            self.status, self.error = _ended(e)
            if not isinstance(e, Interrupted | LeagueError | ExecutorError):
                traceback.print_exc()
        finally:
            if executor is not None:
                with contextlib.suppress(Exception):
                    await executor.close()

    def stop(self, abandon: bool = True) -> None:
        """Stop the run: the games in flight are finished, or abandoned
        (played again on resume)."""
        t = self.tournament
        if t is None:
            self._stop = abandon
        else:
            self.host.call_soon(lambda: t.stop(abandon))

    def alive(self) -> bool:
        return self.host.alive()

    async def join(self, timeout: float | None = None) -> None:
        await self.host.join(timeout)


def play_run(db: ServiceDB, run: Run, league: League, *, resume: bool) -> str:
    """Play a run in this thread (the CLI): its final status."""
    t = Tournament(league, Path(run.out_dir), resume=resume, progress=True, drop_unreachable=True)
    status, error = "finished", None
    try:
        asyncio.run(t.run())
    except BaseException as e:
        status, error = _ended(e)
        if not isinstance(e, Interrupted | LeagueError):
            db.end_run(run.id, status, error)
            raise
    db.end_run(run.id, status, error)
    return status if error is None else f"{status}: {error}"


def _ended(e: BaseException) -> tuple[str, str]:
    """A run's status and error from what stopped it."""
    if isinstance(e, Interrupted):
        return "interrupted", str(e)
    if isinstance(e, LeagueError):
        return "failed", str(e)
    return "failed", f"{type(e).__name__}: {e}"


# ---------------------------------------------------------- house URL bots

#: The ``referee serve`` flag that lets a league file's house URL bots be anywhere.
HOUSE_URLS_FLAG = "referee serve --house-urls-anywhere"
#: The ``referee serve`` flag that lets a league file start commands and open unix sockets on the server.
HOUSE_COMMANDS_FLAG = "referee serve --allow-house-commands"


def house_command_refusal(league: League) -> str | None:
    """Why the service may not play `league` unless ``--allow-house-commands``
    (its first house bot that is a command, or a unix socket, named); None:
    it starts no program and opens no socket on the server. The one rule of
    the league files sent through the web and of every league the service
    plays: a run, the ladder, a final, a practice game."""
    for bot in league.bots:
        if is_builtin(bot):  # the service's own program, not the league file's
            continue
        if bot.command is not None and bot.image is None:
            return (
                f"house bot {bot.name!r} is a command: a league of the service may not start programs "
                f"on the server unless {HOUSE_COMMANDS_FLAG} allows it"
            )
        if bot.url is not None and bot.url.startswith("unix:"):
            return (
                f"house bot {bot.name!r} is a unix socket: a league of the service may not open sockets "
                f"on the server unless {HOUSE_COMMANDS_FLAG} allows it"
            )
    return None


def check_house_commands(league: League, *, allow_commands: bool) -> None:
    """:class:`Conflict` when `league` breaks :func:`house_command_refusal`
    and the service was not started with ``--allow-house-commands``."""
    if allow_commands:
        return
    refusal = house_command_refusal(league)
    if refusal is not None:
        raise Conflict(f"{refusal}: restart the service with the flag, or remove that bot from the league")


def house_urls(league: League) -> list[BotSpec]:
    """The house bots of a league that are reached over the network by URL
    (not an image's, not a unix socket: ``--allow-house-commands`` rules those)."""
    return [b for b in league.bots if b.url is not None and b.image is None and not b.url.startswith("unix:")]


async def pin_house_urls(
    league: League,
    policy: AddressPolicy | None,
    *,
    anywhere: bool = False,
    resolve: Resolve | None = None,
    allow_commands: bool = False,
) -> dict[str, PinnedURL]:
    """Each house URL bot of an admin's league file admitted as a team's URL
    is (:func:`~referee.bots.netpolicy.admit_url` under `policy`, the
    service's ``--bot-networks``): its host resolved once, every address
    checked, and the bot pinned to the first for the run. An ``address`` the
    league file pins itself is checked as it is. None (``anywhere``, the
    operator's ``--house-urls-anywhere``; or no policy, ``referee start``):
    the house bots are reached as the league says, anywhere.

    Raises :class:`Conflict` naming the house bot (the first in the
    file's order), the address and the flag. The names resolve at the same
    time (a league of 100 house bots waits one resolver timeout at most).

    First of all, a house bot that is a command or a unix socket is refused
    (:func:`check_house_commands`) unless `allow_commands` (the service's
    ``--allow-house-commands``): every run, ladder, final and practice game
    of the service resolves its house bots here before it plays, so a
    league stored under that flag (or restored, or edited by hand) plays no
    command once the service runs without it."""
    check_house_commands(league, allow_commands=allow_commands)
    if anywhere or policy is None:
        return {}

    async def admit(bot: BotSpec) -> PinnedURL:
        assert bot.url is not None and policy is not None
        if bot.address is None:
            return await admit_url(bot.url, policy, resolve=resolve)
        parsed = check_url(bot.url)  # pinned by the league file: that address is what is reached
        policy.check(bot.address, parsed.port)
        return PinnedURL(
            url=parsed.url, host=parsed.host, port=parsed.port, address=bot.address, addresses=(bot.address,)
        )

    bots = house_urls(league)
    answers = await asyncio.gather(*(admit(b) for b in bots), return_exceptions=True)
    pins: dict[str, PinnedURL] = {}
    for bot, answer in zip(bots, answers):
        if isinstance(answer, PinnedURL):
            pins[bot.name] = answer
            continue
        try:
            raise answer
        except AddressRefused as e:
            raise Conflict(
                f"house bot {bot.name!r} at {bot.url!r} is refused: {e.what}. A league file's "
                "house URL bots are under the address policy of the teams' URLs: allow that "
                "network with referee serve --bot-networks CIDR, or let house bots be anywhere "
                f"with {HOUSE_URLS_FLAG}",
            ) from None
        except (BotURLError, ValueError) as e:  # malformed, or its host does not resolve
            raise Conflict(
                f"house bot {bot.name!r} is refused: {e} (a league file's house URL bots are "
                f"admitted as the teams' URLs are; {HOUSE_URLS_FLAG} takes them as they "
                "are)",
            ) from None
    return pins


async def pin_house_text(
    text: str, policy: AddressPolicy | None, *, anywhere: bool = False, allow_commands: bool = False
) -> dict[str, PinnedURL]:
    """:func:`pin_house_urls` of a competition's league text (none when it
    does not parse: what reads it next says why)."""
    try:
        league = check_league_text(text)
    except LeagueError:
        return {}
    return await pin_house_urls(league, policy, anywhere=anywhere, allow_commands=allow_commands)


def pinned_house(
    bots: list[BotSpec], house: Mapping[str, PinnedURL] | None, images: Mapping[str, str] | None = None
) -> list[BotSpec]:
    """The league's bots, each house URL bot of `house` at its pinned address,
    each built-in one as the service's image of it in `images` (when built:
    :meth:`~referee.service.classroom.Classroom.house_images`)."""
    house, images = house or {}, images or {}
    return [
        msgspec.structs.replace(b, url=house[b.name].url, address=house[b.name].address)
        if b.name in house and b.image is None and b.builtin is None
        else with_image(b, images)
        for b in bots
    ]


# ---------------------------------------------------------- starting a run


def league_filename(db: ServiceDB, cid: int) -> str:
    """Where a competition's league "lives": relative paths in it (a house
    command bot's ``cwd``) are relative to the competition's folder."""
    return str(db.data_dir / f"competition-{cid}" / "league.toml")


def still_allowed(sub: Submission, policy: AddressPolicy | None) -> bool:
    """A URL bot's pinned address is still one the policy allows (the admin
    may have narrowed --bot-networks since). A URL never pinned (submitted
    before admission checks) counts only when its host is an IP address."""
    if policy is None or sub.kind != "url":
        return True
    if sub.url is None:
        return False
    try:
        parsed = check_url(sub.url)
    except BotURLError:
        return False
    address = sub.address or parsed.literal  # an IP address in the URL is its own pin
    return address is not None and policy.refusal(address, parsed.port) is None


def prepare_run(
    db: ServiceDB,
    cid: int,
    *,
    resume: bool,
    policy: AddressPolicy | None = None,
    house: Mapping[str, PinnedURL] | None = None,
    allow_commands: bool = False,
    images: Mapping[str, str] | None = None,
) -> tuple[Run, League]:
    """Mark a run of competition ``cid`` as running: a new run with the
    teams' latest accepted bots (a URL bot only while its pinned address is
    one `policy` allows) and the house bots (a URL one at its address in
    `house`, :func:`pin_house_urls`), or (``resume``) the last run again.
    The run and the league to play; :class:`NotFound` (no such competition)
    or :class:`Conflict` when it cannot start,
    or when the league it would play (a resumed run's, as stored) has a
    house bot that is a command or a unix socket and not `allow_commands`
    (``--allow-house-commands``)."""
    from ..tournament.schedule import make_scheduler

    comp = db.competition(cid)
    if comp is None:
        raise NotFound(f"no competition {cid}")
    if resume:
        last = db.latest_run(cid)
        if last is None:
            raise Conflict("nothing to resume: this competition has no run yet")
        if last.status == "finished":
            raise Conflict(f"run {last.id} is finished: start a new run instead")
        stored = decode_league(last.league_json)
        check_house_commands(stored, allow_commands=allow_commands)
        stored.bots = pinned_house(stored.bots, None, images)
        league = with_secrets(db, stored, last.secrets_from)
        run = db.begin_run(
            cid,
            out_dir=last.out_dir,
            league_json=last.league_json,
            total_games=last.total_games,
            resume_run=last.id,
        )
        if isinstance(run, str):
            raise Conflict(run)
        return run, league
    pairs = []
    for team in db.playing_teams(cid):
        sub = db.playing_submission(team.id)
        if sub is not None and still_allowed(sub, policy):
            pairs.append((team, sub))
    try:
        league = build_league(comp.league_toml, pairs, league_filename(db, cid), house, images)
    except LeagueError as e:
        raise Conflict(f"cannot start: {e}") from None
    check_house_commands(league, allow_commands=allow_commands)
    scheduler = make_scheduler(league)
    total = scheduler.total if scheduler.total is not None else (scheduler.limit or 0)
    secrets_from = msgspec.json.encode({t.name: s.id for t, s in pairs}).decode()
    run = db.begin_run(
        cid, out_dir="", league_json=encode_league(league), total_games=total, secrets_from=secrets_from
    )
    if isinstance(run, str):
        raise Conflict(run)
    out = db.data_dir / f"competition-{cid}" / f"run-{run.id}"
    db.set_out_dir(run.id, str(out))
    run.out_dir = str(out)
    return run, with_secrets(db, league, secrets_from)
