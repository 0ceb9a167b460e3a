"""The child process that plays one practice game (issue 26): started by
the service's :class:`~referee.service.practice.PracticeQueue`, at the lowest CPU
priority, so that a practice game never shares the ladder's interpreter
(its GIL) nor its CPU share.

It reads one :class:`PracticeJob` (JSON, one line) on its stdin: the pinned
one-game league with the bots' secrets (never on its command line, never on
disk), its folder, and each setting of the service a game depends on, each
given explicitly (the child relies on nothing of the service's globals):

- ``runtime``: the operator's container runtime (``referee serve
  --runtime``, the service's :data:`~referee.bots.sandbox.docker_daemon.RUNTIME_ENV`);
- ``instance_id`` and ``pins_file``: the service's instance (its
  containers' names and ``referee.instance`` label, which the service's
  orphan sweep filters on; :mod:`referee.bots.sandbox.instance`);
- ``executor``, ``executor_address``, ``executor_workers``,
  ``executor_registry``: where its games play (``referee serve
  --executor``: this process, or the service's Ray cluster, joined at the
  address the service resolved, its image bots' images pushed to the
  service's ``--registry`` for the nodes to pull, as the ladder's are);
- ``docker_host``: the daemon the service's containers run on.

The bot address policy is not among them: the league it gets is pinned by
the service under that policy (each URL bot at the address admitted, house
URL bots as ``--house-urls-anywhere`` says), so the child resolves no name.

It plays the game with :class:`~referee.tournament.runner.Tournament`, as
the ladder plays its games, and writes its :class:`Outcome` to
``OUT/practice-outcome.json`` before it exits 0. Its stdout and stderr are
the game folder's ``practice.log`` (the service opens it). The end of its
stdin (the service closing it to stop the game, or dying) abandons the game
at once, its bots stopped and its containers removed.

    python -c "<lower the priority>; from referee.service.practice_worker import main; main()" < job
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from ..tournament.league import League, LeagueError
from ..tournament.runner import Interrupted, Tournament

#: The file of the game's folder where the child writes its outcome.
OUTCOME_FILE = "practice-outcome.json"
#: The file of the game's folder that gets the child's stdout and stderr.
LOG_FILE = "practice.log"


class PracticeJob(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Everything the child needs to play one practice game as the service would."""

    #: The one-game league, every bot pinned, with its secret.
    league: League
    #: The game's folder (``competition-N/practice/game-M``).
    out_dir: str
    #: The operator's container runtime (``--runtime``); None: each league's ``[containers] runtime``.
    runtime: str | None = None
    #: The service's instance id, and the file of its pinned image ids.
    instance_id: str
    pins_file: str | None = None
    #: "local" (in the child) or "ray" (the service's cluster, at `executor_address`).
    executor: str = "local"
    executor_address: str | None = None
    executor_workers: int = 2
    #: With "ray": the registry (``HOST:PORT``) the images go through to the nodes (``--registry``).
    executor_registry: str | None = None
    #: ``DOCKER_HOST`` of the service; None: the local socket.
    docker_host: str | None = None


class Outcome(msgspec.Struct, kw_only=True):
    """How the child's game ended.

    `status`: "played" (its games are in the folder's ``tournament.sqlite``;
    a bot's faults are data there), "interrupted" (stopped: the service
    asked, or a signal), "league" (the league cannot be played: the admin's
    league file), "crashed" (an exception of the referee: the service's).
    """

    status: Literal["played", "interrupted", "league", "crashed"]
    error: str | None = None
    #: The tournament's last log lines (a bot dropped, and why).
    log: list[str] = msgspec.field(default_factory=list)


def apply_settings(job: PracticeJob) -> None:
    """Make the job's settings this process's: the runtime, the Docker
    daemon and the instance (process-wide, as ``referee serve`` sets them)."""
    from ..bots.sandbox.docker_daemon import set_runtime
    from ..bots.sandbox.instance import Instance, use

    set_runtime(job.runtime)
    if job.docker_host:
        os.environ["DOCKER_HOST"] = job.docker_host
    else:
        os.environ.pop("DOCKER_HOST", None)
    use(Instance(job.instance_id, pins_file=job.pins_file))


async def play(job: PracticeJob, started: Callable[[Tournament], None] | None = None) -> Outcome:
    """Play the job's game in this event loop; `started` gets the
    tournament as soon as it exists (to stop it: ``t.stop(True)`` from this loop)."""
    from .runs import executor_factory

    log: list[str] = []

    def say(message: str) -> None:
        log.append(message)
        print(message, flush=True)

    executor = None
    try:
        executor = executor_factory(
            job.executor, job.executor_address, job.executor_workers, job.executor_registry
        )()
        t = Tournament(
            job.league, Path(job.out_dir), progress=False, log=say, drop_unreachable=True, executor=executor
        )
        if started is not None:
            started(t)
        await t.run()
        return Outcome(status="played", log=log[-3:])
    except Interrupted as e:
        return Outcome(status="interrupted", error=f"interrupted: {e}", log=log[-3:])
    except LeagueError as e:
        return Outcome(status="league", error=str(e), log=log[-3:])
    except Exception as e:  # noqa: BLE001 - reported as the service's, with its traceback in the log
        traceback.print_exc()
        return Outcome(status="crashed", error=f"{type(e).__name__}: {e}", log=log[-3:])
    finally:
        if executor is not None:
            try:
                await executor.close()
            except Exception:  # noqa: BLE001 - the game's outcome is what matters
                traceback.print_exc()


def _watch_stdin(loop: asyncio.AbstractEventLoop, t: Tournament) -> None:
    """Abandon the game when stdin ends: the service stopped it, or died."""

    def watch() -> None:
        while True:
            try:
                chunk = os.read(0, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
        print("stdin closed: the service stops this game", flush=True)
        try:
            loop.call_soon_threadsafe(t.stop, True)
        except RuntimeError:  # the loop is closed: the game is over anyway
            pass

    threading.Thread(target=watch, name="practice-stdin", daemon=True).start()


def write_outcome(out_dir: str | Path, outcome: Outcome) -> None:
    """The outcome, written whole or not at all (the service reads it once the child exited)."""
    path = Path(out_dir) / OUTCOME_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.encode(outcome))
    os.replace(tmp, path)


def main() -> int:
    line = b""
    while not line.endswith(b"\n"):  # the job: one line; the rest of stdin is the stop signal
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        line += chunk
    try:
        job = msgspec.json.decode(line, type=PracticeJob)
    except msgspec.DecodeError as e:
        print(f"practice worker: not a job on stdin ({e})", file=sys.stderr, flush=True)
        return 2
    apply_settings(job)
    print(
        f"practice worker {os.getpid()} (nice {os.getpriority(os.PRIO_PROCESS, 0)}): "
        f"{job.league.tournament.name} in {job.out_dir}",
        flush=True,
    )

    async def go() -> Outcome:
        loop = asyncio.get_running_loop()
        return await play(job, lambda t: _watch_stdin(loop, t))

    outcome = asyncio.run(go())
    write_outcome(job.out_dir, outcome)
    print(f"practice worker: {outcome.status}" + (f" ({outcome.error})" if outcome.error else ""), flush=True)
    return 0
