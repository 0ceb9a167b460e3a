"""The ladder: a league that plays until it is stopped while its entries come and go.

The classroom service keeps one per open competition (issue 15). Games are
planned a block at a time from the live table: the entries with the fewest
games first, each at a table with opponents near it in rating, every table
one duplicate deal in all its seat rotations. A new entry (a team's new
version) is taken in between blocks and seated first until its games catch
up; the version it replaces retires: it plays no new tables, finishes the
deals it was dealt into (a duplicate deal's rotations are only fair all
together) and keeps its history.

It never stalls silently (issue 25). A team's new version that is dropped
(it stopped answering: its container ran out of memory, say) puts the
team's previous version back in play, with its rating and games, and the
record says so (its reason: "back in play: ... was dropped (...)"). While
fewer players (teams' versions in play and the league's house bots) than a
table's seats remain, but at least two, built-in house bots fill the empty
seats (``[ladder] fill = "greedy"``, the default: ``house-greedy-1``...,
retired again once the players fill the tables). When it still cannot play,
:attr:`Ladder.waiting` says why and what to do, for the pages.

What survives a restart, in the ladder's ``tournament.sqlite`` beside the
games: the entries (``ladder_entries``, secrets left out) and every planned
game (``ladder_plan``, written before any of its games is played). A ladder
started again over the same folder plays the planned games not yet recorded,
then plans on: nothing is lost and nothing is played twice. Ratings are
applied in plan order, so the table after a restart is the table before it.
Those tables and their statements are :mod:`referee.tournament.store`'s.

:class:`LadderScheduler` is the plan alone (pure, no I/O): see its tests in
tests/tournament/test_ladder.py. :class:`Ladder` plays it with the
tournament runner's machinery (bots, executors, recording, dropping a bot
that stops answering).
"""

from __future__ import annotations

import asyncio
import collections
import math
import random
import time
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from ..bots.base import BotError
from ..bots.factory import BotSpec
from ..bots.house import BUILTIN_BOTS, HOUSE_PREFIX, builtin_spec, is_builtin, with_image
from ..report import Progress
from .executors import Executor
from .league import League, LeagueError
from .ratings import Standing
from .runner import Tournament, league_fingerprint, redacted
from .schedule import GameSpec, deal_seed
from .store import TOURNAMENT_DB, Entry, EntryStatus, Store, existing_store, open_ladder_store, owing_entries


def team_key(e: Entry | Wanted) -> int | str | None:
    """Which team an entry is of, for the ladder's own bookkeeping (a new
    version retires its team's previous one, a dropped one puts it back):
    its team id, else (a ladder that never had ids) its team's name."""
    return e.team_id if e.team_id is not None else e.team


class Wanted(msgspec.Struct, kw_only=True):
    """An entry the ladder should have: a house bot, or a team's version in play."""

    name: str
    spec: BotSpec
    team: str | None = None
    submission: int | None = None
    team_id: int | None = None


def entry_name(team: str, version: int) -> str:
    """A team's version as the ladder (and the bots at its tables) name it."""
    return f"{team} v{version}"


#: The built-in house bots that fill a ladder's (and a final's) empty seats
#: (``[ladder] fill``, :data:`referee.bots.house.BUILTIN_BOTS`):
#: ``house-greedy-1``, ``house-greedy-2``... (a house bot: no team).
FILL_PREFIX = HOUSE_PREFIX


def filler_name(fill: str, i: int) -> str:
    return f"{FILL_PREFIX}{fill}-{i}"


def filler_spec(fill: str, i: int, images: Mapping[str, str] | None = None) -> BotSpec:
    """The `i`-th built-in house bot `fill` that fills an empty seat (its
    image, when `images` holds one for it, else its command)."""
    return with_image(builtin_spec(fill, filler_name(fill, i)), images or {})


