"""The tournament's SQLite database (WAL): bots, games, results, faults, ratings.

A game is recorded in one transaction when it finishes, so a referee killed at
any moment (SIGKILL included) loses only games in flight, which ``--resume``
plays again; a finished game is never lost nor recorded twice (the schedule
index is the primary key).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .ratings import Outcome

SCHEMA = """
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


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

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
