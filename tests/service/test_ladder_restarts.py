"""A ladder that fails starts again by itself (issue 15), proven on the
service's core and its clock (issue 33): the pauses between its restarts are
the service clock's (:mod:`referee.service.ladder_work`), so a
:class:`~tests.support.clocks.SteppedClock` passes them at once, and every
wait is on the service's change signal."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from referee.service.classroom import Classroom
from referee.service.ladder_work import RESTART_RESET_S, RESTART_S, RESTARTS, LadderWork
from referee.service.store import ServiceDB
from referee.tournament.results import games_list
from sample_bots import greedy
from sample_bots import random as sample_random
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock
from tests.support.service import classroom, games_of, serving, until

pytestmark = pytest.mark.timeout(120)

LEAGUE = """
[tournament]
name = "restarts"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2
catch_up = 4

[[bots]]
name = "house"
url = "{house}"
"""


def recorded(out: Path) -> list[tuple[int, list[str]]]:
    return [(g.index, g.seats) for g in games_list(out)]


def restarted(work: LadderWork, n: int) -> Callable[[], Awaitable[bool]]:
    """The ladder failed and is `n` failures in a row in (its pause before starting again begun)."""

    async def ready() -> bool:
        return work.restarts == n or not work.alive()

    return ready


async def pass_pause(clock: SteppedClock, seconds: float) -> None:
    """Once the failed ladder's pause sleeps on the clock (a third sleeper
    beside the service's two workers), move the clock on by `seconds`."""
    clock.workers = 3
    await clock.settled()
    clock.workers = 2
    await clock.advance(seconds)


async def run_status(room: Classroom, cid: int) -> tuple[str, str | None]:
    run = await room.db.call(ServiceDB.latest_run_of, cid, "ladder")
    assert run is not None
    return run.status, run.error


async def test_a_ladder_that_fails_starts_again_by_itself_and_gives_up_in_the_end(tmp_path: Path) -> None:
    """A game that cannot be played (its replay cannot be written) fails the
    ladder; it starts again over its folder after a pause that grows with
    the failures in a row, and plays on once the cause is gone, losing
    nothing. A ladder that played a while before failing counts from one
    again; failing more than RESTARTS times in a row, it gives up and its
    run says failed, and why."""
    clock = SteppedClock(wall=time.time(), workers=2)  # the deadline watch and the admission retrier
    room = classroom(tmp_path / "service.sqlite", clock)
    apps = {
        "house": lambda: make_app(greedy.decide, greedy.INFO),
        "random": lambda: make_app(sample_random.RandomBot(seed=3).decide, sample_random.INFO),
    }
    async with serving(apps) as bots:
        await room.start()
        try:
            comp = await room.create_competition("class", LEAGUE.format(house=bots["house"]))
            team, _ = await room.add_team(comp.id, "ada")
            sub = await room.submit(team, kind="url", url=bots["random"])
            assert (await room.pipeline.wait_for(sub.id)).status == "accepted"
            await room.open(comp.id)

            def played(n: int) -> Callable[[], Awaitable[bool]]:
                async def ready() -> bool:
                    return await games_of(room, comp.id) >= n

                return ready

            await until(room, played(4))
            run = await room.db.call(ServiceDB.latest_run_of, comp.id, "ladder")
            assert run is not None
            out = Path(run.out_dir)
            work = room.ladders[comp.id]
            recorded_before = recorded(out)

            def break_replays() -> None:
                (out / "replays").rename(out / "replays.kept")
                (out / "replays").write_text(
                    "not a folder"
                )  # every replay write, and the restart's mkdir, fail

            def mend_replays() -> None:
                (out / "replays").unlink()
                (out / "replays.kept").rename(out / "replays")

            # --- it fails, pauses RESTART_S, fails again, pauses twice that
            break_replays()
            await until(room, restarted(work, 1))
            assert work.alive() and work.error is not None and "replays" in work.error
            await pass_pause(clock, RESTART_S - 0.5)
            assert work.restarts == 1  # still in its pause
            await clock.advance(0.5)
            await until(room, restarted(work, 2))
            mend_replays()
            before = len(recorded(out))
            await pass_pause(clock, 2 * RESTART_S)
            await until(room, played(before + 6))
            assert work.alive() and work.restarts == 2
            assert (await run_status(room, comp.id))[0] == "running"
            games = recorded(out)
            assert len({i for i, _ in games}) == len(games)  # nothing twice
            assert {i for i, _ in recorded_before} <= {i for i, _ in games}  # nothing lost

            # --- having played a while, a failure is a first one again; RESTARTS+1 in a row: it gives up
            await clock.advance(RESTART_RESET_S + 1)
            break_replays()
            for n in range(1, RESTARTS + 1):
                await until(room, restarted(work, n))
                assert work.alive(), work.error
                await pass_pause(clock, RESTART_S * n)

            async def ended() -> bool:
                return (await run_status(room, comp.id))[0] != "running"

            await until(room, ended)
            status, error = await run_status(room, comp.id)
            assert status == "failed" and error is not None and "replays" in error, (status, error)
            assert work.restarts == RESTARTS + 1
        finally:
            await room.stop()