def is_filler(entry: Entry) -> bool:
    """A built-in house bot the ladder seated to fill a table."""
    if not entry.name.startswith(FILL_PREFIX) or entry.team is not None or entry.submission is not None:
        return False
    fill = entry.name[len(FILL_PREFIX) :].rpartition("-")[0]
    module = BUILTIN_BOTS.get(fill)
    if module is None:
        return False
    spec, command = entry.spec, entry.spec.command
    if spec.builtin == fill and is_builtin(spec):
        return True
    # a ladder stored before the built-in bots' table: this interpreter's path, then -m MODULE
    return spec.image is None and command is not None and command[1:5] == ["-m", module, "--port", "{port}"]


# ------------------------------------------------------------- the store


def set_team_ids(out_dir: str | Path, team_of: Callable[[int], int | None]) -> int:
    """Give each team entry of the ladder in `out_dir` stored without a team
    id (a ladder older than ids) the id of its submission's team
    (`team_of(submission id)`); the rows changed. Before the ladder starts."""
    store = existing_store(out_dir)
    if store is None:
        return 0
    with store:
        return store.fill_team_ids(team_of)


def ladder_entries(
    out_dir: str | Path, names: Collection[str] | None = None, submissions: Collection[int] | None = None
) -> list[Entry]:
    """The entries of the ladder playing into `out_dir` (none when it has
    not started); of these `names` or `submissions` only, when given."""
    store = existing_store(out_dir)
    if store is None:
        return []
    with store:
        return store.entries(names, submissions)


def entry_submissions(out_dir: str | Path) -> list[tuple[str, int | None, str]]:
    """(name, submission id, status) of each entry of the ladder in `out_dir`,
    in the order they came (None: a house bot; nothing when it has not started)."""
    store = existing_store(out_dir)
    if store is None:
        return []
    with store:
        return store.entry_submissions()


def ladder_fillers(out_dir: str | Path) -> list[Entry]:
    """The built-in house bots the ladder in `out_dir` seated to fill its tables (:func:`is_filler`)."""
    store = existing_store(out_dir)
    if store is None:
        return []
    with store:
        return [e for e in store.house_entries() if is_filler(e)]


def needed_entries(out_dir: str | Path) -> list[Entry]:
    """The entries of the ladder in `out_dir` whose bot it may still start:
    those in play and those that owe planned games not yet recorded (a
    retired version finishes the rotations of a deal it was dealt into,
    also when the ladder plays on after a restart). Read-only: the ladder
    may be playing into it meanwhile."""
    entries, owing = owing_entries(out_dir)
    return [e for e in entries if e.status == "active" or e.name in owing]


def ladder_fingerprint(league: League, *, legacy: bool = False) -> str:
    """What must not change while a ladder lives: its rules, fault policy,
    ratings and deals (its bots come and go; its timeouts and seats follow
    the competition's league edits, issue 34). `legacy`: as ladders made
    before edits reached them fingerprinted it (timeouts and seats too)."""
    t = league.tournament
    fixed = msgspec.structs.replace(
        league,
        bots=[],
        ladder=type(league.ladder)(),
        path="",
        tournament=msgspec.structs.replace(
            t,
            schedule="ladder",
            rounds=1,
            concurrency=1,
            name="ladder",
            output="",
            table_size=t.table_size if legacy else 0,
        ),
        timeouts=league.timeouts if legacy else type(league.timeouts)(),
    )
    return league_fingerprint(fixed)


# ------------------------------------------------------------- the plan


