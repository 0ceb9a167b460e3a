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

import hashlib
import logging
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from .league import League
from .ratings import BotState, HeadToHead, Standing, Table, TableState, head_to_head_record
from .store import GameRow, Store, existing_store

log = logging.getLogger("referee.tournament")

__all__ = [
    "GameFilter",
    "Opponent",
    "RunRatings",
    "Snapshot",
    "Trail",
    "count_adjudicated",
    "count_games",
    "deal_progress",
    "game_seats",
    "games_list",
    "games_page",
    "games_stamp",
    "head_to_head_of",
    "replay_path",
    "snapshot",
]


class Snapshot(msgspec.Struct, kw_only=True):
    games: int
    standings: list[Standing]
    #: Each bot's rating history, (game index, its games so far, mu, sigma),
    #: in schedule order, bounded (:class:`Trail`): lists kept and changed
    #: in place by :class:`RunRatings` (copy them to read, never change
    #: them), so a snapshot costs nothing per game played.
    history: dict[str, list[tuple[int, int, float, float]]]
    #: A ladder's retired and dropped entries (its standings hold those in play).
    retired: list[Standing] = msgspec.field(default_factory=list)


def count_games(out_dir: str | Path) -> int:
    store = existing_store(out_dir)
    if store is None:
        return 0
    with store:
        return store.count_games()


#: The rating history's points kept of each bot (at least; at most twice
#: as many, and its latest). A bot page plots them on a chart 760 pixels
#: wide, and a term's ladder has thousands of entries of a thousand games
#: each: every point of every game would be millions of tuples in the
#: service's memory (and in each checkpoint) for a chart that cannot show
#: them.
TRAIL_POINTS = 100

#: Games between two checkpoints of a run's ratings: the first view of a run
#: after the service starts replays at most this many games (TrueSkill costs
#: about 5 ms a 4-seat game here), against every game of the run without.
CHECKPOINT_GAMES = 1000


class Trail:
    """A bot's rating history, downsampled to a bounded size: the points
    after its games number s, 2s, 3s, ... (s, the stride, starts at 1) and
    after its latest game; when 2 × :data:`TRAIL_POINTS` are kept, every
    other one is dropped and the stride doubles. So the points stay evenly
    spread over the bot's games, whatever their number."""

    __slots__ = ("points", "stride", "played", "tail")

    def __init__(
        self,
        points: list[tuple[int, int, float, float]] | None = None,
        stride: int = 1,
        played: int = 0,
        tail: bool = False,
    ) -> None:
        #: (game index, the bot's games so far, mu, sigma).
        self.points = points if points is not None else []
        self.stride = stride
        self.played = played
        #: The last point is the latest game's, off the stride (replaced by the next).
        self.tail = tail

    def add(self, game: int, mu: float, sigma: float) -> None:
        self.played += 1
        if self.tail:
            self.points.pop()
        self.points.append((game, self.played, mu, sigma))
        self.tail = self.played % self.stride != 0
        if not self.tail and len(self.points) >= 2 * TRAIL_POINTS:
            self.points[:] = self.points[1::2]  # in place: snapshots hold this list
            self.stride *= 2


class _BotCheckpoint(msgspec.Struct, array_like=True):
    table: BotState
    points: list[tuple[int, int, float, float]]
    stride: int
    played: int
    tail: bool


class _RunCheckpoint(msgspec.Struct, array_like=True):
    table: TableState
    #: A ladder's entries' statuses as last taken.
    entries: dict[str, str]


