"""A run folder's SQLite database, ``tournament.sqlite`` (WAL): bots, games,
results, faults, ratings, and a ladder's entries and plan. Every SQL
statement on that file is here; the runner, the ladder, the results, the
diagnostics and the service call these functions.

A game is recorded in one transaction when it finishes, so a referee killed at
any moment (SIGKILL included) loses only games in flight, which ``--resume``
plays again; a finished game is never lost nor recorded twice (the schedule
index is the primary key).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, cast, get_args

import msgspec

from ..bots.factory import BotSpec
from ..record import MatchResult
from .ratings import Outcome
from .schedule import GameSpec

#: The database's file name in a run's output folder.
TOURNAMENT_DB = "tournament.sqlite"

#: The tables of every run (a tournament, a ladder, a practice game).
TOURNAMENT_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bots (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    info TEXT
);
CREATE TABLE IF NOT EXISTS games (
    idx INTEGER PRIMARY KEY,
    round INTEGER NOT NULL,
    meeting INTEGER NOT NULL,
    rotation INTEGER NOT NULL,
    deal_seed INTEGER NOT NULL,
    seats TEXT NOT NULL,
    game_id TEXT NOT NULL,
    places TEXT NOT NULL,
    adjudicated INTEGER NOT NULL,
    disqualified TEXT NOT NULL,
    turns INTEGER NOT NULL,
    result TEXT NOT NULL,
    replay TEXT,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS faults (
    game_idx INTEGER NOT NULL REFERENCES games(idx),
    seat INTEGER NOT NULL,
    bot TEXT NOT NULL,
    kind TEXT NOT NULL,
    turn INTEGER NOT NULL,
    detail TEXT NOT NULL,
    overrun_ms REAL
);
CREATE INDEX IF NOT EXISTS faults_bot ON faults(bot);
CREATE INDEX IF NOT EXISTS faults_game ON faults(game_idx);
CREATE INDEX IF NOT EXISTS games_deal ON games(deal_seed);
-- the games in order, without their rows: a page of the games API is found, and the games are
-- counted, through it (issue 37: the table's own b-tree holds each game's whole result)
CREATE INDEX IF NOT EXISTS games_order ON games(idx);
-- the few adjudicated games, counted on every leaderboard without reading the games (issue 37)
CREATE INDEX IF NOT EXISTS games_adjudicated ON games(adjudicated) WHERE adjudicated != 0;
CREATE TABLE IF NOT EXISTS ratings (
    game_idx INTEGER NOT NULL,
    bot TEXT NOT NULL,
    mu REAL NOT NULL,
    sigma REAL NOT NULL,
    PRIMARY KEY (game_idx, bot)
);
-- the service's ratings checkpoint (issue 37): its table after the first `games` games
CREATE TABLE IF NOT EXISTS checkpoint (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    games INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    state BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint_bots (bot TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID;
"""

#: The version of :data:`TOURNAMENT_SCHEMA` (and the bots' index of games),
#: kept in the file's ``user_version``: a store opened at it runs no schema
#: script (a page view opens one; issue 37), an older or new one runs it once.
SCHEMA_VERSION = 3

#: Each bot's games (issue 37): a bot page, its games a page at a time, and
#: a team's diagnostics read its few thousand games through this index
#: instead of decoding every game's seats (a term's ladder holds a million).
#: Written with the game; a store made before it is filled once when opened
#: (:func:`_seat_index`).
SEATS_SCHEMA = """
CREATE TABLE IF NOT EXISTS game_seats (
    bot TEXT NOT NULL,
    game_idx INTEGER NOT NULL,
    PRIMARY KEY (bot, game_idx)
) WITHOUT ROWID;
"""