class LadderScheduler:
    """Which tables the ladder plays next: pure, deterministic from its seed
    and the order of its calls.

    A block seats each active entry at one table at most. The entry with the
    fewest planned games is seated first, with the ``table_size - 1``
    entries of the fewest games among the ``2 (table_size - 1)`` nearest to
    it in μ (ties: the pair that met least, the nearer, then the seeded
    draw); then the next entry with the fewest games not yet seated, and so
    on, up to ``tables`` tables. An entry whose neighbours within
    ``2 (table_size - 1)`` places are all seated already waits for the next
    block, where it comes first: opponents are always near in rating. Each table plays one deal in every seat
    rotation (``duplicate``) or one game per rotation on its own deal.
    """

    def __init__(self, table_size: int, duplicate: bool, seed: int, *, catch_up: int = 100) -> None:
        self.table_size = table_size
        self.duplicate = duplicate
        self.seed = seed
        self.catch_up = catch_up
        #: The entries seated at new tables, in the order they came.
        self.active: dict[str, None] = {}
        #: Games planned per entry (from its seating count when it came).
        self.games: dict[str, int] = {}
        self.met: collections.Counter[tuple[str, str]] = collections.Counter()
        self.next_index = 0
        self.round = 0

    def seating_count(self) -> int:
        """The game count a new entry starts from: ``catch_up`` below the
        least-played active entry (0 in a new ladder)."""
        if not self.active:
            return 0
        return max(0, min(self.games[b] for b in self.active) - self.catch_up)

    def add(self, name: str, games0: int | None = None) -> int:
        """Seat `name` at new tables from the next block; its starting game count."""
        start = self.seating_count() if games0 is None else games0
        self.games[name] = max(self.games.get(name, 0), start)
        self.active[name] = None
        return start

    def retire(self, name: str) -> None:
        self.active.pop(name, None)

    def restore(self, planned: Iterable[GameSpec]) -> None:
        """Count the games planned before a restart (after :meth:`add` of every entry)."""
        last = -1
        seen: set[tuple[int, int]] = set()
        for g in planned:
            for b in g.seats:
                self.games[b] = self.games.get(b, 0) + 1
            if (g.round, g.meeting) not in seen:
                seen.add((g.round, g.meeting))
                for i, a in enumerate(g.seats):
                    for b in g.seats[i + 1 :]:
                        self.met[_pair(a, b)] += 1
            last = max(last, g.index)
            self.round = max(self.round, g.round + 1)
        self.next_index = last + 1

    def block(self, mu: Mapping[str, float], tables: int) -> list[GameSpec]:
        """The next block: up to `tables` tables (fewer when the active
        entries run out), rated by `mu`; empty when fewer active entries
        than seats."""
        k = self.table_size
        pool = list(self.active)
        if len(pool) < k or tables < 1:
            return []
        rng = random.Random(f"ladder:{self.seed}:{self.round}")
        draw = {b: rng.random() for b in pool}
        by_mu = sorted(pool, key=lambda b: (-mu.get(b, 0.0), b))
        pos = {b: i for i, b in enumerate(by_mu)}
        order = sorted(pool, key=lambda b: (self.games[b], draw[b]))
        used: set[str] = set()
        seated: list[list[str]] = []
        for anchor in order:
            if len(seated) >= tables:
                break
            if anchor in used:
                continue
            reach = 2 * (k - 1)
            lo, hi = max(0, pos[anchor] - reach), pos[anchor] + reach + 1
            free = [b for b in by_mu[lo:hi] if b not in used and b != anchor]
            if len(free) < k - 1:
                continue  # its neighbours are seated: it is first in the next block
            near = sorted(free, key=lambda b: (abs(pos[b] - pos[anchor]), draw[b]))[:reach]
            chosen = sorted(
                near,
                key=lambda b: (self.games[b], self.met[_pair(anchor, b)], abs(pos[b] - pos[anchor]), draw[b]),
            )[: k - 1]
            table = [anchor, *chosen]
            rng.shuffle(table)
            used.update(table)
            seated.append(table)
        out: list[GameSpec] = []
        rotations = k
        for rot in range(rotations):
            for m, table in enumerate(seated):
                seats = tuple(table[(s + rot) % k] for s in range(k))
                out.append(
                    GameSpec(
                        index=self.next_index,
                        round=self.round,
                        meeting=m,
                        rotation=rot,
                        deal_seed=deal_seed(self.seed, self.round, m, 0 if self.duplicate else rot),
                        seats=seats,
                    )
                )
                self.next_index += 1
        for table in seated:
            for i, a in enumerate(table):
                self.games[a] += rotations
                for b in table[i + 1 :]:
                    self.met[_pair(a, b)] += 1
        self.round += 1
        return out


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


# ------------------------------------------------------------- playing