class RunRatings:
    """A run's live table, kept between page views: each :meth:`update`
    applies only the games recorded since the last one (in schedule order,
    up to the first game still in flight), so a new game costs the same at
    game 100,000 as at game 10. Thread-safe: updates run off the loop.

    Checkpointed: every `checkpoint_games` games applied, the table's state
    is written into the run's database (:meth:`Store.put_checkpoint`, only
    the bots changed since the previous one), and a new RunRatings (the
    service started again) starts from it: it replays only the games after
    it, to the same standings, bit for bit, as a replay of every game (the
    ratings are kept as TrueSkill holds them). A checkpoint written for
    another league's ratings (its fingerprint) is ignored. `checkpoint_games`
    0: none read nor written (every game replayed)."""

    def __init__(
        self, league: League, *, ladder: bool = False, checkpoint_games: int = CHECKPOINT_GAMES
    ) -> None:
        self.league = league
        #: A ladder's entries come from its store as they enter (see :mod:`referee.tournament.ladder`).
        self.ladder = ladder
        names = [] if ladder else [b.name for b in league.bots]
        self.table = Table(names, league.ratings, series=league.rules.scoring)
        #: The index of the next game to apply.
        self.next = 0
        self.checkpoint_games = checkpoint_games
        self.fingerprint = hashlib.sha256(
            msgspec.json.encode(
                [1, league.ratings, league.rules.scoring, ladder, names, league.stop.confidence]
            )
        ).hexdigest()
        self._entries: dict[str, str] = {}
        self._trails: dict[str, Trail] = {}
        self._history: dict[str, list[tuple[int, int, float, float]]] = {}
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._loaded = False
        #: The games of the checkpoint stored (None: none of ours), and the
        #: bots changed since it.
        self._saved: int | None = None
        self._dirty: set[str] = set()
        self._writable = True
        #: The games of the checkpoint it started from (0: from the first game).
        self.started_from = 0

    def _take_entries(self, store: Store) -> bool:
        """A ladder's new entries and retirements since the last update."""
        changed = False
        # their names and statuses alone: a term's ladder has thousands, read on every update (issue 37)
        for name, status, mu0, sigma0 in store.entry_states():
            if self._entries.get(name) == status or status == "unreachable":
                continue
            if name not in self.table.ratings:
                self.table.add_bot(name, mu=mu0, sigma=sigma0)
            if status != "active" and name not in self.table.retired:
                self.table.retire(name)
            elif status == "active" and name in self.table.retired:
                self.table.add_bot(name)  # back in play (its team's new version was dropped), its rating kept
            self._entries[name] = status
            self._dirty.add(name)
            changed = True
        return changed

    def _load(self, store: Store) -> None:
        """Start from the run's checkpoint, when it has one of this league."""
        self._loaded = True
        found = store.checkpoint(self.fingerprint) if self.checkpoint_games > 0 else None
        if found is None:
            return
        games, state, bots = found
        run = msgspec.msgpack.decode(state, type=_RunCheckpoint)
        rows = {b: msgspec.msgpack.decode(v, type=_BotCheckpoint) for b, v in bots.items()}
        self.table.restore(run.table, {b: r.table for b, r in rows.items()})
        self._entries = dict(run.entries)
        self._trails = {b: Trail(r.points, r.stride, r.played, r.tail) for b, r in rows.items()}
        self._history = {b: t.points for b, t in self._trails.items()}
        self.next = self._saved = self.started_from = games

    def _save(self, store: Store) -> None:
        """Write the checkpoint at the games applied (the bots changed since ours only)."""
        base = self._saved
        names = self._dirty if base is not None else set(self.table.ratings)
        bots = {}
        for b in names:
            t = self._trails.get(b) or Trail()
            bots[b] = msgspec.msgpack.encode(
                _BotCheckpoint(
                    table=self.table.bot_state(b),
                    points=t.points,
                    stride=t.stride,
                    played=t.played,
                    tail=t.tail,
                )
            )
        state = msgspec.msgpack.encode(_RunCheckpoint(table=self.table.state(), entries=self._entries))
        try:
            written = store.put_checkpoint(self.fingerprint, base, self.next, state, bots)
        except Store.Unwritable as e:  # a read-only or busy database: the standings do not need it
            log.warning(
                "no ratings checkpoint written into %s (%s): the next start replays more games", store.path, e
            )
            self._writable = False
            return
        if written:
            self._saved = self.next
            self._dirty = set()
        elif base is not None:
            self._saved = None  # another's is stored: the next one is whole

    def _apply(self, store: Store) -> None:
        """The games recorded since the last update, a checkpoint's worth at a time."""
        history = self.table.history
        while True:
            batch = 0
            for o in store.outcomes(self.next, self.checkpoint_games or -1):
                if o.index != self.next:
                    break  # a game before it is still being played
                self.table.add(o)
                self.next += 1
                batch += 1
            for g, bot, mu, sigma in history:
                trail = self._trails.get(bot)
                if trail is None:
                    trail = self._trails[bot] = Trail()
                    self._history[bot] = trail.points
                trail.add(g, mu, sigma)
                self._dirty.add(bot)
            history.clear()  # the table's own list of every point would grow with the games
            if self.checkpoint_games <= 0:
                return
            if self._writable and self.next - (self._saved or 0) >= self.checkpoint_games:
                self._save(store)
            if batch < self.checkpoint_games:
                return

    def update(self, out_dir: str | Path, *, seal: bool = False) -> Snapshot:
        """The standings over every game applied so far, after applying the new ones.

        `seal`: the run is over (no game will come): a checkpoint is written at
        its last game, so that the first view after a start replays none."""
        with self._lock:
            before = self.next
            changed = False
            store = existing_store(out_dir)
            if store is not None:
                with store:
                    if not self._loaded:
                        self._load(store)
                    if self.ladder:
                        changed = self._take_entries(store)
                    self._apply(store)
                    if (
                        seal
                        and self._writable
                        and self.checkpoint_games > 0
                        and self.next > (self._saved or 0)
                    ):
                        self._save(store)
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


#: A games list's result filter: `bot` finished ahead of the opponent (no
#: opponent: first), behind it (no opponent: not first), in the same place
#: as it (an opponent only), or in that place (1 is first).
Result = Literal["won", "lost", "drawn"] | int


