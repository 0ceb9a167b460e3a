"""What the pages, the API and the live updates show, assembled off the loop.

Each function here gathers one answer: the service database's rows in one
call to its thread (:class:`~referee.service.store.AsyncServiceDB`), the run
folder's results (``tournament.sqlite``, replay files) in the default
executor. The page handler renders the answer, its JSON mirror encodes it,
the live updates send it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import msgspec
from aiohttp import web

from ..admission import AdmissionReport
from ..diagnostics import BotDiagnostics
from ..replay import ReplayError, frames
from ..replay import read as read_replay
from ..service import grading
from ..service.finals import final_pairs, suggested_games
from ..service.runs import check_league_text, decode_league, house_bots
from ..service.store import Competition, Run, ServiceDB, Submission, Team
from ..tournament.ladder import ladder_entries, ladder_fillers
from ..tournament.league import League, LeagueError
from ..tournament.ratings import Standing, Table
from ..tournament.results import (
    GameFilter,
    Opponent,
    RunRatings,
    Snapshot,
    count_adjudicated,
    count_games,
    deal_progress,
    games_list,
    games_page,
    games_stamp,
    head_to_head_of,
    replay_path,
)
from ..tournament.store import EntryStatus, GameRow
from .app_state import ROOM
from .errors import fail
from .schemas import (
    BotData,
    CompetitionSummary,
    Leaderboard,
    RatingPoint,
    RunInfo,
    SubmissionBrief,
    SubmissionDetail,
    SubmissionInfo,
)

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """The ``size`` most recently used values, and with ``max_bytes`` no more
    than that many bytes of them, as :meth:`put` was told each weighs (used
    on the event loop only)."""

    def __init__(self, size: int = 32, max_bytes: int | None = None) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.items: OrderedDict[K, V] = OrderedDict()
        self.weights: dict[K, int] = {}
        #: What the values kept weigh, in all.
        self.nbytes = 0

    def get(self, key: K) -> V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: K, value: V, nbytes: int = 0) -> None:
        """Keep ``value`` (weighing ``nbytes``), the least recently used going
        first; one heavier than ``max_bytes`` alone is not kept."""
        self._drop(key)
        if self.max_bytes is not None and nbytes > self.max_bytes:
            return
        self.items[key] = value
        self.weights[key] = nbytes
        self.nbytes += nbytes
        while len(self.items) > self.size or (self.max_bytes is not None and self.nbytes > self.max_bytes):
            self._drop(next(iter(self.items)))

    def _drop(self, key: K) -> None:
        if key in self.items:
            del self.items[key]
            self.nbytes -= self.weights.pop(key)


#: What the replay viewer's data kept in memory may weigh (encoded as JSON).
REPLAY_BYTES = 64 << 20


def json_size(value: object) -> int:
    """What ``value`` weighs encoded as JSON (what a cache entry is counted as)."""
    return len(msgspec.json.encode(value))


#: (run folder, bots, house bots, :func:`~referee.tournament.results.games_stamp`).
H2HKey = tuple[str, tuple[str, ...], tuple[str, ...], tuple[int, int]]


class Caches:
    def __init__(self, replay_bytes: int = REPLAY_BYTES) -> None:
        #: The live ratings of a run, by run id: see :func:`run_snapshot`.
        self.ratings: LRU[int, RunRatings] = LRU()
        #: Replay viewer data, by (replay file, modification time), weighed
        #: by :func:`json_size`: at most ``replay_bytes`` of it.
        self.replays: LRU[tuple[str, float], dict[str, Any]] = LRU(max_bytes=replay_bytes)
        #: Head-to-head records, by (run folder, bots, house bots, their
        #: games' stamp): see :func:`head_to_head`.
        self.head_to_head: LRU[H2HKey, dict[str, list[Opponent]]] = LRU(size=256)
        #: A bot's diagnostics, by (run folder, bot, its games' stamp, its
        #: logs' sizes and times): see :mod:`.handlers.diagnostics`.
        self.diagnostics: LRU[tuple[object, ...], BotDiagnostics] = LRU(size=64)


CACHES: web.AppKey[Caches] = web.AppKey("caches", Caches)


# ---------------------------------------------------------------- ratings


async def run_snapshot(app: web.Application, run: Run) -> Snapshot:
    """A run's standings and rating history over the games recorded so far.

    Each run keeps its table (:class:`~referee.tournament.results.RunRatings`): a page
    view, an API call or a live update applies only the games recorded since
    the last one, never replaying from game 0.
    """
    ratings = app[CACHES].ratings.get(run.id)
    if ratings is None:
        ratings = RunRatings(decode_league(run.league_json), ladder=run.kind == "ladder")
        app[CACHES].ratings.put(run.id, ratings)
    return await asyncio.to_thread(ratings.update, run.out_dir)


# ----------------------------------------------------------------- shapes


#: What a failed run says in public: its error may quote what a team's bot
#: answered, which is that team's to see (and the admin's).
PUBLIC_FAILURE = "the run failed: the admin sees why (GET /api/competitions/{cid}/runs with the admin token)"


def run_info(run: Run, *, private: bool = False) -> RunInfo:
    """A run as the pages and the API show it; its error in full only when `private` (the admin)."""
    error = run.error
    if error is not None and run.status == "failed" and not private:
        error = PUBLIC_FAILURE.format(cid=run.competition_id)
    seed = None
    if (
        run.kind == "final" and run.status == "finished"
    ):  # the final's deals are all played: its seed is public
        seed = decode_league(run.league_json).tournament.seed
    return RunInfo(
        id=run.id,
        status=run.status,
        total_games=run.total_games,
        error=error,
        started_at=run.started_at,
        finished_at=run.finished_at,
        kind=run.kind,
        seed=seed,
    )


def submission_info(sub: Submission | None, version: int = 0) -> SubmissionInfo | None:
    """`version`: its :meth:`~referee.service.store.ServiceDB.submission_number` (see :func:`numbered`)."""
    if sub is None:
        return None
    return SubmissionInfo(
        id=sub.id,
        kind=sub.kind,
        url=sub.url,
        image=sub.image,
        has_secret=sub.secret is not None,
        note=sub.note,
        created_at=sub.created_at,
        status=sub.status,
        reason=sub.reason,
        image_id=sub.image_id,
        address=sub.address,
        version=version,
        retry_at=sub.retry_at,
        decided_at=sub.updated_at if sub.status in ("accepted", "refused") else None,
    )


def numbered(db: ServiceDB, sub: Submission | None) -> SubmissionInfo | None:
    """:func:`submission_info` with its version: the team's "v2" (in the database's thread)."""
    return None if sub is None else submission_info(sub, db.submission_number(sub.id))


def submission_detail(sub: Submission, version: int = 0) -> SubmissionDetail:
    info = submission_info(sub, version)
    assert info is not None
    report = msgspec.json.decode(sub.report, type=AdmissionReport) if sub.report else None
    return SubmissionDetail(submission=info, report=report, log=sub.log)


def house_of(comp: Competition) -> list[str]:
    """The house bots of a competition's league file (none if it no longer parses)."""
    try:
        return house_bots(comp.league_toml)
    except LeagueError:
        return []


