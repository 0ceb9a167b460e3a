"""What the service's parts take of it: the :class:`Room` protocol.

The parts (the ladder's phases, the deadlines, the admission pipeline, the
disk, practice) are handed the service as a :class:`Room`: its settings,
store, clock, health, where runs and ladders play, and the change signal.
The :class:`~referee.service.classroom.Classroom` is one; the parts never
import it (it imports them), so the dependencies point one way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..tournament.executors import Executor
from ..tournament.league import League
from .clock import Clock
from .health import Health
from .hosts import HostMaker
from .ladder_work import LadderWork
from .runs import RunWork
from .settings import Settings
from .store import AsyncServiceDB, Run


class Room(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> AsyncServiceDB: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def health(self) -> Health: ...

    @property
    def new_host(self) -> HostMaker: ...

    @property
    def executor(self) -> Callable[[], Executor]: ...

    #: The runs this service plays (hand-started runs and finals), by run id.
    @property
    def runs(self) -> dict[int, RunWork]: ...

    #: The open competitions' ladders, by competition id.
    @property
    def ladders(self) -> dict[int, LadderWork]: ...

    #: The images of the built-in house bots, by built-in name, once the
    #: service built them (empty: they play as the service's own commands).
    @property
    def house_images(self) -> dict[str, str]: ...

    def run_work(self, run: Run, league: League, *, resume: bool) -> RunWork: ...

    def changed(self, cid: int) -> None: ...

    def changed_threadsafe(self, cid: int) -> None: ...
