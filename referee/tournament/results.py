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
from pathlib import Path

import msgspec

from .league import League
from .ratings import Standing, Table
from .store import GameRow, Store, existing_store

__all__ = [
    "RunRatings",
    "Snapshot",
    "count_adjudicated",
    "count_games",
    "deal_progress",
    "game_seats",
    "games_list",
    "replay_path",
    "snapshot",
]


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
    store = existing_store(out_dir)
    if store is None:
        return 0
    with store:
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
        for e in store.entries():
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
            before = self.next
            changed = False
            store = existing_store(out_dir)
            if store is not None:
                with store:
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
    store = existing_store(out_dir)
    if store is None:
        return []
    with store:
        rows = store.game_rows(last if bot is None else None)
    return rows if bot is None else [g for g in rows if bot in g.seats]


def deal_progress(out_dir: str | Path, index: int) -> tuple[int, int] | None:
    """(rotations recorded, rotations in all) of the duplicate deal game
    `index` belongs to; None when there is no such game."""
    store = existing_store(out_dir)
    if store is None:
        return None
    with store:
        deal = store.deal_of(index)
        text = store.get_meta("league")
    if deal is None:
        return None
    seats, played = deal
    duplicate = True
    if text is not None:
        duplicate = msgspec.json.decode(text, type=League).tournament.duplicate
    return played, len(seats) if duplicate else 1


def game_seats(out_dir: str | Path, index: int) -> list[str] | None:
    """The bots by seat of game `index`; None when it is not recorded."""
    store = existing_store(out_dir)
    if store is None:
        return None
    with store:
        return store.seats_of(index)


def replay_path(out_dir: str | Path, index: int) -> Path | None:
    store = existing_store(out_dir)
    if store is None:
        return None
    with store:
        replay = store.replay_of(index)
    return None if replay is None else Path(out_dir) / replay


def count_adjudicated(out_dir: str | Path) -> int:
    """The run's games that reached the turn limit and were adjudicated [D12]."""
    store = existing_store(out_dir)
    if store is None:
        return 0
    with store:
        return store.count_adjudicated()