# ------------------------------------------------------------------ index


def _index_rows(db: ServiceDB) -> list[tuple[Competition, Run | None, int]]:
    return [(c, db.latest_run(c.id), len(db.teams(c.id))) for c in db.competitions()]


async def index(app: web.Application) -> list[CompetitionSummary]:
    """The competitions, their status and progress."""
    out = []
    for c, run, teams in await app[ROOM].db.call(_index_rows):
        games = await asyncio.to_thread(count_games, run.out_dir) if run is not None else 0
        out.append(
            CompetitionSummary(
                id=c.id,
                name=c.name,
                teams=teams,
                status=run.status if run else "no run yet",
                games=games,
                total_games=run.total_games if run else 0,
                run=run_info(run) if run else None,
                phase=c.phase,
                stage=stage_of(c.phase, run),
            )
        )
    return out


def stage_of(phase: str, run: Run | None) -> str:
    """Where a competition stands, in words: its phase first (a frozen one's
    ladder is "finished", yet the competition is not), then its latest run's status."""
    if phase == "open":
        return "open: the ladder plays"
    if phase == "frozen":
        return "frozen: the final is next"
    if phase == "final":
        return f"final: {run.status}" if run is not None and run.kind == "final" else "final: starting"
    return run.status if run is not None else "no run yet"