#: A ladder's tables besides the games (see :mod:`referee.tournament.ladder`).
LADDER_SCHEMA = """
CREATE TABLE IF NOT EXISTS ladder_entries (
    name TEXT PRIMARY KEY,
    team TEXT,                  -- NULL: a house bot; else the team's name when it entered (a label)
    submission INTEGER,         -- the service's submission id
    spec TEXT NOT NULL,         -- the BotSpec without its secret
    mu0 REAL NOT NULL,
    sigma0 REAL NOT NULL,
    games0 INTEGER NOT NULL,    -- the game count it was seated from (catch-up)
    joined_at REAL NOT NULL,
    first_index INTEGER NOT NULL,
    status TEXT NOT NULL,       -- active, retired, dropped, unreachable
    reason TEXT,
    ended_at REAL,
    team_id INTEGER             -- the service's team id: who the entry is (NULL: a house bot, an old row)
);
CREATE TABLE IF NOT EXISTS ladder_plan (
    idx INTEGER PRIMARY KEY,
    round INTEGER NOT NULL,
    meeting INTEGER NOT NULL,
    rotation INTEGER NOT NULL,
    deal_seed INTEGER NOT NULL,
    seats TEXT NOT NULL
);
"""

#: An entry's life: it plays (active), was replaced by its team's new
#: version (retired), stopped answering (dropped), or could not be reached
#: when it came (unreachable: it never played).
EntryStatus = Literal["active", "retired", "dropped", "unreachable"]
ENTRY_STATUSES: tuple[EntryStatus, ...] = get_args(EntryStatus)


class Entry(msgspec.Struct, kw_only=True):
    """One version of a team's bot (or a house bot) in the ladder.

    Who it is is `team_id` (the service's team id) and `submission`;
    `team` and `name` are labels, the team's name when the entry came in
    (a team renamed later keeps its entries' names: issue 32)."""

    name: str
    team: str | None
    submission: int | None
    spec: BotSpec
    mu0: float
    sigma0: float
    games0: int
    joined_at: float
    first_index: int
    status: EntryStatus = "active"
    reason: str | None = None
    ended_at: float | None = None
    team_id: int | None = None


class GameRow(msgspec.Struct, kw_only=True):
    """A recorded game, as the game lists show it."""

    index: int
    round: int
    meeting: int
    rotation: int
    game_id: str
    seats: list[str]
    places: list[int]
    turns: int
    adjudicated: bool
    disqualified: list[int]
    faults: int
    has_replay: bool
    finished_at: float


class PlayedGame(msgspec.Struct, kw_only=True):
    """A recorded game with its result, as a bot's diagnostics read it."""

    index: int
    seats: list[str]
    result: MatchResult
    #: The replay's path relative to the run's folder (None: not kept).
    replay: str | None
    game_id: str


class SeatResult(msgspec.Struct, kw_only=True):
    """A recorded game as one bot's diagnostics read it: its seat's part of the result."""

    index: int
    seat: int
    place: int
    #: Its faults in the game (``/start`` and ``/end`` included).
    faults: int
    #: Its ``/act`` round trips in the game, in ms.
    latencies_ms: list[float]
    #: The replay's path relative to the run's folder (None: not kept).
    replay: str | None
    game_id: str


class _ResultPart(msgspec.Struct):
    """What :meth:`Store.seat_results` decodes of a result (a MatchResult's
    JSON): each seat's list left undecoded but the bot's own."""

    places: list[int]
    faults: list[list[msgspec.Raw]]
    latencies_ms: list[msgspec.Raw] = msgspec.field(default_factory=list)


_RESULT_PART = msgspec.json.Decoder(_ResultPart)
_LATENCIES = msgspec.json.Decoder(list[float])


class HeadToHeadRow(msgspec.Struct, kw_only=True):
    """A bot against one opponent over the recorded games both played (:meth:`Store.head_to_head_rows`)."""

    bot: str
    opponent: str
    games: int
    #: Games it finished ahead of the opponent, behind it, in the same place.
    wins: int
    losses: int
    draws: int
    #: Its own places in those games, summed.
    place_sum: int


class FaultRow(msgspec.Struct, kw_only=True):
    """A fault of a bot in a recorded game."""

    game: int
    seat: int
    kind: str
    turn: int
    detail: str


def outcome_of(index: int, seats: Sequence[str], deal: int, result: dict[str, Any]) -> Outcome:
    """What the standings need of a finished game: its place in the schedule,
    its seats, its deal, and its result as JSON (a MatchResult's builtins)."""
    return Outcome(
        index=index,
        seats=list(seats),
        places=list(result["places"]),
        disqualified=list(result.get("disqualified", [])),
        faults=[[f["kind"] for f in fs] for fs in result.get("faults", [])],
        latencies=result.get("latencies_ms", []),
        adjudicated=bool(result.get("adjudicated", False)),
        points=result.get("points", []),
        deal=deal,
    )


