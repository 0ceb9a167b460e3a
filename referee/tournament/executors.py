"""Where a league's games run: in this process, or on a Ray cluster.

The coordinator (:class:`~referee.tournament.runner.Tournament`) keeps the
schedule, the SQLite store and the ratings; an executor only plays one game
and hands back its :class:`~referee.match.MatchResult` and replay record.
Ratings are applied in schedule order by the coordinator, so the standings do
not depend on the executor.

- :class:`LocalExecutor` (the default): asyncio in this process.
- :class:`RayExecutor` (``pip install -e .[ray]``): async Ray actors, each
  playing many games at once over HTTP. URL bots are reached by URL; image
  bots run on the nodes (one worker actor per node, its
  :class:`~referee.bots.cluster.nodepool.NodePool` starting one container per bot
  there, every sandbox rule and the socket guard applied on that node), their
  images pinned by id and, with a `registry`, pushed there and pulled by
  digest (:mod:`referee.bots.cluster.registry`). A worker that dies (its node lost)
  has its games played again elsewhere.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import msgspec

from protocol.messages import BotInfo, Rules, Timeouts

from ..bots.base import Bot, BotError
from ..bots.cluster.nodepool import ImageSeat
from ..bots.cluster.registry import ClusterError, PinnedImage, Registry
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
    #: Image bots' seats (None for the others; empty: none): a node starts them.
    images: list[ImageSeat | None] = msgspec.field(default_factory=list)
    #: The game's position in its schedule (-1: none): how those who watch it find it.
    index: int = -1


class GameDone(msgspec.Struct, kw_only=True):
    result: MatchResult
    #: The replay record, gzip-compressed JSON lines (:func:`referee.replay.compress`);
    #: empty when the job asked for none.
    replay: bytes


class Executor(Protocol):
    name: str

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone: ...

    async def close(self) -> None: ...


class InFlight:
    """The games of one run in flight, by schedule index (issue 36: watching
    live): each :class:`~referee.match.Match` from before its first request
    to after its result. Written by the thread that plays the run, read by
    any other: a lock around the dict (taken twice a game, never per move);
    a reader follows ``match.record.lines``, a list that only grows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._games: dict[int, Match] = {}

    def add(self, index: int, match: Match) -> None:
        with self._lock:
            self._games[index] = match

    def remove(self, index: int, match: Match) -> None:
        with self._lock:
            if self._games.get(index) is match:
                del self._games[index]

    def snapshot(self) -> dict[int, Match]:
        """The games in flight now (a copy)."""
        with self._lock:
            return dict(self._games)


class LocalExecutor:
    """Games in this process, with the coordinator's own bot transports;
    with `in_flight`, each game is listed there while it plays (what the
    service's watchers follow: the Ray executor's games cannot be)."""

    name = "local"
    remote_images = False

    def __init__(self, in_flight: InFlight | None = None) -> None:
        self.in_flight = in_flight

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone:
        match = Match(
            bots, job.seed, rules=job.rules, timeouts=job.timeouts, policy=job.policy, names=job.names
        )
        watched = self.in_flight
        if watched is None or job.index < 0:
            result = await match.play()
        else:
            watched.add(job.index, match)
            try:
                result = await match.play()
            finally:
                watched.remove(job.index, match)
        if not job.replay:
            return GameDone(result=result, replay=b"")
        # Compressing a replay takes ~1 ms (up to 5): off the event loop, where
        # it would delay reading the other games' replies (and their latency).
        return GameDone(result=result, replay=await asyncio.to_thread(compress, match.record))

    async def close(self) -> None:
        return None


class ExecutorError(RuntimeError):
    """The executor cannot run (Ray missing, cluster unreachable)."""


class Reply(msgspec.Struct, kw_only=True):
    """A worker's answer: what was asked, or why not. `failure` "bot": the
    bot failed (its handshake); "node": the node cannot play (no image, no
    daemon): the cluster's fault, never the bot's."""

    done: GameDone | None = None
    info: BotInfo | None = None
    failure: Literal["bot", "node"] | None = None
    error: str = ""


