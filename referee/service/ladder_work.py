"""A competition's ladder at work (issue 15): played on a host of its own,
started again after a failure, stopped when the competition freezes or the
service stops; the service's side of it is :mod:`referee.service.ladder`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from ..bots.factory import BotSpec
from ..bots.netpolicy import PinnedURL
from ..tournament.executors import Executor, InFlight
from ..tournament.ladder import EntryResult, Ladder, Wanted
from ..tournament.league import League, LeagueError
from ..tournament.runner import Interrupted
from .clock import Clock
from .hosts import HostMaker
from .runs import record_end, watched
from .store import Run

log = logging.getLogger("referee.service.ladder")


class Workplace(Protocol):
    """What a ladder (or a run) takes from the service: where its database
    is, its clock, where it plays, and whom to tell of a game recorded."""

    @property
    def db_path(self) -> Path: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def new_host(self) -> HostMaker: ...

    @property
    def executor(self) -> Callable[[], Executor]: ...

    @property
    def house_images(self) -> dict[str, str]: ...

    def changed_threadsafe(self, cid: int) -> None: ...


#: A ladder that fails starts again after RESTART_S x the failures in a row,
#: RESTARTS times at most; a ladder that played RESTART_RESET_S seconds
#: before failing counts as failing for the first time.
RESTARTS = 5
RESTART_S = 5.0
RESTART_RESET_S = 300.0


class LadderWork:
    """A competition's ladder played on a :class:`~referee.service.hosts.Host`
    (like :class:`~referee.service.runs.RunWork`); :meth:`reconcile` from the
    service's loop brings in new entries."""

    def __init__(
        self,
        room: Workplace,
        run: Run,
        league: League,
        wanted: list[Wanted],
        known: dict[str, BotSpec],
        concurrency: int | None,
    ) -> None:
        self.room = room
        self.db_path = room.db_path
        self.run = run
        self.host = room.new_host(f"ladder-{run.competition_id}")
        self.make_executor = room.executor
        self.league, self.known, self.concurrency = league, known, concurrency
        self.wanted = wanted
        #: Its house URL bots' addresses, admitted when it started (the
        #: entries a new submission brings keep them).
        self.house: Mapping[str, PinnedURL] = {}
        #: Its games in flight, for those who watch them (a local executor's only).
        self.in_flight = InFlight()
        self.ladder = self._new_ladder(wanted)
        #: Times the ladder failed and started again, since it last played a while.
        self.restarts = 0
        self._stopping = False
        self._wake = asyncio.Event()
        #: The run's status once the ladder ends: "finished" when frozen,
        #: "interrupted" when the server stops (it plays on at the next start).
        self.end_status = "interrupted"
        self.status = "running"
        self.error: str | None = None

    def start(self) -> None:
        self.host.start(self._main, self._ended)

    def _ended(self) -> None:
        record_end(self.db_path, self.run.id, self.status, self.error)
        self.room.changed_threadsafe(self.run.competition_id)

    def _new_ladder(self, wanted: list[Wanted]) -> Ladder:
        cid = self.run.competition_id
        return Ladder(
            self.league,
            Path(self.run.out_dir),
            wanted=wanted,
            known=self.known,
            concurrency=self.concurrency,
            log=lambda m: log.info("competition %s: %s", cid, m),
            on_game=lambda _index: self.room.changed_threadsafe(cid),
            images=self.room.house_images,
        )

    async def _main(self) -> None:
        clock = self.room.clock
        self._wake = asyncio.Event()  # of the host's loop
        try:
            while True:
                began = clock.monotonic()
                try:
                    self.ladder.executor = watched(self.make_executor(), self.in_flight)
                    await self.ladder.run()
                except Interrupted:
                    self.status = self.end_status
                    break
                except Exception as e:  # noqa: BLE001 - a ladder's crash must not take the service down
                    self.error = str(e) if isinstance(e, LeagueError) else f"{type(e).__name__}: {e}"
                    if not isinstance(e, LeagueError):
                        traceback.print_exc()
                    # A game that could not be played (the disk, a bug): the ladder starts again over
                    # its folder after a pause, unless it fails again and again.
                    self.restarts = 1 if clock.monotonic() - began > RESTART_RESET_S else self.restarts + 1
                    if isinstance(e, LeagueError) or self.restarts > RESTARTS or self._stopping:
                        self.status = "failed"
                        break
                    # the admin's page (and whoever waits on the ladder) sees it failed, and why
                    self.room.changed_threadsafe(self.run.competition_id)
                    log.error(
                        "competition %s: the ladder failed (%s); it starts again in %.0f s (%d of %d)",
                        self.run.competition_id,
                        self.error,
                        RESTART_S * self.restarts,
                        self.restarts,
                        RESTARTS,
                    )
                    with contextlib.suppress(Exception):
                        await self.ladder.executor.close()
                    await self._pause(RESTART_S * self.restarts)
                    if self._stopping:
                        self.status = self.end_status
                        break
                    self.ladder = self._new_ladder(self.wanted)
        finally:
            with contextlib.suppress(Exception):
                await self.ladder.executor.close()

    def alive(self) -> bool:
        return self.host.alive()

    @property
    def waiting(self) -> str | None:
        """Why the ladder plays no game now and what to do (None: it plays, or it has ended)."""
        return self.ladder.waiting if self.alive() else None

    async def reconcile(self, wanted: list[Wanted]) -> list[EntryResult]:
        """Bring the ladder to `wanted` (from the service's loop); a ladder
        starting again after a failure starts from the latest `wanted`."""
        self.wanted = wanted

        async def go() -> list[EntryResult]:
            await self.ladder.started.wait()
            if self.ladder._store is None:  # it ended before it started
                return []
            return await self.ladder.reconcile(wanted)

        return await self.host.run(go) or []

    async def apply_league(self, league: League) -> None:
        """A league edit from the ladder's next block (:meth:`Ladder.apply_league`);
        a ladder starting again after a failure starts with it."""
        self.league = league

        async def go() -> None:
            await self.ladder.started.wait()
            self.ladder.apply_league(league)

        await self.host.run(go)

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds` on the service's clock, or until the ladder is stopped."""
        sleep = asyncio.ensure_future(self.room.clock.sleep(seconds))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait([sleep, woken], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleep.cancel()
            woken.cancel()

    def stop(self, status: str, abandon: bool) -> None:
        """End the ladder: after its games in flight, or abandoning them
        (planned, they are played when it starts again)."""
        self.end_status = status
        self._stopping = True

        def there() -> None:
            self._wake.set()
            self.ladder.stop(abandon)

        self.host.call_soon(there)

    async def join(self, timeout: float | None = None) -> None:
        await self.host.join(timeout)