# ------------------------------------------------------------ leaderboard


def _board_rows(
    db: ServiceDB, cid: int, prospective: bool
) -> tuple[list[Team], list[Run], list[str], dict[int, int]]:
    """The teams, the runs, (``prospective``) the teams that submitted a
    bot, and each league version's number by its id."""
    teams = db.teams(cid)
    playing = (
        [t.name for t in teams if t.withdrawn_at is None and db.playing_submission(t.id) is not None]
        if prospective
        else []
    )
    return teams, db.runs(cid), playing, {v.id: v.version for v in db.league_versions(cid)}


def versioned(info: RunInfo, run: Run, versions: dict[int, int]) -> RunInfo:
    """`info` with the number of the league version its run plays."""
    if run.league_version is not None:
        info.league_version = versions.get(run.league_version)
    return info


def _prospective(comp: Competition, teams_with_bots: list[str]) -> list[Standing]:
    """Before any run: the bots that would play, unrated."""
    try:
        league = check_league_text(comp.league_toml)
    except LeagueError:
        return []
    names = [b.name for b in league.bots] + teams_with_bots
    return Table(names, league.ratings, series=league.rules.scoring).standings()


async def leaderboard(
    app: web.Application, comp: Competition, run: Run | None, pinned: bool = False
) -> Leaderboard:
    """The leaderboard of ``run`` (GET /api/competitions/{cid}, the live updates)."""
    teams, runs, playing, versions = await app[ROOM].db.call(_board_rows, comp.id, run is None)
    board = Leaderboard(
        id=comp.id,
        name=comp.name,
        created_at=comp.created_at,
        teams=[t.name for t in teams],
        house_bots=house_of(comp),
        runs=[versioned(run_info(r), r, versions) for r in runs],
        run=None,
        pinned=pinned,
        games=0,
        standings=[],
        recent_games=[],
        phase=comp.phase,
    )
    if run is None:
        board.standings = _prospective(comp, playing)
        return board
    snap = await run_snapshot(app, run)
    board.run = versioned(run_info(run), run, versions)
    board.games = snap.games
    board.standings = snap.standings
    board.retired = snap.retired
    board.recent_games = await asyncio.to_thread(games_list, run.out_dir, None, 12)
    board.adjudicated = await asyncio.to_thread(count_adjudicated, run.out_dir)
    league = decode_league(run.league_json)
    board.turn_limit, board.confidence = league.rules.turn_limit, league.stop.confidence
    if run.kind == "final" and run.status == "finished":  # how far each unsettled pair is (issue 34)
        board.unsettled = await asyncio.to_thread(final_pairs, run)
        board.suggested_games = suggested_games(board.unsettled, league.tournament.table_size)
    if run.kind == "ladder":
        thread = app[ROOM].ladders.get(comp.id)
        if thread is not None and thread.run.id == run.id and thread.alive():
            board.waiting = thread.ladder.waiting
    board.house_bots = await house_names(comp, run)
    return board


async def house_names(comp: Competition, run: Run | None) -> list[str]:
    """The house bots of the competition's league file and, in a ladder,
    the built-in house bots that fill its empty seats (house bots too)."""
    names = house_of(comp)
    if run is not None and run.kind == "ladder":  # the teams' thousands of entries not read
        fillers = await asyncio.to_thread(ladder_fillers, run.out_dir)
        names += [e.name for e in fillers if e.name not in names]
    return names


