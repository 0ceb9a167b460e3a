"""Where a league's games run: in this process, or on a Ray cluster.

The coordinator (:class:`~referee.tournament.runner.Tournament`) keeps the
schedule, the SQLite store and the ratings; an executor only plays one game
and hands back its :class:`~referee.match.MatchResult` and replay record.
Ratings are applied in schedule order by the coordinator, so the standings do
not depend on the executor.

- :class:`LocalExecutor` (the default): asyncio in this process.
- :class:`RayExecutor` (``pip install -e .[ray]``): async Ray actors, each
  playing many games at once over HTTP. Bots must be reachable from the
  workers by URL; a worker that dies has its games played again elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from protocol.messages import Rules, Timeouts

from ..bots.base import Bot
from ..match import Match
from ..record import FaultPolicy, MatchResult
from ..replay import compress

log = logging.getLogger("referee.tournament")


class GameJob(msgspec.Struct, kw_only=True):
    """Everything a worker needs to play one game."""

    seed: int
    names: list[str]
    #: Base URL and secret of each seat's bot.
    urls: list[str]
    secrets: list[str | None]
    #: The address each seat's URL is pinned to (None: resolve the name).
    addresses: list[str | None] = msgspec.field(default_factory=list)
    rules: Rules
    timeouts: Timeouts
    policy: FaultPolicy
    #: Whether to send back the replay record (``--no-replays``: not even made).
    replay: bool = True


class GameDone(msgspec.Struct, kw_only=True):
    result: MatchResult
    #: The replay record, gzip-compressed JSON lines (:func:`referee.replay.compress`);
    #: empty when the job asked for none.
    replay: bytes


class Executor(Protocol):
    name: str

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone: ...

    async def close(self) -> None: ...


class LocalExecutor:
    """Games in this process, with the coordinator's own bot transports."""

    name = "local"

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone:
        match = Match(bots, job.seed, rules=job.rules, timeouts=job.timeouts,
                      policy=job.policy, names=job.names)
        result = await match.play()
        if not job.replay:
            return GameDone(result=result, replay=b"")
        # Compressing a replay takes ~1 ms (up to 5): off the event loop, where
        # it would delay reading the other games' replies (and their latency).
        return GameDone(result=result, replay=await asyncio.to_thread(compress, match.record))

    async def close(self) -> None:
        return None


class ExecutorError(RuntimeError):
    """The executor cannot run (Ray missing, cluster unreachable)."""


_ENCODER = msgspec.msgpack.Encoder()
_JOB = msgspec.msgpack.Decoder(GameJob)
_DONE = msgspec.msgpack.Decoder(GameDone)


class _Worker:
    """A Ray actor body: plays games over HTTP with its own client session."""

    def __init__(self) -> None:
        self._session: Any = None

    def pid(self) -> int:
        return os.getpid()

    async def play(self, job_bytes: bytes) -> bytes:
        from ..bots.http import HttpBot, make_session

        if self._session is None:
            self._session = make_session(connections_per_bot=64)
        job = _JOB.decode(job_bytes)
        addresses = job.addresses or [None] * len(job.urls)
        # unix-socket and pinned bots own their sessions (see HttpBot), closed after the game
        own = [url.startswith("unix:") or address is not None for url, address in zip(job.urls, addresses)]
        bots = [
            HttpBot(url, name=name, secret=secret, session=None if mine else self._session, address=address)
            for name, url, secret, address, mine in zip(job.names, job.urls, job.secrets, addresses, own)
        ]
        try:
            done = await LocalExecutor().play(job, bots)
        finally:
            for b, mine in zip(bots, own):
                if mine:
                    await b.close()
        return _ENCODER.encode(done)


class RayExecutor:
    """Games on Ray workers: `workers` async actors, each running up to
    `per_worker` games at once. `address`: an existing cluster (``auto`` or
    ``ray://host:10001``); None starts a local one."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int = 2, per_worker: int = 16,
                 retries: int = 3) -> None:
        try:
            import ray as _ray
        except ImportError:
            raise ExecutorError("the ray executor needs Ray: pip install -e '.[ray]'") from None
        ray: Any = _ray
        self.ray = ray
        self.address = address
        self.retries = retries
        self.per_worker = per_worker
        if not ray.is_initialized():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            try:
                if address is None:
                    # A local cluster stays on loopback.
                    ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False,
                             logging_level=logging.WARNING, log_to_driver=False,
                             _node_ip_address="127.0.0.1")
                else:
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            except Exception as e:  # Ray raises many kinds here
                raise ExecutorError(f"cannot start or reach the Ray cluster ({address or 'local'}): {e}") from None
            self._owns_ray = True
        else:
            self._owns_ray = False
        self._actor_class = ray.remote(num_cpus=0.5, max_concurrency=per_worker)(_Worker)
        self.workers: list[Any] = [self._new_worker() for _ in range(workers)]
        self._next = 0
        #: Games played again after a worker died.
        self.retried = 0

    def _new_worker(self) -> Any:
        return self._actor_class.remote()

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone:
        payload = _ENCODER.encode(job)
        last: Exception | None = None
        for _ in range(self.retries + 1):
            k = self._next % len(self.workers)
            self._next += 1
            worker = self.workers[k]
            try:
                out = await worker.play.remote(payload)
                return _DONE.decode(out)
            except self.ray.exceptions.RayActorError as e:
                # The worker died (killed, out of memory, its node lost): the
                # game is played again from its seed on another worker.
                last = e
                self.retried += 1
                log.warning("a Ray worker died; playing the game again elsewhere")
                if self.workers[k] is worker:
                    self.workers[k] = self._new_worker()
        raise ExecutorError(f"a game failed on {self.retries + 1} Ray workers in a row: {last}")

    async def close(self) -> None:
        for w in self.workers:
            try:
                self.ray.kill(w)
            except Exception:
                pass
        self.workers = []
        if self._owns_ray:
            await asyncio.to_thread(self.ray.shutdown)