_ENCODER = msgspec.msgpack.Encoder()
_JOB = msgspec.msgpack.Decoder(GameJob)
_SEAT = msgspec.msgpack.Decoder(ImageSeat)
_REPLY = msgspec.msgpack.Decoder(Reply)


class GameWorker:
    """A Ray actor body: plays games over HTTP with its own client session,
    and the node's image bots in its :class:`~referee.bots.cluster.nodepool.NodePool`."""

    def __init__(self) -> None:
        self._session: Any = None
        self._pool: Any = None

    def pid(self) -> int:
        return os.getpid()

    def _nodes(self) -> Any:
        from ..bots.cluster.nodepool import NodePool

        if self._pool is None:
            import ray

            self._pool = NodePool(ray.get_runtime_context().get_node_id())
        return self._pool

    async def play_job(self, job: GameJob) -> Reply:
        """:meth:`play` without the wire: what a worker in this process answers."""
        return _REPLY.decode(await self.play(_ENCODER.encode(job)))

    async def play(self, job_bytes: bytes) -> bytes:
        from ..bots.cluster.nodepool import NodeError
        from ..bots.http import HttpBot, make_session

        if self._session is None:
            self._session = make_session(connections_per_bot=64)
        job = _JOB.decode(job_bytes)
        addresses = job.addresses or [None] * len(job.urls)
        seats = job.images or [None] * len(job.urls)
        bots: list[Bot] = []
        own: list[Bot] = []
        try:
            async with contextlib.AsyncExitStack() as stack:
                for name, url, secret, address, seat in zip(
                    job.names, job.urls, job.secrets, addresses, seats
                ):
                    if seat is not None:
                        bots.append(await stack.enter_async_context(self._nodes().use(seat)))
                        continue
                    # unix-socket and pinned bots own their sessions (see HttpBot), closed after the game
                    mine = url.startswith("unix:") or address is not None
                    bot = HttpBot(
                        url,
                        name=name,
                        secret=secret,
                        session=None if mine else self._session,
                        address=address,
                    )
                    bots.append(bot)
                    if mine:
                        own.append(bot)
                try:
                    done = await LocalExecutor().play(job, bots)
                finally:
                    for b in own:
                        await b.close()
        except NodeError as e:
            return _ENCODER.encode(Reply(failure="node", error=str(e)))
        return _ENCODER.encode(Reply(done=done))

    async def handshake(self, seat_bytes: bytes) -> bytes:
        """Start an image bot on this node and greet it."""
        from ..bots.cluster.nodepool import NodeError

        try:
            info = await self._nodes().handshake(_SEAT.decode(seat_bytes))
        except NodeError as e:
            return _ENCODER.encode(Reply(failure="node", error=str(e)))
        except BotError as e:
            return _ENCODER.encode(Reply(failure="bot", error=str(e)))
        return _ENCODER.encode(Reply(info=info))

    async def retire(self, key: str) -> None:
        if self._pool is not None:
            await self._pool.retire(key)

    async def running(self) -> list[str]:
        """The bots with a container on this node."""
        return self._pool.running() if self._pool is not None else []

    async def shutdown(self) -> None:
        """Stop this node's containers (before the actor is killed)."""
        if self._pool is not None:
            await self._pool.close()
        if self._session is not None:
            await self._session.close()
            self._session = None


#: Ray's switch for clusters of one machine. Ray names it for Windows and macOS, but it holds on
#: Linux too: with it off, a node asked for 127.0.0.1 keeps that address, and then its GCS, raylet,
#: workers and agents listen on loopback only. Without it Ray swaps 127.0.0.1 for the machine's
#: first address, and its gRPC servers listen on every interface (0.0.0.0 and ::).
RAY_ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: What the cluster's processes authenticate with (Ray 2.52 on): ``token``, and the file holding it.
RAY_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", RAY_ONE_MACHINE)
#: Set once the service has warned of a cluster reachable beyond loopback: the practice
#: games' own processes, which join the same cluster, inherit it and do not warn again.
EXPOSURE_WARNED = "REFEREE_RAY_EXPOSURE_WARNED"
SCALE_OUT_DOC = "docs/scale-out.md#who-can-reach-the-cluster"