async def head_to_head(
    app: web.Application, comp: Competition, run: Run | None, bots: list[str]
) -> dict[str, list[Opponent]]:
    """Each of `bots` against each opponent it met in `run`'s recorded games
    (:func:`~referee.tournament.results.head_to_head_of`), house bots flagged.
    Public as the games list is: places only, of finished games (a replay's
    cards are what fair play hides until its deal's last rotation).

    Kept until one of `bots` plays another game (:data:`Caches.head_to_head`,
    by their games' stamp): a term's bot has played a thousand games, a
    team's ten versions ten thousand, and a finished run's never change."""
    if run is None or not bots:
        return {b: [] for b in bots}
    house = await house_names(comp, run)
    stamp = await asyncio.to_thread(games_stamp, run.out_dir, bots)
    if stamp is None:
        return {b: [] for b in bots}
    key = (run.out_dir, tuple(bots), tuple(house), stamp)
    found = app[CACHES].head_to_head.get(key)
    if found is None:
        found = await asyncio.to_thread(head_to_head_of, run.out_dir, bots, house)
        app[CACHES].head_to_head.put(key, found)
    return found


# ------------------------------------------------------------------ team


class TeamStanding(msgspec.Struct, kw_only=True):
    """A version of a team's bot in the shown run (a ladder: each version it entered)."""

    name: str
    #: active, retired, dropped or unreachable (a ladder); "playing" in a run.
    status: EntryStatus | Literal["playing"]
    reason: str | None
    standing: Standing | None
    of: int


async def team_standings(
    app: web.Application, comp: Competition, team: Team
) -> tuple[Run | None, list[TeamStanding]]:
    """The team's versions in the competition's latest run, newest first, with their standing."""
    run = await app[ROOM].db.call(ServiceDB.latest_run, comp.id)
    if run is None:
        return None, []
    snap = await run_snapshot(app, run)
    rows = {s.bot: s for s in snap.standings + snap.retired}
    of = len(snap.standings)
    names = await app[ROOM].db.call(grading.team_bots, run, team)  # by the team's id (issue 32)
    if run.kind != "ladder":
        return run, [
            TeamStanding(name=n, status="playing", reason=None, standing=rows[n], of=of)
            for n in names
            if n in rows
        ]
    entries = await asyncio.to_thread(ladder_entries, run.out_dir, names)
    return run, [
        TeamStanding(name=e.name, status=e.status, reason=e.reason, standing=rows.get(e.name), of=of)
        for e in reversed(entries)
    ]


# -------------------------------------------------------------------- bot


def _team_and_bot(
    db: ServiceDB, cid: int, run: Run | None, bot_name: str
) -> tuple[Team | None, Submission | None, int]:
    """The team, and the version of its bot that played as `bot_name` in
    `run` (with its number), found by ids; a bot not in `run` (or without
    a run): the team of that name now and its version in play."""
    if run is not None:
        found = grading.whose(db, run, bot_name).get(bot_name)
        if found is not None:
            if found.sub is None:
                sub = db.playing_submission(found.team.id)
                return found.team, sub, db.submission_number(sub.id) if sub else 0
            return found.team, found.sub, found.version or 0
        if any(b.name == bot_name for b in decode_league(run.league_json).bots):
            return None, None, 0  # a house bot of the run
    team = db.team_named(cid, bot_name)
    if team is None:
        return None, None, 0
    sub = db.playing_submission(team.id)
    return team, sub, db.submission_number(sub.id) if sub else 0