class EntryResult(msgspec.Struct, kw_only=True):
    """What :meth:`Ladder.reconcile` did with a wanted entry."""

    name: str
    #: "entered", "kept" (it plays already), or "unreachable".
    outcome: Literal["entered", "kept", "unreachable"]
    reason: str | None = None
    #: The entry it replaced (its team's previous version), now retired.
    replaced: str | None = None


class Ladder(Tournament):
    """A competition's ladder, played until :meth:`stop`; :meth:`reconcile`
    (on the ladder's loop) brings in the entries it should have.

    `league`: the rules, timeouts, ratings and seats (its ``[[bots]]`` are not
    used: the entries come from `wanted` and from the store). `wanted`: the
    entries it should have now, with their secrets. `known`: the specs (with
    secrets) of entries of earlier runs of this ladder that may still have
    planned games (retired versions); an entry without one plays them with
    its stored spec.
    """

    def __init__(
        self,
        league: League,
        out: Path,
        *,
        wanted: Sequence[Wanted] = (),
        known: Mapping[str, BotSpec] | None = None,
        concurrency: int | None = None,
        log: Callable[[str], None] | None = None,
        executor: Executor | None = None,
        replays: bool = True,
        on_game: Callable[[int], None] | None = None,
        images: Mapping[str, str] | None = None,
    ) -> None:
        lad = league.ladder
        #: The images of built-in house bots (the service's): fillers play them, else their commands.
        self.images = dict(images or {})
        # The runner's own schedule is not used: the ladder plans its blocks.
        idle = msgspec.structs.replace(league.tournament, schedule="round-robin")
        super().__init__(
            msgspec.structs.replace(league, bots=[], tournament=idle),
            out,
            concurrency=concurrency or lad.concurrency or league.tournament.concurrency,
            resume=True,
            progress=False,
            replays=replays,
            log=log,
            executor=executor,
            drop_unreachable=True,
            on_game=on_game,
        )
        t = league.tournament
        self.plan = LadderScheduler(t.table_size, t.duplicate, t.seed, catch_up=lad.catch_up)
        self.wanted = list(wanted)
        self.known = dict(known or {})
        self.entries: dict[str, Entry] = {}
        self._queue: collections.deque[GameSpec] = collections.deque()
        #: Planned games not yet finished, per entry (a retired entry's bot
        #: is closed when it reaches 0).
        self._owed: collections.Counter[str] = collections.Counter()
        self._wake = asyncio.Event()
        self._store: Store | None = None
        #: Set once the ladder plays (its bots started).
        self.started = asyncio.Event()
        #: Set at each change one may wait for: an entry's status, :attr:`waiting`,
        #: a game applied to the live table. A waiter clears it, checks, then waits.
        self.changed = asyncio.Event()
        #: Why the ladder plays no game now and what to do, in plain words
        #: (None while it plays): too few players for a table.
        self.waiting: str | None = None

    # ------------------------------------------------------------ the store

    def _open_store(self) -> Store:
        self.out.mkdir(parents=True, exist_ok=True)
        store = open_ladder_store(self.out / TOURNAMENT_DB)
        fingerprint = ladder_fingerprint(self.league)
        known = store.get_meta("ladder_fingerprint")
        if known is not None and known not in (fingerprint, ladder_fingerprint(self.league, legacy=True)):
            store.close()
            raise LeagueError(
                f"{self.out} holds a ladder of another league (its rules, fault policy, ratings, "
                "duplicate deals or seed differ): those cannot change while a competition's ladder lives"
            )
        store.set_meta("ladder_fingerprint", fingerprint)
        store.set_meta("league", msgspec.json.encode(redacted(self.league)).decode())
        store.set_meta("name", self.league.tournament.name)
        store.set_meta("kind", "ladder")
        return store

    def _restore(self, store: Store) -> list[GameSpec]:
        """The entries and the plan as they were; the planned games not yet recorded."""
        for e in store.entries():
            self.entries[e.name] = e
            if e.status == "unreachable":
                continue  # it never played
            self.table.add_bot(e.name, mu=e.mu0, sigma=e.sigma0)
            self._entries[e.name] = msgspec.structs.replace(self.known.get(e.name, e.spec), name=e.name)
            if e.status == "active":
                self.plan.add(e.name, e.games0)
            else:
                self.table.retire(e.name)
                self.plan.games[e.name] = e.games0
        planned = store.plan()
        self.plan.restore(planned)
        done = store.done_indexes()
        todo = [g for g in planned if g.index not in done]
        for g in todo:
            self._owed.update(g.seats)
        return todo

    # -------------------------------------------------------------- entries

    def _new_entry(self, w: Wanted, replaces: Entry | None) -> Entry:
        cfg = self.league.ratings
        mu, sigma = cfg.mu, cfg.sigma
        if replaces is not None and self.league.ladder.ratings == "inherit":
            r = self.table.ratings[replaces.name]
            mu, sigma = float(r.mu), max(float(r.sigma), cfg.sigma / 2)
        return Entry(
            name=w.name,
            team=w.team,
            submission=w.submission,
            team_id=w.team_id,
            spec=msgspec.structs.replace(w.spec, name=w.name),
            mu0=mu,
            sigma0=sigma,
            games0=self.plan.seating_count(),
            joined_at=time.time(),
            first_index=self.plan.next_index,
        )

    async def _reach(self, spec: BotSpec) -> str | None:
        """Start (or reach) and greet a new entry's bot; why not, if it cannot be."""
        factory = self._factory
        assert factory is not None
        try:
            await factory.prepare(spec)
            bot = factory.make(spec)
        except BotError as e:
            return str(e)
        try:
            await bot.handshake()
        except BotError as e:
            await bot.close()
            return str(e)
        if spec.fresh_process:
            await bot.close()
        self.bots[spec.name] = bot
        return None

    def apply_league(self, league: League) -> None:
        """A league edit reaches the ladder (on its loop), from its next
        block: its timeouts (from its next game), its table size and its
        ``[ladder]`` table (the concurrency it opened with kept). Its house
        bots come and go with :meth:`reconcile`; its rules, fault policy,
        ratings and deals stay (:func:`ladder_fingerprint`)."""
        mine = self.league
        lad = msgspec.structs.replace(league.ladder, concurrency=mine.ladder.concurrency)
        tournament = msgspec.structs.replace(mine.tournament, table_size=league.tournament.table_size)
        self.league = msgspec.structs.replace(
            mine, timeouts=league.timeouts, tournament=tournament, ladder=lad
        )
        self.plan.table_size = tournament.table_size
        self.plan.catch_up = lad.catch_up
        if self._store is not None:
            self._store.set_meta("league", msgspec.json.encode(redacted(self.league)).decode())
        self._wake.set()

    async def reconcile(self, wanted: Sequence[Wanted]) -> list[EntryResult]:
        """Bring the ladder to `wanted`, every entry it should have (call on
        the ladder's loop once it has :attr:`started`): each new entry is
        reached and taken in, and the entry of its team it replaces retires.
        An entry that cannot be reached is recorded as unreachable and leaves
        the previous version in play. A team's entry whose team is not in
        `wanted` at all retires (withdrawn). A team whose wanted version was
        dropped gets its previous version back in play (:meth:`_fall_back`)."""
        store = self._store
        assert store is not None
        results: list[EntryResult] = []
        for w in wanted:
            if w.name in self.entries:
                e = self.entries[w.name]
                if e.status == "active":
                    results.append(EntryResult(name=w.name, outcome="kept"))
                elif e.status == "dropped" and e.team is not None:
                    await self._fall_back(e)
                elif e.status == "retired" and e.team is None and not is_filler(e):
                    why = await self._reinstate(e, "back in the league file")
                    results.append(
                        EntryResult(name=w.name, outcome="unreachable", reason=why)
                        if why is not None
                        else EntryResult(name=w.name, outcome="entered")
                    )
                continue
            previous = (
                None
                if w.team is None
                else next(
                    (e for e in self.entries.values() if e.status == "active" and team_key(e) == team_key(w)),
                    None,
                )
            )
            results.append(await self._enter(w, previous))
        teams = {team_key(w) for w in wanted if w.team is not None}
        house = {w.name for w in wanted if w.team is None}
        for e in list(self.entries.values()):
            if e.status == "active" and e.team is None and not is_filler(e) and e.name not in house:
                self._retire(e, "retired", "removed from the league file")
                self.log(f"ladder: house bot {e.name!r} retires: removed from the league file")
            elif e.status == "active" and e.team is not None and team_key(e) not in teams:
                # e.g. its pinned address is one the service no longer allows
                self._retire(e, "retired", "no longer in play: the service withdrew it")
                self.log(f"ladder: {e.name!r} is withdrawn")
        self._wake.set()
        return results

    async def _enter(self, w: Wanted, previous: Entry | None) -> EntryResult:
        """Reach a new entry and take it in; `previous` (its team's version in play) retires."""
        store = self._store
        assert store is not None
        entry = self._new_entry(w, previous)
        spec = entry.spec
        why = await self._reach(spec)
        if why is not None:
            entry.status, entry.reason, entry.ended_at = "unreachable", why, time.time()
            self.entries[w.name] = entry
            self._put_entry(entry)
            self.log(f"ladder: {w.name!r} could not be reached and does not enter: {why}")
            return EntryResult(name=w.name, outcome="unreachable", reason=why)
        self.entries[w.name] = entry
        self._entries[w.name] = spec
        self.table.add_bot(w.name, mu=entry.mu0, sigma=entry.sigma0)
        entry.games0 = self.plan.add(w.name)
        # where it enters the plan: games planned while its bot was reached are not its
        entry.first_index = self.plan.next_index
        self._put_entry(entry)
        replaced = None
        if previous is not None and previous.status == "active":
            self._retire(previous, "retired", f"replaced by {w.name}")
            replaced = previous.name
        store.put_bot(w.name, spec.kind, spec.target, None)
        self.log(f"ladder: {w.name!r} enters" + (f", {replaced!r} retires" if replaced else ""))
        return EntryResult(name=w.name, outcome="entered", replaced=replaced)

    async def _reinstate(self, entry: Entry, reason: str) -> str | None:
        """Put a retired entry back in play with its rating and games; why not, if its bot cannot be reached."""
        store = self._store
        assert store is not None
        if entry.name not in self.bots:
            spec = self._entries.get(entry.name, entry.spec)
            why = await self._reach(spec)
            if why is not None:
                return why
        entry.status, entry.reason, entry.ended_at = "active", reason, None
        self.table.add_bot(entry.name)  # back from retirement, its rating and counts kept
        self.plan.add(entry.name)
        self._put_entry(entry)
        self._wake.set()
        return None

    async def _fall_back(self, dropped: Entry) -> Entry | None:
        """`dropped`'s team's previous version back in play (the newest one
        replaced by a newer version that can still be reached), so that a
        team whose new version fails keeps playing; the entry now in play."""
        team = team_key(dropped)
        if dropped.team is None or self._store is None:
            return None
        mine = [e for e in self.entries.values() if e.team is not None and team_key(e) == team]
        if any(e.status == "active" for e in mine):
            return None
        for e in sorted(mine, key=lambda x: x.joined_at, reverse=True):
            if e.status != "retired" or not (e.reason or "").startswith("replaced by"):
                continue
            why = await self._reinstate(e, f"back in play: {dropped.name} was dropped ({dropped.reason})")
            if any(
                x.status == "active"
                for x in self.entries.values()
                if x.team is not None and team_key(x) == team and x is not e
            ):
                # a newer version entered meanwhile: it plays (e's status, read
                # again: the awaits above may have put it back in play)
                if self.entries[e.name].status == "active":
                    self._retire(e, "retired", "replaced by a newer version")
                return None
            if why is None:
                self.log(f"ladder: {dropped.name!r} was dropped: {e.name!r} is back in play")
                return e
            self.log(f"ladder: {e.name!r} cannot be put back in play: {why}")
        self.log(
            f"ladder: {dropped.name!r} was dropped and its team has no earlier version to put back in play"
        )
        return None

    def _retire(self, entry: Entry, status: EntryStatus, reason: str) -> None:
        entry.status, entry.reason, entry.ended_at = status, reason, time.time()
        self.plan.retire(entry.name)
        if entry.name not in self.table.retired:
            self.table.retire(entry.name)
        self._put_entry(entry)
        if self._owed[entry.name] <= 0:
            self._close_entry(entry.name)

    def _put_entry(self, entry: Entry) -> None:
        """Store an entry's new status (and say it changed)."""
        if self._store is not None:
            self._store.put_entry(entry)
        self.changed.set()

    def _apply_ready(self) -> None:
        super()._apply_ready()
        self.changed.set()

    def _close_entry(self, name: str) -> None:
        bot = self.bots.pop(name, None)
        if bot is not None:
            task = asyncio.ensure_future(bot.close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _drop(self, name: str, why: str, detail: str = "") -> None:
        super()._drop(name, why, detail)
        entry = self.entries.get(name)
        if entry is not None and entry.status == "active":
            entry.status, entry.reason, entry.ended_at = "dropped", why, time.time()
            self.plan.retire(name)
            if name not in self.table.retired:
                self.table.retire(name)
            self._put_entry(entry)
            if entry.team is not None:
                task = asyncio.ensure_future(self._fall_back_soon(entry))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            self._wake.set()

    async def _fall_back_soon(self, dropped: Entry) -> None:
        await self._fall_back(dropped)
        self._wake.set()

    # ------------------------------------------------------------- filling

    def _players(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.status == "active" and not is_filler(e)]

    def needed(self) -> int:
        """The fewest players (teams' versions and house bots in play) the ladder plays with."""
        k = self.league.tournament.table_size
        return min(k, 2) if self.league.ladder.fill != "none" else k

    async def _fill(self) -> None:
        """Seat built-in house bots in the empty seats while fewer players
        than a table's seats remain (at least :meth:`needed`); retire them
        once the players fill the tables."""
        fill = self.league.ladder.fill
        k = self.league.tournament.table_size
        players = len(self._players())
        want = k - players if fill in BUILTIN_BOTS and self.needed() <= players < k else 0
        seated = [e for e in self.entries.values() if is_filler(e) and e.status == "active"]
        for extra in seated[want:]:
            self._retire(extra, "retired", f"not needed: {players} players fill the tables of {k}")
        have = min(len(seated), want)
        i = 0
        while have < want and i < k + 8:
            i += 1
            name = filler_name(fill, i)
            e = self.entries.get(name)
            why: str | None
            if e is None:
                if name in self._entries:
                    continue
                spec = filler_spec(fill, i, self.images)
                result = await self._enter(Wanted(name=name, spec=spec), None)
                why = result.reason if result.outcome != "entered" else None
            elif e.status == "retired" and is_filler(e):
                why = await self._reinstate(e, f"fills an empty seat: {players} players for tables of {k}")
            else:
                continue  # in play already, or a bot of that name that is not a filler
            if why is None:
                have += 1
            else:
                self.log(f"ladder: the house bot {name!r} cannot fill a seat: {why}")

    def _why_waiting(self) -> str:
        """Why the ladder plays nothing, and what to do, in plain words."""
        k = self.league.tournament.table_size
        players = self._players()
        need = self.needed()
        names = ", ".join(e.name for e in players) or "none"
        fill = (
            ""
            if self.league.ladder.fill != "none"
            else (
                ', or set fill = "greedy" under [ladder] to fill the empty seats with the built-in greedy bot'
            )
        )
        return (
            f"The ladder is waiting: it needs at least {need} players to play (tables of {k}) and has "
            f"{len(players)} ({names}). Add a house bot to the league file (a built-in one: [[bots]] "
            f'name = "house-greedy" builtin = "greedy"){fill}, or wait for more teams\' '
            "bots to be accepted: it starts by itself."
        )

    # ----------------------------------------------------------------- play

    def standings(self) -> list[Standing]:
        """The live table of the entries in play."""
        return self.table.standings(self.confidence, retired=False)

    async def run(self) -> list[Standing]:
        store = self._open_store()
        self._store = store
        try:
            todo = self._restore(store)
            recorded = {o.index: o for o in store.outcomes()}
            session = self._new_factory()
            try:
                # The bots of planned games first (they are owed), then the wanted entries.
                needed = [self._entries[n] for n in self._owed if n in self._entries]
                needed += [
                    self._entries[n]
                    for n, e in self.entries.items()
                    if e.status == "active" and n not in self._owed
                ]
                self.league = msgspec.structs.replace(self.league, bots=needed)
                await self._start_bots(store)
                if self.replays:
                    (self.out / "replays").mkdir(exist_ok=True)
                for name, e in self.entries.items():
                    if e.status in ("retired", "dropped", "unreachable") and self._owed[name] <= 0:
                        self._close_entry(name)
                self.started.set()
                await self.reconcile(self.wanted)
                t0 = time.perf_counter()
                try:
                    await self._play_ladder(todo, recorded, store)
                finally:
                    self.play_seconds = time.perf_counter() - t0
            finally:
                await self._close_bots()
                await session.close()
            return self.finish(store)
        finally:
            self.started.set()
            self._store = None
            store.close()

    def _tables(self) -> int:
        """Tables per block: enough to keep `concurrency` games going."""
        return max(1, math.ceil(2 * self.concurrency / self.league.tournament.table_size))

    def finish(self, store: Store) -> list[Standing]:
        """The outputs over every entry that played (retired ones flagged)."""
        self.league = msgspec.structs.replace(
            self.league, bots=[self._entries[n] for n in self.table.ratings if n in self._entries]
        )
        return super().finish(store)

    async def _play_ladder(self, todo: list[GameSpec], recorded: Mapping[int, object], store: Store) -> None:
        """Play `todo` (planned before a restart), then block after block
        (:meth:`_planned`), through the runner's game loop until :meth:`stop`."""
        progress = Progress(0, len(recorded), enabled=False)
        self._finished = {o.index: o for o in store.outcomes()}
        self._gate = math.inf  # the ladder's table follows every game as soon as its turn comes
        self._apply_ready()
        self._queue.extend(todo)
        self.planned = self.plan.next_index
        try:
            await self._play_games(self._planned(store), store, progress, len(recorded), "the ladder stopped")
        finally:
            self._apply_ready()

    async def _planned(self, store: Store) -> AsyncGenerator[GameSpec, None]:
        """The ladder's games in plan order until it stops: those queued,
        then, when none is, the next block, planned from the live table (its
        empty seats filled first) and stored before any of its games is
        played; while no block can be planned, :attr:`waiting` says why and
        the ladder waits to be woken (an entry comes, one is dropped, a stop)."""
        while not self._stopping and self._failure is None:
            if not self._queue:
                self._wake.clear()
                await self._fill()
                mu = {b: float(self.table.ratings[b].mu) for b in self.plan.active}
                block = self.plan.block(mu, self._tables())
                if not block:
                    self.waiting = self._why_waiting()
                    self.changed.set()
                    await self._wake.wait()
                    continue
                if self.waiting is not None:
                    self.waiting = None
                    self.changed.set()
                store.put_plan(block)
                for g in block:
                    self._owed.update(g.seats)
                self._queue.extend(block)
                self.planned = self.plan.next_index
            yield self._queue.popleft()

    async def _game(
        self,
        spec: GameSpec,
        store: Store,
        semaphore: asyncio.Semaphore,
        counter: list[int],
        progress: Progress,
    ) -> None:
        """A game as the runner plays it; then its seats owe one game less,
        and a retired entry that owes none is closed."""
        try:
            await super()._game(spec, store, semaphore, counter, progress)
        finally:
            for name in spec.seats:
                self._owed[name] -= 1
                entry = self.entries.get(name)
                if self._owed[name] <= 0 and entry is not None and entry.status != "active":
                    self._close_entry(name)

    def stop(self, abandon: bool = False) -> None:
        super().stop(abandon)
        self._wake.set()