def _host(address: str) -> str:
    """The host of ``HOST:PORT``, ``[V6]:PORT`` or ``ray://HOST:PORT``."""
    address = address.split("://", 1)[-1]
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: nothing says where it points (no look-up here)


def exposed_ports(gcs_address: str, nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The cluster's ports on an address that is not loopback (``HOST:PORT``,
    or ``HOST:PORT (what)``): the GCS's, and each live node's raylet,
    object manager and metrics ports (as ``ray.nodes()`` gives them). A
    worker's ports are on its node's address too."""
    found: list[str] = []
    if not _loopback(_host(gcs_address)):
        found.append(f"{gcs_address} (GCS)")
    for node in nodes:
        host = str(node.get("NodeManagerAddress") or "")
        if not node.get("Alive") or not host or _loopback(host):
            continue
        for key, what in (
            ("NodeManagerPort", "raylet"),
            ("ObjectManagerPort", "object manager"),
            ("MetricsExportPort", "metrics"),
        ):
            port = node.get(key)
            if isinstance(port, int) and port > 0:
                found.append(f"{host}:{port} ({what})")
    return found


def exposure_warning(address: str, exposed: Sequence[str], token: bool) -> str:
    """What the service says at start when the cluster it joins listens beyond loopback."""
    shown = ", ".join(exposed[:6]) + (f" and {len(exposed) - 6} more" if len(exposed) > 6 else "")
    auth = (
        "this service sends its Ray token (RAY_AUTH_MODE=token): every node must require it too"
        if token
        else "this service sends no Ray token (RAY_AUTH_MODE is not 'token'): only the network guards it"
    )
    return (
        f"the Ray cluster at {address} listens beyond loopback ({shown}): whoever reaches these "
        f"ports can run any code as the cluster's user, so they must be reachable only on a "
        f"private network or behind a firewall that lets in the cluster's machines alone, with "
        f"Ray's token authentication on. Here {auth}. See {SCALE_OUT_DOC}."
    )


def ray_has_token_auth() -> bool:
    """Whether this Ray authenticates every call with a token (2.52 on)."""
    raylet = _raylet()
    return hasattr(raylet, "AuthenticationTokenLoader") and hasattr(raylet, "Config")


def _raylet() -> Any:
    import ray._raylet

    return ray._raylet


class _PrivateCluster:
    """What a cluster of this process's own needs to stay its own: a folder
    only its user reads (Ray's sockets, logs and session files), a fresh
    random token there (0600) that every call to the cluster must carry, and
    Ray kept on loopback. The environment it changes (inherited by the
    cluster's processes and by a practice game's process, which joins it) is
    put back by :meth:`close`."""

    def __init__(self, ray: Any) -> None:
        self.folder = tempfile.mkdtemp(prefix="referee-ray-")  # 0700
        #: Ray's own files, under the 0700 folder: Ray makes its temp folder 0777 itself.
        self.ray_folder = os.path.join(self.folder, "r")
        self.token_path = os.path.join(self.folder, "auth_token")
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        self._saved = {k: os.environ.get(k) for k in RAY_AUTH_VARIABLES}
        self._constants: Any = None
        self._one_machine = True
        os.environ.pop("RAY_AUTH_TOKEN", None)  # it would come before the file
        os.environ[RAY_ONE_MACHINE] = "0"
        #: Whether this Ray authenticates with a token; an older one is guarded by loopback alone.
        self.token = ray_has_token_auth()
        if self.token:
            os.environ["RAY_AUTH_MODE"] = "token"
            os.environ["RAY_AUTH_TOKEN_PATH"] = self.token_path
            # Ray reads both once per process: again, for a process that used Ray before.
            _raylet().Config.initialize("")
            _raylet().AuthenticationTokenLoader.instance().reset_cache()
        from ray._private import ray_constants

        # Read when Ray was imported (maybe before this): set for this process too.
        self._constants = ray_constants
        self._one_machine = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False
        atexit.register(self.close, ray)

    def close(self, ray: Any = None) -> None:
        if ray is not None:
            with contextlib.suppress(Exception):
                ray.shutdown()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._constants is not None:
            self._constants.ENABLE_RAY_CLUSTER = self._one_machine
            self._constants = None
        shutil.rmtree(self.folder, ignore_errors=True)
        atexit.unregister(self.close)


#: How long the head's address may take to accept a connection before joining gives up.
HEAD_CONNECT_S = 5.0


def _answers(address: str) -> None:
    """Raise :class:`ExecutorError` unless something accepts a connection at
    `address` (``HOST:PORT``, the head's GCS): ``ray.init`` retries a silent
    address for minutes, in a thread no one can stop, where the operator
    wants the mistake said at once. Other forms (``auto``, ``ray://``) are
    left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    host = host.strip("[]") or "127.0.0.1"
    try:
        socket.create_connection((host, int(port)), timeout=HEAD_CONNECT_S).close()
    except OSError as e:
        raise ExecutorError(
            f"nothing answers at the Ray cluster's address {address} ({e.strerror or e}): start its head "
            f"(`ray start --head --port {port}`) or give the address it prints (--address)"
        ) from None


class RayExecutor:
    """Games on Ray workers: `workers` async actors, each running up to
    `per_worker` games at once. `address`: an existing cluster (``auto`` or
    ``ray://host:10001``), with a warning when it listens beyond loopback;
    None starts a local one of this process's own, on loopback only, that
    only a caller with its token (a file in its own folder) may use.

    Games with image bots go to the node workers instead: one actor per live
    node (pinned there), whose pool starts each bot's container on that
    node's Docker daemon; a game goes to the node with the fewest games in
    flight. `registry` (``HOST:PORT``): where the coordinator pushes each
    image bot's image, which nodes pull by digest (without one, every node
    must have the images on its daemon: a cluster on one machine sharing
    its daemon). Nodes that join later get games from their first refresh
    (every `refresh_s`); a node whose worker dies is not used again.
    `node_body`: the class of the node actors (the service's builds and
    admission checks use their own, :class:`referee.service.check_site.CheckWorker`,
    through :meth:`call_node`)."""

    name = "ray"
    #: Image bots run on the nodes (:class:`~referee.bots.cluster.nodepool.NodeBot`), not here.
    remote_images = True

    def __init__(
        self,
        address: str | None = None,
        workers: int = 2,
        per_worker: int = 16,
        retries: int = 3,
        registry: str | None = None,
        refresh_s: float = 5.0,
        node_body: type = GameWorker,
    ) -> None:
        try:
            import ray as _ray
        except ImportError:
            raise ExecutorError("the ray executor needs Ray: pip install -e '.[ray]'") from None
        ray: Any = _ray
        self.ray = ray
        self.address = address
        self.retries = retries
        self.per_worker = per_worker
        try:
            self.registry = Registry(registry) if registry is not None else None
        except ValueError as e:
            raise ExecutorError(str(e)) from None
        self._private: _PrivateCluster | None = None
        if not ray.is_initialized():
            try:
                if address is None:
                    # A local cluster of its own ("local": never a cluster
                    # another program left running), on loopback, with a token.
                    self._private = _PrivateCluster(ray)
                    ray.init(
                        address="local",
                        num_cpus=max(2, os.cpu_count() or 2),
                        include_dashboard=False,
                        logging_level=logging.WARNING,
                        log_to_driver=False,
                        _node_ip_address="127.0.0.1",
                        _temp_dir=self._private.ray_folder,
                    )
                else:
                    _answers(address)
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            except ExecutorError:
                raise
            except Exception as e:  # Ray raises many kinds here
                if self._private is not None:
                    self._private.close()
                raise ExecutorError(
                    f"cannot start or reach the Ray cluster ({address or 'local'}): {e}"
                ) from None
            self._owns_ray = True
            if address is not None:
                self._warn_if_exposed(address)
        else:
            self._owns_ray = False
        self._actor_class = ray.remote(num_cpus=0.5, max_concurrency=per_worker)(GameWorker)
        self.workers: list[Any] = [self._new_worker() for _ in range(workers)]
        self._next = 0
        #: Games played again after a worker died.
        self.retried = 0
        #: The node workers: {Ray node id: actor}, and the games in flight on each.
        self.nodes: dict[str, Any] = {}
        self._inflight: dict[str, int] = {}
        #: Nodes whose worker died: never used again (a node that comes back has a new id).
        self.lost: set[str] = set()
        self._refresh_s = refresh_s
        self._refreshed = -1e9
        self._node_class = ray.remote(num_cpus=0, max_concurrency=max(64, per_worker * 4))(node_body)
        #: Games played per node (by node id).
        self.played: dict[str, int] = {}
        #: Called with (node id, its worker) when a node's worker is made (a node joined).
        self.on_join: Callable[[str, Any], None] | None = None

    def _new_worker(self) -> Any:
        return self._actor_class.remote()

    def _warn_if_exposed(self, address: str) -> None:
        """Warn (once for the service and its practice processes) when the
        cluster joined listens on an address beyond loopback."""
        if os.environ.get(EXPOSURE_WARNED):
            return
        try:
            gcs = str(self.ray.get_runtime_context().gcs_address)
            nodes = self.ray.nodes()
        except Exception as e:  # a Ray client connection (ray://) has no GCS address
            gcs, nodes = address, []
            log.debug("cannot list the Ray cluster's addresses: %s", e)
        exposed = exposed_ports(gcs, nodes)
        if not exposed:
            return
        os.environ[EXPOSURE_WARNED] = "1"
        token = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        message = exposure_warning(address, exposed, token)
        # On the service's log; on stderr when there is none yet (Python's last resort).
        log.warning("%s", message)

    # ----------------------------------------------------------- node workers

    def _alive_nodes(self) -> list[str]:
        return [
            n["NodeID"]
            for n in self.ray.nodes()
            if n.get("Alive") and (n.get("Resources") or {}).get("CPU", 0) > 0
        ]

    async def _refresh(self, force: bool = False) -> None:
        """A worker on every live node not yet used (nodes that joined the cluster)."""
        now = time.monotonic()
        if not force and now - self._refreshed < self._refresh_s:
            return
        self._refreshed = now
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = await asyncio.to_thread(self._alive_nodes)
        for node in alive:
            if node in self.nodes or node in self.lost:
                continue
            self.nodes[node] = self._node_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
            ).remote()
            self._inflight.setdefault(node, 0)
            if self.on_join is not None:
                self.on_join(node, self.nodes[node])
        for node in list(self.nodes):
            if node not in alive:
                self._lose(node)

    async def refresh(self) -> None:
        """A worker on every live node now (not at the next job)."""
        await self._refresh(force=True)

    def _lose(self, node: str) -> None:
        self.lost.add(node)
        worker = self.nodes.pop(node, None)
        if worker is not None:
            with contextlib.suppress(Exception):
                self.ray.kill(worker)

    @property
    def home(self) -> str | None:
        """The Ray node this process (the coordinator) runs on; None when it is
        not one (a Ray client connection)."""
        try:
            return str(self.ray.get_runtime_context().get_node_id())
        except Exception:  # noqa: BLE001 - ray:// has no node of its own
            return None

    async def _pick(self, prefer: str | None = None, lean: str | None = None) -> tuple[str, Any]:
        await self._refresh()
        if prefer is not None and prefer in self.nodes:
            return prefer, self.nodes[prefer]
        if not self.nodes:
            await self._refresh(force=True)
        if not self.nodes:
            raise ExecutorError(
                "no live Ray node to play image bots on"
                + (f" (lost: {', '.join(n[:12] for n in sorted(self.lost))})" if self.lost else "")
                + ": start one (ray start --address HEAD:6379 with DOCKER_HOST of its daemon)"
            )
        node = min(self.nodes, key=lambda n: (self._inflight.get(n, 0), self.played.get(n, 0)))
        if lean is not None and lean in self.nodes:
            if self._inflight.get(lean, 0) <= self._inflight.get(node, 0) + 1:
                node = lean
        return node, self.nodes[node]

    async def _on_node(self, method: str, payload: bytes | str) -> tuple[Reply, str]:
        """Call `method` on a node worker, another one if that one dies."""
        out, node = await self.call_node(method, payload)
        return _REPLY.decode(out), node

    async def pick(self, lean: str | None = None) -> str:
        """The node :meth:`call_node` would call now (call it there with ``prefer``):
        the one with the fewest calls in flight, or `lean` while it has at most one
        call more than that one (the node where the call's bytes are cheap to send)."""
        return (await self._pick(None, lean))[0]

    async def call_node(self, method: str, *args: Any, prefer: str | None = None) -> tuple[Any, str]:
        """`method` of a node worker called with `args` on the node `prefer`
        while it lives (the node that has what the call needs), else on the one
        with the fewest calls in flight (then the fewest games played); on
        another node when that one dies (its node lost), up to `retries`
        times: what it returned, and the node."""
        last: Exception | None = None
        for _ in range(self.retries + 1):
            node, worker = await self._pick(prefer)
            self._inflight[node] = self._inflight.get(node, 0) + 1
            try:
                out = await getattr(worker, method).remote(*args)
            except self.ray.exceptions.RayActorError as e:
                # The worker died (its node lost, killed, out of memory): the
                # game is played again from its seed on another node.
                last = e
                self.retried += 1
                log.warning("the Ray worker of node %s died; its %s goes to another node", node[:12], method)
                self._lose(node)
                continue
            finally:
                self._inflight[node] = self._inflight.get(node, 1) - 1
            return out, node
        raise ExecutorError(f"a {method} failed on {self.retries + 1} Ray nodes in a row: {last}")

    @staticmethod
    def _checked(reply: Reply) -> Reply:
        if reply.failure == "node":
            raise ExecutorError(reply.error)
        if reply.failure == "bot":
            raise BotError(reply.error)
        return reply

    # ------------------------------------------------- RemoteImages (image bots)

    async def pin(self, image: str) -> PinnedImage:
        """`image` on the coordinator's daemon by id, pushed to the registry
        (by digest) when there is one. ExecutorError when the registry fails."""
        from ..bots.sandbox.docker_daemon import docker_client, image_exists, not_found

        def run() -> PinnedImage:
            client = docker_client()
            if self.registry is not None:
                return self.registry.push(client, image)
            if not image_exists(image, client):
                raise BotError(not_found(image))
            return PinnedImage(image_id=str(client.images.get(image).id))

        try:
            return await asyncio.to_thread(run)
        except ClusterError as e:
            raise ExecutorError(str(e)) from None

    async def handshake(self, seat: ImageSeat) -> BotInfo:
        reply = self._checked((await self._on_node("handshake", _ENCODER.encode(seat)))[0])
        assert reply.info is not None
        return reply.info

    async def retire(self, seat: ImageSeat) -> None:
        key = seat.key
        await asyncio.gather(*(w.retire.remote(key) for w in self.nodes.values()), return_exceptions=True)

    async def running(self) -> dict[str, list[str]]:
        """{node id: the bots with a container there}."""
        nodes = list(self.nodes.items())
        found = await asyncio.gather(*(w.running.remote() for _, w in nodes), return_exceptions=True)
        return {n: list(r) for (n, _), r in zip(nodes, found) if not isinstance(r, BaseException)}

    # ------------------------------------------------------------------ games

    async def play(self, job: GameJob, bots: Sequence[Bot]) -> GameDone:
        payload = _ENCODER.encode(job)
        if any(s is not None for s in job.images):
            reply, node = await self._on_node("play", payload)
            self._checked(reply)
            assert reply.done is not None
            self.played[node] = self.played.get(node, 0) + 1
            return reply.done
        last: Exception | None = None
        for _ in range(self.retries + 1):
            k = self._next % len(self.workers)
            self._next += 1
            worker = self.workers[k]
            try:
                out = await worker.play.remote(payload)
                reply = self._checked(_REPLY.decode(out))
                assert reply.done is not None
                return reply.done
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
        nodes = list(self.nodes.values())

        # Each node stops its containers before its worker goes.
        async def stop(worker: Any) -> None:
            await worker.shutdown.remote()

        await asyncio.gather(*(asyncio.wait_for(stop(w), 60) for w in nodes), return_exceptions=True)
        for w in [*self.workers, *nodes]:
            try:
                self.ray.kill(w)
            except Exception:
                pass
        self.workers = []
        self.nodes = {}
        if self._owns_ray:
            await asyncio.to_thread(self.ray.shutdown)
        if self._private is not None:
            self._private.close()
            self._private = None
