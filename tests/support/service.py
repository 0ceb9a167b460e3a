"""The service core as tests/service drives it (issue 33): a
:class:`~referee.service.classroom.Classroom` on a
:class:`~tests.support.clocks.SteppedClock`, its runs and ladders on the
test's own loop (:class:`~referee.service.hosts.InlineHost`), the practice
games in-process; real HTTP bots on loopback served by the same loop; and
waits on the service's change signal, never on the wall clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

from referee.service.classroom import Classroom
from referee.service.hosts import InlineHost
from referee.service.practice import in_process
from referee.service.settings import Settings
from referee.service.store import ServiceDB
from referee.tournament.results import count_games
from tests.support.clocks import SteppedClock

#: Every bot and the service are on this loop: the bots' port numbers are all the test waits on.
LOOPBACK = "127.0.0.0/8"


@asynccontextmanager
async def serving(apps: Mapping[str, Callable[[], web.Application]]) -> AsyncIterator[dict[str, str]]:
    """Each app served on loopback by this loop: their URLs by name."""
    runners, urls = [], {}
    try:
        for name, app in apps.items():
            runner = web.AppRunner(app(), access_log=None, shutdown_timeout=1)
            runners.append(runner)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            urls[name] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield urls
    finally:
        for runner in runners:
            await runner.cleanup()


def classroom(db: Path, clock: SteppedClock) -> Classroom:
    """The service on `db` and `clock`, bots on loopback allowed, two validation games."""
    from referee.bots.netpolicy import AddressPolicy, parse_networks

    settings = Settings(
        bot_policy=AddressPolicy(allowed=parse_networks(LOOPBACK)),
        validation_games=2,
        check_budget_s=60.0,
        practice_per_hour=5,
    )
    return Classroom(db, settings, clock=clock, hosts=InlineHost, practice_runner=in_process)


async def games_of(room: Classroom, cid: int, kind: str = "ladder") -> int:
    """The games recorded by competition `cid`'s latest run of `kind`."""
    run = await room.db.call(ServiceDB.latest_run_of, cid, kind)
    return 0 if run is None or not run.out_dir else await asyncio.to_thread(count_games, run.out_dir)


async def until(room: Classroom, ready: Callable[[], Awaitable[bool]]) -> None:
    """Until `ready()`, woken by the service's own changes (a verdict, a game, a phase)."""
    async with asyncio.timeout(60):  # a bound for a test that is broken, never a wait
        await room.until(ready)
