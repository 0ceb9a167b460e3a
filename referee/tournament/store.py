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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

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
CREATE TABLE IF NOT EXISTS ratings (
    game_idx INTEGER NOT NULL,
    bot TEXT NOT NULL,
    mu REAL NOT NULL,
    sigma REAL NOT NULL,
    PRIMARY KEY (game_idx, bot)
);
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
        use_wal(self.db)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(TOURNAMENT_SCHEMA)

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
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def outcomes(self, start: int = 0) -> Iterator[Outcome]:
        """Finished games in schedule order (from index `start`), as the standings need them."""
        for idx, seats, deal, result in self.db.execute(
            "SELECT idx, seats, deal_seed, result FROM games WHERE idx >= ? ORDER BY idx", (start,)
        ):
            yield outcome_of(idx, json.loads(seats), deal, json.loads(result))

    def count_games(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM games").fetchone()[0])

    # -- ratings history

    def put_ratings(self, rows: Sequence[tuple[int, str, float, float]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO ratings (game_idx, bot, mu, sigma) VALUES (?, ?, ?, ?)", rows
        )

    # -- reading the games (the pages, the API, a bot's diagnostics)

    def game_rows(self, last: int | None = None) -> list[GameRow]:
        """The recorded games in schedule order with their fault counts (the
        `last` ones only: a cost that does not grow with the games played)."""
        query = (
            "SELECT idx, round, meeting, rotation, seats, places, turns, adjudicated, disqualified,"
            " replay, finished_at, game_id FROM games"
        )
        faults: dict[int, int] = {}
        if last is not None:
            rows = self.db.execute(query + " ORDER BY idx DESC LIMIT ?", (last,)).fetchall()[::-1]
            fault_rows: list[tuple[int, int]] = []
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

    def games_of(self, bot: str) -> list[PlayedGame]:
        """The recorded games `bot` played in, with their results, in schedule order."""
        out = []
        for idx, seats, result, replay, game_id in self.db.execute(
            "SELECT idx, seats, result, replay, game_id FROM games ORDER BY idx"
        ):
            names = msgspec.json.decode(seats, type=list[str])
            if bot in names:
                out.append(
                    PlayedGame(
                        index=int(idx),
                        seats=names,
                        result=msgspec.json.decode(result, type=MatchResult),
                        replay=None if replay is None else str(replay),
                        game_id=str(game_id),
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

    def entries(self) -> list[Entry]:
        """The ladder's entries in the order they came, each checked (its
        status one of :data:`ENTRY_STATUSES`)."""
        self.ladder_tables()
        rows = self.db.execute(f"SELECT {_ENTRY_COLUMNS} FROM ladder_entries ORDER BY joined_at, name")
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


def _entry_columns(db: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in db.execute("PRAGMA table_info(ladder_entries)")}


def _entry(row: Sequence[object]) -> Entry:
    """An entry from its stored row, checked (its status one of :data:`ENTRY_STATUSES`)."""
    fields = dict(zip(_ENTRY_NAMES, row, strict=True))
    fields["spec"] = msgspec.json.decode(str(fields["spec"]), type=BotSpec)
    return msgspec.convert(fields, Entry)


def _unsecret(spec: BotSpec) -> BotSpec:
    return msgspec.structs.replace(spec, secret=None) if spec.secret is not None else spec