class GameFilter(msgspec.Struct, kw_only=True, frozen=True):
    """Which of a bot's games a list shows (``?opponent=NAME&result=won``)."""

    #: Only the games it played with this bot.
    opponent: str | None = None
    result: Result | None = None

    def keeps(self, game: GameRow, bot: str) -> bool:
        """Whether `game`, one `bot` played, passes the filter."""
        return self.keeps_places(game.seats, game.places, bot)

    def keeps_places(self, seats: Sequence[str], places: Sequence[int], bot: str) -> bool:
        """Whether a game `bot` played, of these `seats` and `places`, passes the filter."""
        mine = places[seats.index(bot)]
        theirs: int | None = None
        if self.opponent is not None:
            if self.opponent == bot or self.opponent not in seats:
                return False
            theirs = places[seats.index(self.opponent)]
        if self.result is None:
            return True
        if isinstance(self.result, int):
            return mine == self.result
        if theirs is None:  # against the table: won is first, lost is any other place
            return (mine == 1) == (self.result == "won") and self.result != "drawn"
        if self.result == "won":
            return mine < theirs
        return mine > theirs if self.result == "lost" else mine == theirs


def games_list(
    out_dir: str | Path, bot: str | None = None, last: int | None = None, where: GameFilter | None = None
) -> list[GameRow]:
    """The recorded games in schedule order (those `bot` played in, and of
    those the ones `where` keeps; the `last` ones only), as the pages and
    the API show them."""
    store = existing_store(out_dir)
    if store is None:
        return []
    with store:
        rows = store.game_rows(last if bot is None else None, bot)  # a bot's through its index
    if bot is None or where is None:
        return rows
    return [g for g in rows if where.keeps(g, bot)]


def games_page(
    out_dir: str | Path,
    offset: int,
    limit: int,
    bot: str | None = None,
    where: GameFilter | None = None,
    newest_first: bool = False,
) -> tuple[list[GameRow], int]:
    """The recorded games after the first `offset`, at most `limit`, in
    schedule order (those of :func:`games_list`), and how many there are in all.

    `newest_first` (a bot's games only): `offset` counts from the newest
    game, and one past the last page is the last page's (the bot page's
    pages; the rows are still in schedule order). A bot's page is read
    through the bots' index, its games' rows of that page only (issue 37:
    a term's bot has played thousands); filtered, from their seats and
    places alone."""
    store = existing_store(out_dir)
    if store is None:
        return [], 0
    with store:
        if bot is None:
            return store.game_rows(page=(offset, limit)), store.count_games()
        kept: list[int] | None = None
        if where is not None and (where.opponent is not None or where.result is not None):
            kept = [i for i, seats, places in store.bot_places(bot) if where.keeps_places(seats, places, bot)]
            total = len(kept)
        else:
            total = store.count_bot_games(bot)
        if newest_first and offset >= total > 0:
            offset = (total - 1) // limit * limit
        if kept is not None:
            wanted = kept[::-1] if newest_first else kept
            indexes = wanted[offset : offset + limit]
        else:
            indexes = store.bot_game_indexes(bot, offset, limit, newest_first)
        return store.game_rows(indexes=indexes), total


class Opponent(HeadToHead, kw_only=True):
    """A bot against one opponent over their recorded games together
    (:class:`~referee.tournament.ratings.HeadToHead`: a win is a better place
    than the opponent's in a game, the same place half a win)."""

    #: The bot's own average place in those games (1 is first).
    place: float
    #: The opponent is a house bot.
    house: bool = False


def head_to_head_of(
    out_dir: str | Path, bots: Sequence[str], house: Collection[str] = ()
) -> dict[str, list[Opponent]]:
    """Each of `bots` against each opponent it met in the run's recorded
    games, the one it fares worst against first (lowest win rate, then the
    most games); `house`: the house bots' names (flagged)."""
    out: dict[str, list[Opponent]] = {b: [] for b in bots}
    store = existing_store(out_dir)
    if store is None:
        return out
    with store:
        rows = store.head_to_head_rows(bots)
    for r in rows:
        record = head_to_head_record(r.bot, r.opponent, r.wins, r.losses, r.draws)
        out[r.bot].append(
            Opponent(
                **msgspec.structs.asdict(record),
                place=round(r.place_sum / r.games, 2),
                house=r.opponent in house,
            )
        )
    for rows_of in out.values():
        rows_of.sort(key=lambda o: (o.rate, -o.games, o.opponent))
    return out


def games_stamp(out_dir: str | Path, bots: Collection[str]) -> tuple[int, int] | None:
    """What changes when one of `bots` plays a game in the run
    (:meth:`~referee.tournament.store.Store.games_stamp`); None when the run
    has no database yet."""
    store = existing_store(out_dir)
    if store is None:
        return None
    with store:
        return store.games_stamp(bots)


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
