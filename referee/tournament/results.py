"""A run's results read from its output folder while it plays and after:
the standings, the rating history, the recorded games and their replays.

A run (a :class:`~referee.tournament.runner.Tournament` or a
:class:`~referee.tournament.ladder.Ladder`) writes into its own folder; its
leaderboard is computed from that folder's ``tournament.sqlite`` at any
moment (the ratings are applied in schedule order over the games recorded so
far). The service reads its runs here (:mod:`referee.web.data`,
:mod:`referee.web.live`); nothing here knows of the service.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import msgspec

from .ladder import read_entries
from .league import League
from .ratings import Standing, Table
from .runner import DB_NAME
from .store import Store

__all__ = [
    "GameRow",
    "RunRatings",
    "Snapshot",
    "count_games",
    "deal_progress",
    "games_list",
    "replay_path",
    "snapshot",
]


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


class Snapshot(msgspec.Struct, kw_only=True):
    games: int
    standings: list[Standing]
    #: Each bot's (game index, mu, sigma) after each of its games, in schedule
    #: order: lists kept and appended to by :class:`RunRatings` (read them,
    #: never change them), so a snapshot costs nothing per game played.
    history: dict[str, list[tuple[int, float, float]]]
    #: A ladder's retired and dropped entries (its standings hold those in play).
    retired: list[Standing] = msgspec.field(default_factory=list)


def count_games(out_dir: str | Path) -> int:
    path = Path(out_dir) / DB_NAME
    if not path.exists():
        return 0
    with Store(path) as store:
        return store.count_games()


class RunRatings:
    """A run's live table, kept between page views: each :meth:`update`
    applies only the games recorded since the last one (in schedule order,
    up to the first game still in flight), so a new game costs the same at
    game 100,000 as at game 10. Thread-safe: updates run off the loop."""

    def __init__(self, league: League, *, ladder: bool = False) -> None:
        self.league = league
        #: A ladder's entries come from its store as they enter (see :mod:`referee.tournament.ladder`).
        self.ladder = ladder
        names = [] if ladder else [b.name for b in league.bots]
        self.table = Table(names, league.ratings, series=league.rules.scoring)
        #: The index of the next game to apply.
        self.next = 0
        self._entries: dict[str, str] = {}
        self._history: dict[str, list[tuple[int, float, float]]] = {}
        self._seen = 0
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None

    def _take_entries(self, store: Store) -> bool:
        """A ladder's new entries and retirements since the last update."""
        changed = False
        for e in read_entries(store):
            if self._entries.get(e.name) == e.status or e.status == "unreachable":
                continue
            if e.name not in self.table.ratings:
                self.table.add_bot(e.name, mu=e.mu0, sigma=e.sigma0)
            if e.status != "active" and e.name not in self.table.retired:
                self.table.retire(e.name)
            elif e.status == "active" and e.name in self.table.retired:
                self.table.add_bot(
                    e.name
                )  # back in play (its team's new version was dropped), its rating kept
            self._entries[e.name] = e.status
            changed = True
        return changed

    def update(self, out_dir: str | Path) -> Snapshot:
        """The standings over every game applied so far, after applying the new ones."""
        with self._lock:
            path = Path(out_dir) / DB_NAME
            before = self.next
            changed = False
            if path.exists():
                with Store(path) as store:
                    if self.ladder:
                        changed = self._take_entries(store)
                    for o in store.outcomes(self.next):
                        if o.index != self.next:
                            break  # a game before it is still being played
                        self.table.add(o)
                        self.next += 1
                    history = self.table.history
                    for g, bot, mu, sigma in history[self._seen :]:
                        self._history.setdefault(bot, []).append((g, mu, sigma))
                    self._seen = len(history)
            if self._snapshot is None or self.next != before or changed:
                confidence = self.league.stop.confidence
                if self.ladder:
                    standings = self.table.standings(confidence, retired=False)
                    retired = self.table.retired_rows()
                else:
                    standings, retired = self.table.standings(confidence), []
                self._snapshot = Snapshot(
                    games=self.next, standings=standings, retired=retired, history=self._history
                )
            return self._snapshot


def snapshot(out_dir: str | Path, league: League) -> Snapshot:
    """Standings and rating history of the games recorded so far (from
    scratch: the service keeps a :class:`RunRatings` per run instead)."""
    return RunRatings(league).update(out_dir)


def games_list(out_dir: str | Path, bot: str | None = None, last: int | None = None) -> list[GameRow]:
    """The recorded games in schedule order (those `bot` played in; the `last`
    ones only), as the pages and the API show them."""
    path = Path(out_dir) / DB_NAME
    if not path.exists():
        return []
    out = []
    query = (
        "SELECT idx, round, meeting, rotation, seats, places, turns, adjudicated, disqualified,"
        " replay, finished_at, game_id FROM games"
    )
    with Store(path) as store:
        faults: dict[int, int] = {}
        fault_rows: Iterable[tuple[int, int]] = ()
        if last is not None and bot is None:
            # the latest games only: their faults only (a cost that does not grow with the games played)
            rows = store.db.execute(query + " ORDER BY idx DESC LIMIT ?", (last,)).fetchall()[::-1]
            if rows:
                fault_rows = store.db.execute(
                    "SELECT game_idx, COUNT(*) FROM faults WHERE game_idx >= ? GROUP BY game_idx",
                    (rows[0][0],),
                )
        else:
            rows = store.db.execute(query + " ORDER BY idx").fetchall()
            fault_rows = store.db.execute("SELECT game_idx, COUNT(*) FROM faults GROUP BY game_idx")
        for idx, n in fault_rows:
            faults[int(idx)] = int(n)
    for idx, rnd, meeting, rotation, seats, places, turns, adj, dq, replay, finished, gid in rows:
        seat_names = msgspec.json.decode(seats, type=list[str])
        if bot is not None and bot not in seat_names:
            continue
        out.append(
            GameRow(
                index=idx,
                round=rnd,
                meeting=meeting,
                rotation=rotation,
                game_id=gid,
                seats=seat_names,
                places=msgspec.json.decode(places, type=list[int]),
                turns=turns,
                adjudicated=bool(adj),
                disqualified=msgspec.json.decode(dq, type=list[int]),
                faults=faults.get(int(idx), 0),
                has_replay=replay is not None,
                finished_at=finished,
            )
        )
    return out


def deal_progress(out_dir: str | Path, index: int) -> tuple[int, int] | None:
    """(rotations recorded, rotations in all) of the duplicate deal game
    `index` belongs to; None when there is no such game."""
    path = Path(out_dir) / DB_NAME
    if not path.exists():
        return None
    with Store(path) as store:
        row = store.db.execute("SELECT deal_seed, seats FROM games WHERE idx = ?", (index,)).fetchone()
        if row is None:
            return None
        played = int(
            store.db.execute("SELECT COUNT(*) FROM games WHERE deal_seed = ?", (row[0],)).fetchone()[0]
        )
        text = store.get_meta("league")
    duplicate = True
    if text is not None:
        duplicate = msgspec.json.decode(text, type=League).tournament.duplicate
    rotations = len(msgspec.json.decode(row[1], type=list[str])) if duplicate else 1
    return played, rotations


def replay_path(out_dir: str | Path, index: int) -> Path | None:
    path = Path(out_dir) / DB_NAME
    if not path.exists():
        return None
    with Store(path) as store:
        row = store.db.execute("SELECT replay FROM games WHERE idx = ?", (index,)).fetchone()
    if row is None or row[0] is None:
        return None
    return Path(out_dir) / str(row[0])