def use_wal(db: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Put the database of `db` in WAL mode, once: a database already in it is
    left as it is (asking again takes a lock, and SQLite answers "database is
    locked" at once, without its busy timeout, when another connection is
    making it WAL or recovering it at the same moment: then it is asked again
    until `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)


class Store:
    """The database of one run folder, open for reading and writing (its tables made if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        if int(self.db.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:
            use_wal(self.db)  # WAL stays the file's mode once set
            self.db.executescript(TOURNAMENT_SCHEMA)
            _seat_index(self.db)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- bots

    def put_bot(self, name: str, kind: str, spec: Any, info: Any = None) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO bots (name, kind, spec, info) VALUES (?, ?, ?, ?)",
            (name, kind, json.dumps(spec), None if info is None else json.dumps(info)),
        )

    # -- games

    def done_indexes(self) -> set[int]:
        return {int(r[0]) for r in self.db.execute("SELECT idx FROM games")}

    def record_game(
        self,
        *,
        index: int,
        round_: int,
        meeting: int,
        rotation: int,
        deal_seed: int,
        seats: Sequence[str],
        game_id: str,
        places: Sequence[int],
        adjudicated: bool,
        disqualified: Sequence[int],
        turns: int,
        result: Any,
        faults: Sequence[tuple[int, str, str, int, str, float | None]],
        replay: str | None,
    ) -> bool:
        """Record a finished game and its faults atomically; False if the
        game was recorded already (never twice)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("SELECT 1 FROM games WHERE idx = ?", (index,)).fetchone():
                db.execute("ROLLBACK")
                return False
            db.execute(
                "INSERT INTO games (idx, round, meeting, rotation, deal_seed, seats, game_id, places,"
                " adjudicated, disqualified, turns, result, replay, finished_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    index,
                    round_,
                    meeting,
                    rotation,
                    deal_seed,
                    json.dumps(list(seats)),
                    game_id,
                    json.dumps(list(places)),
                    int(adjudicated),
                    json.dumps(list(disqualified)),
                    turns,
                    msgspec.json.encode(result).decode(),
                    replay,
                    time.time(),
                ),
            )
            db.executemany(
                "INSERT INTO faults (game_idx, seat, bot, kind, turn, detail, overrun_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(index, *f) for f in faults],
            )
            db.executemany(
                "INSERT OR IGNORE INTO game_seats (bot, game_idx) VALUES (?, ?)", [(b, index) for b in seats]
            )
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def outcomes(self, start: int = 0, limit: int = -1) -> Iterator[Outcome]:
        """Finished games in schedule order (from index `start`; the first
        `limit` of them, all when negative), as the standings need them."""
        for idx, seats, deal, result in self.db.execute(
            "SELECT idx, seats, deal_seed, result FROM games WHERE idx >= ? ORDER BY idx LIMIT ?",
            (start, limit),
        ):
            yield outcome_of(idx, json.loads(seats), deal, json.loads(result))

    def count_games(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM games").fetchone()[0])

    # -- ratings history

    def put_ratings(self, rows: Sequence[tuple[int, str, float, float]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO ratings (game_idx, bot, mu, sigma) VALUES (?, ?, ?, ?)", rows
        )

    # -- the service's ratings checkpoint (:class:`~referee.tournament.results.RunRatings`)

    def checkpoint(self, fingerprint: str) -> tuple[int, bytes, dict[str, bytes]] | None:
        """The checkpoint of the ratings written with `fingerprint`: (games
        applied, the table's state, each bot's state), read in one
        transaction (consistent while another writes one); None without one."""
        self.db.execute("BEGIN")
        try:
            row = self.db.execute("SELECT games, fingerprint, state FROM checkpoint WHERE id = 0").fetchone()
            if row is None or row[1] != fingerprint:
                return None
            bots = {str(b): bytes(st) for b, st in self.db.execute("SELECT bot, state FROM checkpoint_bots")}
            return int(row[0]), bytes(row[2]), bots
        finally:
            self.db.execute("COMMIT")

    class Unwritable(Exception):
        """The checkpoint could not be written (a read-only or busy database)."""

    def put_checkpoint(
        self, fingerprint: str, base: int | None, games: int, state: bytes, bots: dict[str, bytes]
    ) -> bool:
        """Write the checkpoint at `games` games applied in one transaction:
        `bots` all of them (`base` None), or only those changed since the
        checkpoint at `base` games (then written only if that is still the
        one stored). False when not written: another writer's is newer;
        :class:`Store.Unwritable` when the database takes no writes."""
        try:
            return self._put_checkpoint(fingerprint, base, games, state, bots)
        except sqlite3.Error as e:
            raise Store.Unwritable(str(e)) from e

    def _put_checkpoint(
        self, fingerprint: str, base: int | None, games: int, state: bytes, bots: dict[str, bytes]
    ) -> bool:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT games, fingerprint FROM checkpoint WHERE id = 0").fetchone()
            same = row is not None and row[1] == fingerprint
            if (
                base is None
                and same
                and int(row[0]) >= games
                or base is not None
                and (not same or row[0] != base)
            ):
                db.execute("ROLLBACK")
                return False
            if base is None:
                db.execute("DELETE FROM checkpoint_bots")
            db.execute(
                "INSERT OR REPLACE INTO checkpoint (id, games, fingerprint, state) VALUES (0, ?, ?, ?)",
                (games, fingerprint, state),
            )
            db.executemany("INSERT OR REPLACE INTO checkpoint_bots (bot, state) VALUES (?, ?)", bots.items())
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- reading the games (the pages, the API, a bot's diagnostics)

    def game_rows(
        self,
        last: int | None = None,
        bot: str | None = None,
        page: tuple[int, int] | None = None,
        indexes: Sequence[int] | None = None,
    ) -> list[GameRow]:
        """The recorded games in schedule order with their fault counts (the
        `last` ones only: a cost that does not grow with the games played;
        those `bot` played in only, read through its index; `page`: (offset,
        limit), those after the first `offset`, at most `limit`; `indexes`:
        the games of those schedule indexes)."""
        query = (
            "SELECT idx, round, meeting, rotation, seats, places, turns, adjudicated, disqualified,"
            " replay, finished_at, game_id FROM games"
        )
        faults: dict[int, int] = {}
        if indexes is not None:
            wanted = msgspec.json.encode(sorted(indexes)).decode()
            rows = self.db.execute(
                query + " WHERE idx IN (SELECT value FROM json_each(?)) ORDER BY idx", (wanted,)
            ).fetchall()
            fault_rows = self.db.execute(
                "SELECT game_idx, COUNT(*) FROM faults WHERE game_idx IN (SELECT value FROM json_each(?))"
                " GROUP BY game_idx",
                (wanted,),
            ).fetchall()
        elif page is not None and bot is None:
            offset, limit = page
            # the first game of the page through the games' smallest index (no row of the games read)
            rows = self.db.execute(
                query
                + " WHERE idx >= (SELECT idx FROM games INDEXED BY games_order ORDER BY idx LIMIT 1 OFFSET ?)"
                " ORDER BY idx LIMIT ?",
                (offset, limit),
            ).fetchall()
            fault_rows = []
            if rows:
                fault_rows = self.db.execute(
                    "SELECT game_idx, COUNT(*) FROM faults WHERE game_idx BETWEEN ? AND ? GROUP BY game_idx",
                    (rows[0][0], rows[-1][0]),
                ).fetchall()
        elif bot is not None:
            mine = "SELECT game_idx FROM game_seats WHERE bot = ?"
            rows = self.db.execute(query + f" WHERE idx IN ({mine}) ORDER BY idx", (bot,)).fetchall()
            fault_rows = self.db.execute(
                f"SELECT game_idx, COUNT(*) FROM faults WHERE game_idx IN ({mine}) GROUP BY game_idx", (bot,)
            ).fetchall()
        elif last is not None:
            rows = self.db.execute(query + " ORDER BY idx DESC LIMIT ?", (last,)).fetchall()[::-1]
            fault_rows = []
            if rows:
                fault_rows = self.db.execute(
                    "SELECT game_idx, COUNT(*) FROM faults WHERE game_idx >= ? GROUP BY game_idx",
                    (rows[0][0],),
                ).fetchall()
        else:
            rows = self.db.execute(query + " ORDER BY idx").fetchall()
            fault_rows = self.db.execute("SELECT game_idx, COUNT(*) FROM faults GROUP BY game_idx").fetchall()
        for idx, n in fault_rows:
            faults[int(idx)] = int(n)
        return [
            GameRow(
                index=idx,
                round=rnd,
                meeting=meeting,
                rotation=rotation,
                game_id=gid,
                seats=msgspec.json.decode(seats, type=list[str]),
                places=msgspec.json.decode(places, type=list[int]),
                turns=turns,
                adjudicated=bool(adj),
                disqualified=msgspec.json.decode(dq, type=list[int]),
                faults=faults.get(int(idx), 0),
                has_replay=replay is not None,
                finished_at=finished,
            )
            for idx, rnd, meeting, rotation, seats, places, turns, adj, dq, replay, finished, gid in rows
        ]

    def bot_game_indexes(
        self, bot: str, offset: int = 0, limit: int = -1, newest_first: bool = False
    ) -> list[int]:
        """The schedule indexes of the games `bot` played, in schedule order
        (`newest_first`: from the newest), after the first `offset`, at most
        `limit` (all when negative): from the bots' index alone."""
        order = "DESC" if newest_first else ""
        return [
            int(r[0])
            for r in self.db.execute(
                f"SELECT game_idx FROM game_seats WHERE bot = ? ORDER BY game_idx {order} LIMIT ? OFFSET ?",
                (bot, limit, offset),
            )
        ]

    def games_stamp(self, bots: Collection[str]) -> tuple[int, int]:
        """(games, the last game's index) of the games `bots` played, from
        the bots' index alone: what changes when one of them plays a game
        (games are only ever added), for a cache of what their games say."""
        row = self.db.execute(
            "SELECT COUNT(*), COALESCE(MAX(game_idx), -1) FROM game_seats"
            " WHERE bot IN (SELECT value FROM json_each(?))",
            (_json_list(bots),),
        ).fetchone()
        return int(row[0]), int(row[1])

    def count_bot_games(self, bot: str) -> int:
        """The games `bot` played (the bots' index alone)."""
        return int(self.db.execute("SELECT COUNT(*) FROM game_seats WHERE bot = ?", (bot,)).fetchone()[0])

    def bot_places(self, bot: str) -> list[tuple[int, list[str], list[int]]]:
        """(index, seats, places) of each game `bot` played, in schedule
        order: what a filter of its games reads (no result decoded)."""
        return [
            (int(i), msgspec.json.decode(s, type=list[str]), msgspec.json.decode(p, type=list[int]))
            for i, s, p in self.db.execute(
                "SELECT idx, seats, places FROM games"
                " WHERE idx IN (SELECT game_idx FROM game_seats WHERE bot = ?) ORDER BY idx",
                (bot,),
            )
        ]

    def games_of(self, bot: str) -> list[PlayedGame]:
        """The recorded games `bot` played in, with their results, in schedule order."""
        return [
            PlayedGame(
                index=idx,
                seats=names,
                result=msgspec.json.decode(result, type=MatchResult),
                replay=replay,
                game_id=game_id,
            )
            for idx, names, result, replay, game_id in self._rows_of(bot)
        ]

    def _rows_of(self, bot: str) -> Iterator[tuple[int, list[str], bytes | str, str | None, str]]:
        """The rows of the games `bot` played in, through the bots' index, in
        schedule order: (index, names by seat, the result undecoded, replay, game id)."""
        for idx, seats, result, replay, game_id in self.db.execute(
            "SELECT idx, seats, result, replay, game_id FROM games"
            " WHERE idx IN (SELECT game_idx FROM game_seats WHERE bot = ?) ORDER BY idx",
            (bot,),
        ):
            names = msgspec.json.decode(seats, type=list[str])
            if bot in names:
                yield int(idx), names, result, None if replay is None else str(replay), str(game_id)

    def seat_results(self, bot: str) -> list[SeatResult]:
        """The recorded games `bot` played in, in schedule order, with what
        its diagnostics read of its seat's result (no other part of a
        result decoded: a whole result costs 20 times as much, and a term's
        bot has played thousands; issue 37)."""
        out = []
        for idx, names, result, replay, game_id in self._rows_of(bot):
            seat = names.index(bot)
            part = _RESULT_PART.decode(result)
            latencies = part.latencies_ms[seat] if seat < len(part.latencies_ms) else None
            out.append(
                SeatResult(
                    index=idx,
                    seat=seat,
                    place=part.places[seat],
                    faults=len(part.faults[seat]),
                    latencies_ms=[] if latencies is None else _LATENCIES.decode(latencies),
                    replay=replay,
                    game_id=game_id,
                )
            )
        return out

    def faults_of(self, bot: str) -> list[FaultRow]:
        """The faults of `bot` in the recorded games, by game and turn."""
        return [
            FaultRow(game=int(g), seat=int(s), kind=str(k), turn=int(t), detail=str(d))
            for g, s, k, t, d in self.db.execute(
                "SELECT game_idx, seat, kind, turn, detail FROM faults WHERE bot = ? ORDER BY game_idx, turn",
                (bot,),
            )
        ]

    def head_to_head_rows(self, bots: Sequence[str]) -> list[HeadToHeadRow]:
        """Each of `bots` against each bot it met in a recorded game (every
        recorded game is finished): their games together, its wins (a better
        place than that opponent's), losses, draws (the same place) and the
        sum of its places in those games. One pass over their games (the bots' index), in SQL."""
        if not bots:
            return []
        marks = ", ".join("?" * len(bots))
        rows = self.db.execute(
            "SELECT me.value, them.value, COUNT(*),"
            " SUM(mine.value < theirs.value), SUM(mine.value > theirs.value), SUM(mine.value = theirs.value),"
            " SUM(mine.value)"
            " FROM games, json_each(games.seats) AS me, json_each(games.seats) AS them,"
            " json_each(games.places) AS mine, json_each(games.places) AS theirs"
            # their games only, through the bots' index (a scan of a term's million games took seconds)
            f" WHERE games.idx IN (SELECT game_idx FROM game_seats WHERE bot IN ({marks}))"
            f" AND me.value IN ({marks}) AND them.key != me.key"
            " AND mine.key = me.key AND theirs.key = them.key"
            " GROUP BY me.value, them.value ORDER BY me.value, them.value",
            (*bots, *bots),
        )
        return [
            HeadToHeadRow(
                bot=str(b),
                opponent=str(o),
                games=int(n),
                wins=int(w),
                losses=int(lo),
                draws=int(d),
                place_sum=int(ps),
            )
            for b, o, n, w, lo, d, ps in rows
        ]

    def seats_of(self, index: int) -> list[str] | None:
        """The bots by seat of game `index`; None when it is not recorded."""
        row = self.db.execute("SELECT seats FROM games WHERE idx = ?", (index,)).fetchone()
        return None if row is None else msgspec.json.decode(row[0], type=list[str])

    def replay_of(self, index: int) -> str | None:
        """The replay of game `index`, relative to the run's folder; None when
        the game is not recorded or its replay was not kept."""
        row = self.db.execute("SELECT replay FROM games WHERE idx = ?", (index,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def deal_of(self, index: int) -> tuple[list[str], int] | None:
        """Game `index`'s seats and how many games of its deal are recorded
        (itself included); None when it is not recorded."""
        row = self.db.execute("SELECT deal_seed, seats FROM games WHERE idx = ?", (index,)).fetchone()
        if row is None:
            return None
        played = self.db.execute("SELECT COUNT(*) FROM games WHERE deal_seed = ?", (row[0],)).fetchone()[0]
        return msgspec.json.decode(row[1], type=list[str]), int(played)

    def count_adjudicated(self) -> int:
        """The games that reached the turn limit and were adjudicated [D12]."""
        return int(self.db.execute("SELECT COUNT(*) FROM games WHERE adjudicated != 0").fetchone()[0])

    # -- a ladder's entries and plan (its tables made by :func:`open_ladder_store`)

    def ladder_tables(self) -> None:
        """The ladder's tables; a store made before entries had a team id given
        one (NULL in old rows: the service fills it, :meth:`fill_team_ids`)."""
        self.db.executescript(LADDER_SCHEMA)
        if "team_id" not in _entry_columns(self.db):
            self.db.execute("ALTER TABLE ladder_entries ADD COLUMN team_id INTEGER")

    def entries(
        self, names: Collection[str] | None = None, submissions: Collection[int] | None = None
    ) -> list[Entry]:
        """The ladder's entries in the order they came, each checked (its
        status one of :data:`ENTRY_STATUSES`); of these `names` only, or of
        these `submissions` only, when given (a page wants a few of a term's
        thousands: issue 37)."""
        self.ladder_tables()
        where, params = "", ""
        if names is not None:
            where, params = " WHERE name IN (SELECT value FROM json_each(?))", _json_list(names)
        elif submissions is not None:
            where, params = " WHERE submission IN (SELECT value FROM json_each(?))", _json_list(submissions)
        rows = self.db.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM ladder_entries{where} ORDER BY joined_at, name",
            (params,) if where else (),
        )
        return [_entry(r) for r in rows]

    def entry_states(self) -> list[tuple[str, str, float, float]]:
        """(name, status, mu0, sigma0) of each entry in the order they came:
        what the ratings take of them, no spec decoded."""
        self.ladder_tables()
        return [
            (str(n), str(st), float(mu), float(sg))
            for n, st, mu, sg in self.db.execute(
                "SELECT name, status, mu0, sigma0 FROM ladder_entries ORDER BY joined_at, name"
            )
        ]

    def entry_submissions(self) -> list[tuple[str, int | None, str]]:
        """(name, submission id, status) of each entry in the order they came
        (None: a house bot), no spec decoded."""
        self.ladder_tables()
        rows = self.db.execute("SELECT name, submission, status FROM ladder_entries ORDER BY joined_at, name")
        return cast(list[tuple[str, int | None, str]], rows.fetchall())  # the columns' own types

    def house_entries(self) -> list[Entry]:
        """The entries of no team (house bots, the ladder's fillers among them)."""
        self.ladder_tables()
        rows = self.db.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM ladder_entries WHERE team IS NULL AND submission IS NULL"
            " ORDER BY joined_at, name"
        )
        return [_entry(r) for r in rows]

    def put_entry(self, e: Entry) -> None:
        """Store entry `e` (in place of the one of its name), its bot's secret
        left out: the counterpart of :meth:`entries`."""
        self.db.execute(
            f"INSERT OR REPLACE INTO ladder_entries ({_ENTRY_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                e.name,
                e.team,
                e.submission,
                msgspec.json.encode(_unsecret(e.spec)).decode(),
                e.mu0,
                e.sigma0,
                e.games0,
                e.joined_at,
                e.first_index,
                e.status,
                e.reason,
                e.ended_at,
                e.team_id,
            ),
        )

    def fill_team_ids(self, team_of: Callable[[int], int | None]) -> int:
        """Give each team entry stored without a team id (a ladder older than
        ids) the id of its submission's team (`team_of(submission id)`, None:
        left as it is); the rows changed."""
        self.ladder_tables()
        rows = self.db.execute(
            "SELECT name, submission FROM ladder_entries WHERE team_id IS NULL AND submission IS NOT NULL"
        ).fetchall()
        changed = 0
        with self.db:
            for name, sid in rows:
                tid = team_of(int(sid))
                if tid is not None:
                    self.db.execute("UPDATE ladder_entries SET team_id = ? WHERE name = ?", (tid, name))
                    changed += 1
        return changed

    def plan(self) -> list[GameSpec]:
        """The ladder's planned games in schedule order, played or not."""
        rows = self.db.execute(
            "SELECT idx, round, meeting, rotation, deal_seed, seats FROM ladder_plan ORDER BY idx"
        )
        return [
            GameSpec(index=i, round=r, meeting=m, rotation=rot, deal_seed=d, seats=tuple(json.loads(s)))
            for i, r, m, rot, d, s in rows
        ]

    def put_plan(self, block: Sequence[GameSpec]) -> None:
        """A block's games, all or none, before any is played."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO ladder_plan (idx, round, meeting, rotation, deal_seed, seats) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (g.index, g.round, g.meeting, g.rotation, g.deal_seed, json.dumps(list(g.seats)))
                    for g in block
                ],
            )


def _seat_index(db: sqlite3.Connection) -> None:
    """The bots' index of games (:data:`SEATS_SCHEMA`), made and filled from
    the games recorded when the store has none yet (a store written before
    it: once, in one transaction, every later game adding its own rows)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'game_seats'").fetchone():
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'game_seats'").fetchone():
            db.execute(SEATS_SCHEMA.strip().rstrip(";"))
            db.execute(
                "INSERT OR IGNORE INTO game_seats (bot, game_idx)"
                " SELECT json_each.value, games.idx FROM games, json_each(games.seats)"
            )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class Changes:
    """A cheap change counter of a run folder's database, for a poller: the
    file's ``PRAGMA data_version`` on one read-only connection kept open,
    which moves whenever another connection commits (a game recorded, an
    entry, a checkpoint), without reading a table (issue 37: counting a
    million games four times a second was the service's idle CPU). Used from
    one thread at a time."""

    def __init__(self, out_dir: str | Path) -> None:
        self.path = Path(out_dir) / TOURNAMENT_DB
        self._db: sqlite3.Connection | None = None

    def version(self) -> int | None:
        """The counter (None: the run has no database yet); it changes after
        every commit of another connection, and only then."""
        if self._db is None:
            if not self.path.exists():
                return None
            self._db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30, check_same_thread=False
            )
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def open_ladder_store(path: Path) -> Store:
    """The store at `path` with the ladder's tables (made, or brought up to date)."""
    store = Store(path)
    store.ladder_tables()
    return store


def existing_store(out_dir: str | Path) -> Store | None:
    """The store of the run folder `out_dir`; None when the folder has no
    database yet (the run has not started): none is made by reading."""
    path = Path(out_dir) / TOURNAMENT_DB
    return Store(path) if path.exists() else None


def owing_entries(out_dir: str | Path) -> tuple[list[Entry], set[str]]:
    """The ladder's entries in `out_dir` and the names seated in its planned
    games not yet recorded; nothing when it has not started. Read-only: the
    ladder may be playing into it meanwhile (and an entries table older
    than team ids reads with none)."""
    path = Path(out_dir) / TOURNAMENT_DB
    if not path.exists():
        return [], set()
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"ladder_entries", "ladder_plan", "games"} <= tables:
            return [], set()
        columns = (
            _ENTRY_COLUMNS if "team_id" in _entry_columns(db) else _ENTRY_COLUMNS.replace("team_id", "NULL")
        )
        rows = db.execute(f"SELECT {columns} FROM ladder_entries ORDER BY joined_at, name").fetchall()
        owing: set[str] = set()
        for (seats,) in db.execute("SELECT seats FROM ladder_plan WHERE idx NOT IN (SELECT idx FROM games)"):
            owing.update(json.loads(seats))
    finally:
        db.close()
    return [_entry(r) for r in rows], owing


_ENTRY_COLUMNS = (
    "name, team, submission, spec, mu0, sigma0, games0, joined_at, first_index, status, reason, ended_at,"
    " team_id"
)
_ENTRY_NAMES = _ENTRY_COLUMNS.replace(" ", "").split(",")


def _json_list(values: Collection[object]) -> str:
    """`values` as a JSON array: one parameter for ``IN (SELECT value FROM json_each(?))``."""
    return msgspec.json.encode(list(values)).decode()


def _entry_columns(db: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in db.execute("PRAGMA table_info(ladder_entries)")}


def _entry(row: Sequence[object]) -> Entry:
    """An entry from its stored row, checked (its status one of :data:`ENTRY_STATUSES`)."""
    fields = dict(zip(_ENTRY_NAMES, row, strict=True))
    fields["spec"] = msgspec.json.decode(str(fields["spec"]), type=BotSpec)
    return msgspec.convert(fields, Entry)


def _unsecret(spec: BotSpec) -> BotSpec:
    return msgspec.structs.replace(spec, secret=None) if spec.secret is not None else spec