async def bot(
    app: web.Application,
    comp: Competition,
    run: Run | None,
    name: str,
    where: GameFilter | None = None,
    games: bool = True,
) -> BotData:
    """A bot of the competition (a team's or a house bot) in ``run``: 404 if
    there is none; its games those `where` keeps (none read without
    `games`: a page of them is :func:`bot_games`'s), its head-to-head over all."""
    league: League | None = decode_league(run.league_json) if run else None
    in_league = league is not None and any(b.name == name for b in league.bots)
    if run is not None and run.kind == "ladder":  # a team's version in the ladder: "alice v3"
        entry = next(iter(await asyncio.to_thread(ladder_entries, run.out_dir, [name])), None)
        in_league = entry is not None and entry.status != "unreachable"
    team, sub, version = await app[ROOM].db.call(_team_and_bot, comp.id, run, name)
    house = house_of(comp)
    if not in_league and team is None and name not in house:
        fail(404, f"no bot {name!r} in competition {comp.id}")
    data = BotData(
        name=name,
        team=team is not None,
        house=name in house,
        submission=None
        if sub is None
        else SubmissionBrief(kind=sub.kind, created_at=sub.created_at, version=version),
        submitted_at=sub.created_at if sub else None,
        run=run.id if run else None,
        in_run=in_league,
        standing=None,
        history=[],
        games=[],
    )
    if run is not None and in_league:
        snap = await run_snapshot(app, run)
        data.standing = next((s for s in snap.standings + snap.retired if s.bot == name), None)
        data.history = [
            RatingPoint(game=g, played=n, mu=round(mu, 4), sigma=round(sg, 4), score=round(mu - 3 * sg, 4))
            for g, n, mu, sg in list(snap.history.get(name, ()))
        ]
        if games:
            data.games = await asyncio.to_thread(games_list, run.out_dir, name, None, where)
        data.head_to_head = (await head_to_head(app, comp, run, [name]))[name]
    return data


async def bot_games(
    run: Run, name: str, where: GameFilter | None, offset: int, limit: int, newest_first: bool = False
) -> tuple[list[GameRow], int]:
    """A page of a bot's games in `run` and how many `where` keeps in all
    (:func:`~referee.tournament.results.games_page`: its page's rows only)."""
    return await asyncio.to_thread(games_page, run.out_dir, offset, limit, name, where, newest_first)


# ----------------------------------------------------------------- replay


def replay_file(out_dir: str, idx: int) -> tuple[Path, float] | None:
    """Game `idx`'s replay file in `out_dir` and its modification time, or None (blocking)."""
    path = replay_path(out_dir, idx)
    if path is None or not path.exists():
        return None
    return path, path.stat().st_mtime


def _frames(path: Path) -> dict[str, Any]:
    """What everyone may see: faults by their kind only (a team sees its
    bot's own fault texts on its diagnostics page)."""
    return frames(read_replay(path), public=True)


async def replay(app: web.Application, run: Run, idx: int) -> dict[str, Any]:
    """The replay viewer's data for game ``idx`` of ``run`` (:func:`referee.replay.frames`).

    Fair play: until the run is finished, a game is shown only once every
    seat rotation of its deal has been played (else a bot could read the
    cards of a deal it is still to be dealt, now or when the run resumes):
    403 until then."""
    if run.status != "finished":
        progress = await asyncio.to_thread(deal_progress, run.out_dir, idx)
        if progress is not None and progress[0] < progress[1]:
            fail(
                403,
                f"game {idx} is not public yet: {progress[0]} of the {progress[1]} seat rotations of its "
                "deal are played, and its cards stay hidden until all are",
            )
    found = await asyncio.to_thread(replay_file, run.out_dir, idx)
    if found is None:
        fail(404, f"no replay of game {idx} in run {run.id}")
    path, mtime = found
    try:
        return await kept_replay(app, (str(path), mtime), lambda: _frames(path))
    except ReplayError as e:
        fail(500, f"the replay of game {idx} cannot be read: {e}")


async def kept_replay(
    app: web.Application, key: tuple[str, float], make: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The replay viewer's data kept under `key` (a replay file, whose
    recorded game never changes, and its time; a seat's view adds the seat to
    the name), else made by `make` in a thread and kept, weighed in bytes.
    What `make` raises passes."""
    kept = app[CACHES].replays.get(key)
    if kept is not None:
        return kept
    data = await asyncio.to_thread(make)
    app[CACHES].replays.put(key, data, await asyncio.to_thread(json_size, data))
    return data
