"""Container bots on the node that plays the game (a Ray cluster's worker).

The coordinator never starts an image bot's container when games run on a
cluster: it pins the image (:class:`~referee.bots.cluster.registry.PinnedImage`,
pushed to the registry with ``--registry``) and describes the bot as an
:class:`ImageSeat`. Each node runs one :class:`NodePool` (in its one worker
actor, so there is **one container per bot per node**): at the bot's first
game there it gets the image by digest (:class:`~referee.bots.cluster.registry.ImageCache`),
starts a :class:`~referee.bots.sandbox.container.ContainerBot` on the node's own
Docker daemon (``DOCKER_HOST`` of the node) with every sandbox rule of one
machine (limits, no network, the bounded socket folder, the socket guard on
every connection) and keeps it for the next games, exactly as one machine
does. A fresh-process bot gets a container per game.

On the coordinator a bot of the cluster is a :class:`NodeBot`: a handle
that greets the bot on a node (its handshake at the start of a run) and
retires its containers everywhere when the run no longer needs it; the
executor plays its games through the seat it carries.

Where a node keeps its sockets and logs: ``OUT/nodes/<node>/`` when the
tournament's output folder ``OUT`` is on the node's file system (one
machine, or a shared one), else ``$TMPDIR/referee-node-<node>/<hash of OUT>/``.
Containers of a run that a node's worker left when it died (labelled
``referee.run=OUT`` and ``referee.node=<node>``) are removed from that
daemon by the next worker there that plays the run (a node started again
has a new id), or by ``referee cleanup`` with the node's ``DOCKER_HOST``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import msgspec

from protocol.messages import ActRequest, BotInfo, Fault, GameEnd, GameStart

from ..base import ActOutcome, BotError, Endpoint
from ..clock import HANDSHAKE_S
from ..sandbox.container import ContainerBot
from ..sandbox.container_limits import NODES_DIR, ContainerLimits
from ..sandbox.docker_daemon import (
    DockerUnavailable,
    check_runtime,
    cleanup_containers,
    docker_client,
    effective_runtime,
)
from ..sandbox.instance import Instance
from .registry import ImageCache, ImageUnavailable, PinnedImage

__all__ = ["RUN_LABEL", "ImageSeat", "NodeBot", "NodeError", "NodePool", "RemoteImages", "seat_of"]

#: The label of a node's containers naming their run (the coordinator's output folder).
RUN_LABEL = "referee.run"


class NodeError(RuntimeError):
    """A node cannot play a game at all (no Docker daemon, no image, no such
    runtime): the cluster's fault, never the bot's."""


class ImageSeat(msgspec.Struct, frozen=True, kw_only=True):
    """An image bot as a node starts it: everything a
    :class:`~referee.bots.sandbox.container.ContainerBot` needs, its image by id and digest."""

    name: str
    image: PinnedImage
    limits: ContainerLimits
    secret: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    #: A container per game (no memory carried from one game to the next).
    fresh: bool = False
    #: The install whose names and label its containers carry.
    instance: str
    #: The tournament's output folder on the coordinator.
    out_dir: str

    @property
    def key(self) -> str:
        """What tells two seats apart (every field): one container per key per node."""
        return hashlib.sha256(msgspec.msgpack.encode(self)).hexdigest()[:16]


def seat_of(
    name: str,
    image: PinnedImage,
    *,
    limits: ContainerLimits,
    secret: str | None,
    command: list[str] | None,
    env: dict[str, str],
    labels: dict[str, str],
    fresh: bool,
    instance: str,
    out_dir: str,
) -> ImageSeat:
    """The seat of an image bot, its runtime the one this process would use
    (``--runtime`` over the limits', :func:`~referee.bots.sandbox.container.effective_runtime`)."""
    runtime, _ = effective_runtime(limits)
    if runtime != limits.runtime:
        limits = msgspec.structs.replace(limits, runtime=runtime)
    return ImageSeat(
        name=name,
        image=image,
        limits=limits,
        secret=secret,
        command=command,
        env=env,
        labels=labels,
        fresh=fresh,
        instance=instance,
        out_dir=out_dir,
    )


# ------------------------------------------------------------ the coordinator's side


class RemoteImages(Protocol):
    """What the coordinator asks the cluster about image bots (the Ray executor)."""

    async def pin(self, image: str) -> PinnedImage:
        """The image named so on the coordinator's daemon, by id (and pushed,
        with a registry). Raises the executor's error when it cannot be."""
        ...

    async def handshake(self, seat: ImageSeat) -> BotInfo:
        """Start the bot on a node and greet it; BotError when the bot fails."""
        ...

    async def retire(self, seat: ImageSeat) -> None:
        """Stop the bot's containers on every node."""
        ...


class NodeBot:
    """An image bot that plays on the cluster's nodes: the coordinator's handle.

    Its games are played by the executor through :attr:`seat` (a node runs
    the container); only the handshake and the end of its life go through
    here. Asking it for a move here is an error of the caller."""

    def __init__(self, seat: ImageSeat, host: RemoteImages) -> None:
        self.seat = seat
        self.host = host
        self.info: BotInfo | None = None

    @property
    def name(self) -> str:
        return self.seat.name

    def __repr__(self) -> str:
        return f"NodeBot({self.seat.name!r}, image={self.seat.image.image_id[:19]})"

    def _elsewhere(self) -> BotError:
        return BotError(
            f"bot {self.seat.name!r} plays on the cluster's nodes: its games go through the "
            "executor, not through this process"
        )

    async def handshake(self, timeout_s: float = HANDSHAKE_S) -> BotInfo:
        self.info = await self.host.handshake(self.seat)
        return self.info

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        raise self._elsewhere()

    async def act(self, request: ActRequest, deadline_s: float) -> ActOutcome:
        raise self._elsewhere()

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        raise self._elsewhere()

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        raise self._elsewhere()

    async def endpoint(self) -> Endpoint:
        raise self._elsewhere()

    async def close(self) -> None:
        if not self.seat.fresh:  # a fresh one's containers end with their game
            await self.host.retire(self.seat)


# ------------------------------------------------------------ the node's side


class _Held:
    def __init__(self, bot: ContainerBot) -> None:
        self.bot = bot
        self.users = 0
        self.retired = False


class NodePool:
    """The container bots of one node (`node`: its Ray node id), on the
    daemon ``DOCKER_HOST`` names (or `client`), images through `cache`."""

    def __init__(self, node: str, *, client: Any = None, cache: ImageCache | None = None) -> None:
        self.node = node
        self._client = client
        self._cache = cache
        self._held: dict[str, _Held] = {}
        self._lock = asyncio.Lock()
        self._swept: set[str] = set()
        self._runtimes: set[str] = set()
        self._fresh = 0
        #: Containers started on this node (a bot's restarts included).
        self.started = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = docker_client()
            except DockerUnavailable as e:
                raise NodeError(f"node {self.node[:12]}: {e}") from None
        return self._client

    @property
    def cache(self) -> ImageCache:
        if self._cache is None:
            self._cache = ImageCache(self.client)
        return self._cache

    def folder(self, seat: ImageSeat) -> Path:
        """Where this node keeps `seat`'s run's sockets and logs."""
        out = Path(seat.out_dir)
        if out.is_dir():
            return out / NODES_DIR / self.node[:12]
        run = hashlib.sha256(seat.out_dir.encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"referee-node-{self.node[:12]}" / run

    def _ready(self, seat: ImageSeat) -> Path:
        """Before a seat's first container here: the image, the runtime, the
        folder swept of containers a dead worker left (blocking)."""
        try:
            self.cache.ensure(seat.image)
        except ImageUnavailable as e:
            raise NodeError(f"node {self.node[:12]}: {e}") from None
        except DockerUnavailable as e:
            raise NodeError(f"node {self.node[:12]}: {e}") from None
        runtime = seat.limits.runtime
        if runtime is not None and runtime not in self._runtimes:
            try:
                check_runtime(runtime, self.client, field="runtime")
            except BotError as e:
                raise NodeError(f"node {self.node[:12]}: {e}") from None
            self._runtimes.add(runtime)
        folder = self.folder(seat).resolve()
        if seat.out_dir not in self._swept:
            folder.mkdir(parents=True, exist_ok=True)
            # Containers of this run that a dead worker left on this daemon
            # (a node killed, then started again under a new id).
            with contextlib.suppress(DockerUnavailable):
                cleanup_containers(
                    {RUN_LABEL: seat.out_dir},
                    orphans_only=True,
                    client=self.client,
                    instance=Instance(seat.instance),
                )
            self._swept.add(seat.out_dir)
        return folder

    def _bot(self, seat: ImageSeat, folder: Path, key: str) -> ContainerBot:
        return ContainerBot(
            seat.image.image_id,
            out_dir=folder,
            name=seat.name,
            limits=seat.limits,
            secret=seat.secret,
            command=seat.command,
            env=seat.env or None,
            labels={**seat.labels, "referee.node": self.node[:12], RUN_LABEL: seat.out_dir},
            client=self.client,
            key=key,
            instance=Instance(seat.instance),
        )

    @contextlib.asynccontextmanager
    async def use(self, seat: ImageSeat) -> AsyncIterator[ContainerBot]:
        """`seat`'s bot on this node for one game (started at its first
        :meth:`~referee.bots.managed.ManagedBot.start`, kept afterwards
        unless fresh). Raises :class:`NodeError` when the node cannot run it."""
        folder = await asyncio.to_thread(self._ready, seat)
        if seat.fresh:
            self._fresh += 1
            bot = self._bot(seat, folder, f"{seat.name}-{seat.key[:8]}-{self._fresh}")
            try:
                yield bot
            finally:
                self.started += bot.launches
                await bot.close()
            return
        async with self._lock:
            held = self._held.get(seat.key)
            if held is None:
                # Keyed by its name, as on one machine: its log is where the
                # diagnostics look (log_files_of); the folder is this node's.
                held = self._held[seat.key] = _Held(self._bot(seat, folder, seat.name))
            held.users += 1
        before = held.bot.launches
        try:
            yield held.bot
        finally:
            self.started += held.bot.launches - before
            held.users -= 1
            if held.retired and held.users == 0:
                await self._drop(seat.key, held)

    async def handshake(self, seat: ImageSeat) -> BotInfo:
        """Start `seat`'s bot here (if it is not running) and greet it.
        BotError from the bot, :class:`NodeError` from the node."""
        async with self.use(seat) as bot:
            return await bot.handshake()

    async def retire(self, key: str) -> None:
        """Stop the container of the seat `key` here once its games end."""
        async with self._lock:
            held = self._held.get(key)
            if held is None:
                return
            held.retired = True
            if held.users:
                return
        await self._drop(key, held)

    async def _drop(self, key: str, held: _Held) -> None:
        async with self._lock:
            if self._held.get(key) is held:
                del self._held[key]
        with contextlib.suppress(Exception):
            await held.bot.close()

    def running(self) -> list[str]:
        """The names of the bots with a container here."""
        return sorted(h.bot.name for h in self._held.values() if h.bot.container_name is not None)

    async def close(self) -> None:
        """Stop every container of this node's pool."""
        async with self._lock:
            held, self._held = list(self._held.values()), {}
        await asyncio.gather(*(h.bot.close() for h in held), return_exceptions=True)
