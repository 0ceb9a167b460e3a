"""Practice games (``practice_games``, issue 26): a team's unrated, private
games against the opponents it picked; :mod:`referee.service.practice` plays them.

The functions take the service database (:class:`~referee.service.store.db.ServiceDB`)
as their first argument, so ``AsyncServiceDB.call(get_game, pid)`` runs one in
the database's thread.
"""

from __future__ import annotations

import time
from typing import Final, Literal, get_args

import msgspec

from .base import Tables
from .teams import Team

#: A practice game's life (:mod:`referee.service.practice`): queued, playing,
#: then finished or failed; the first two are in flight.
PracticeStatus = Literal["queued", "playing", "finished", "failed"]
PRACTICE_STATUSES: Final[tuple[PracticeStatus, ...]] = get_args(PracticeStatus)
IN_FLIGHT: Final[tuple[PracticeStatus, ...]] = ("queued", "playing")
#: What a seat is: the team's newest accepted version, one of its earlier
#: ones, a league file's house bot, another team's version in play, or a
#: team member playing in the browser (issue 36).
SeatKind = Literal["self", "version", "house", "team", "human"]
#: A practice game with a person seated: its seats' JSON holds this.
HUMAN_SEAT_SQL: Final = '%"kind":"human"%'


class Seat(msgspec.Struct, kw_only=True):
    """A bot at a practice table: as picked, and as named in the game."""

    kind: SeatKind
    name: str
    #: What was picked: "house:NAME", "version:SID", "team:TID" ("self" for the team's own).
    pick: str
    submission: int | None = None
    house: str | None = None


class Result(msgspec.Struct, kw_only=True):
    """One game of a practice game, as played."""

    index: int
    names: list[str]
    places: list[int]
    #: The team's seat in it (the replay viewer's ``?seat=``).
    seat: int


class PracticeGame(msgspec.Struct, kw_only=True):
    id: int
    competition_id: int
    team_id: int
    seats: list[Seat]
    status: PracticeStatus
    error: str | None
    out_dir: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    #: Its games, once played.
    results: list[Result] = msgspec.field(default_factory=list)


_COLUMNS = (
    "id, competition_id, team_id, seats, status, error, out_dir, created_at, started_at, finished_at, results"
)


def _game(row: tuple[object, ...] | None) -> PracticeGame | None:
    if row is None:
        return None
    d = dict(zip(_COLUMNS.replace(" ", "").split(","), row, strict=True))
    d["seats"] = msgspec.json.decode(str(d["seats"]))
    d["results"] = [] if d["results"] is None else msgspec.json.decode(str(d["results"]))
    return msgspec.convert(d, PracticeGame)


def add_game(db: Tables, team: Team, seats: list[Seat], now: float) -> PracticeGame:
    cur = db.db.execute(
        "INSERT INTO practice_games (competition_id, team_id, seats, status, out_dir, created_at)"
        " VALUES (?, ?, ?, 'queued', '', ?)",
        (team.competition_id, team.id, msgspec.json.encode(seats).decode(), now),
    )
    pid = int(cur.lastrowid or 0)
    out = db.data_dir / f"competition-{team.competition_id}" / "practice" / f"game-{pid}"
    db.db.execute("UPDATE practice_games SET out_dir = ? WHERE id = ?", (str(out), pid))
    found = get_game(db, pid)
    assert found is not None
    return found


def get_game(db: Tables, pid: int) -> PracticeGame | None:
    return _game(db.db.execute(f"SELECT {_COLUMNS} FROM practice_games WHERE id = ?", (pid,)).fetchone())


def team_games(db: Tables, tid: int, limit: int = 50) -> list[PracticeGame]:
    rows = db.db.execute(
        f"SELECT {_COLUMNS} FROM practice_games WHERE team_id = ? ORDER BY id DESC LIMIT ?", (tid, limit)
    ).fetchall()
    return [g for g in map(_game, rows) if g is not None]


def next_queued(db: Tables) -> PracticeGame | None:
    """The oldest game waiting (each team has one in flight at most: first come, first played)."""
    return _game(
        db.db.execute(
            f"SELECT {_COLUMNS} FROM practice_games WHERE status = 'queued' ORDER BY id LIMIT 1"
        ).fetchone()
    )


#: The error of a game with a person seated that the server stopped mid-game.
HUMAN_STOPPED: Final = (
    "the server stopped while you played (a game with a person seated cannot be resumed): "
    "a fault of the service, not yours; start another one"
)


def requeue_playing(db: Tables) -> int:
    """At the server's start: a game that was playing when it stopped is played
    again; one with a person seated (played in the server's process, from a
    page that is gone) failed, saying so."""
    db.db.execute(
        "UPDATE practice_games SET status = 'failed', error = ?, finished_at = ?"
        " WHERE status IN ('queued', 'playing') AND seats LIKE ?",
        (HUMAN_STOPPED, time.time(), HUMAN_SEAT_SQL),
    )
    return db.db.execute(
        "UPDATE practice_games SET status = 'queued', started_at = NULL WHERE status = 'playing'"
    ).rowcount


def set_playing(db: Tables, pid: int) -> None:
    db.db.execute(
        "UPDATE practice_games SET status = 'playing', started_at = ?, finished_at = NULL WHERE id = ?",
        (time.time(), pid),
    )


def set_ended(
    db: Tables, pid: int, status: PracticeStatus, error: str | None, results: list[Result] | None = None
) -> None:
    db.db.execute(
        "UPDATE practice_games SET status = ?, error = ?, results = ?, finished_at = ? WHERE id = ?",
        (status, error, msgspec.json.encode(results or []).decode(), time.time(), pid),
    )


def limits_of(db: Tables, tid: int, since: float) -> tuple[int, list[float]]:
    """The team's games in flight, and the times of those asked for since `since`."""
    marks = ", ".join("?" * len(IN_FLIGHT))
    flying = int(
        db.db.execute(
            f"SELECT COUNT(*) FROM practice_games WHERE team_id = ? AND status IN ({marks})",
            (tid, *IN_FLIGHT),
        ).fetchone()[0]
    )
    times = [
        float(r[0])
        for r in db.db.execute(
            "SELECT created_at FROM practice_games WHERE team_id = ? AND created_at > ? ORDER BY created_at",
            (tid, since),
        )
    ]
    return flying, times
