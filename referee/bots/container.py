"""A bot submitted as a container image, run sandboxed: ``image = "my-bot:1"``.

:class:`ContainerBot` creates a container from the image through the Docker
Engine API (the ``docker`` package; ``pip install referee[containers]``) with
the :class:`ContainerLimits` of its league: memory (swap included), CPUs,
PIDs, a read-only root with a small ``/tmp`` tmpfs, every capability
dropped, ``no-new-privileges``, an init process (so it stops at once) and
**no network at all** (``--network none``).

The referee talks to the bot over a unix socket in a host folder mounted
into the container: ``OUT/sockets/<bot>/`` on the host is ``/run/bot`` in the
container, and the bot must serve HTTP on ``/run/bot/bot.sock``. The
container gets ``BOT_UNIX=/run/bot/bot.sock`` in its environment (the SDK in
``sample_bots/sdk.py`` listens there by itself) and, when a `command` is
given, ``{unix}`` in it is replaced by that path. A league secret arrives as
``BOT_SECRET``. The container runs as the referee's own uid:gid unless the
limits name a ``user``, so the socket it creates is the referee's to use.

Readiness is ``GET /`` over the socket; the container's output is streamed
to ``OUT/logs/<bot>.container.log`` (capped); the container is removed by
:meth:`ContainerBot.stop` (``remove(force=True)``: SIGKILL to the init, so
every process of the bot dies). A container that exits or is OOM-killed
mid-game only costs its bot connection faults (data, never an exception);
it is started again before its next game.

Every container carries the labels ``referee.managed=1``, ``referee.bot``,
``referee.out`` (the tournament's output folder), ``referee.pid`` and
``referee.host`` (the referee process that started it), so containers left
by a referee that crashed are found and removed by
:func:`cleanup_containers` (``referee cleanup``), and by the next run of the
same tournament.

The Docker calls block: each runs in a worker thread (``asyncio.to_thread``),
the event loop never waits on the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from protocol.messages import BotInfo, Fault

from .base import BotError
from .http import DEFAULT_MAX_BODY, HttpBot
from .managed import ManagedBot
from .process import pid_alive, tail_of

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any
Container = Any

__all__ = [
    "CONTAINER_SOCKET",
    "MANAGED_LABEL",
    "ContainerBot",
    "ContainerLimits",
    "DockerUnavailable",
    "check_limits",
    "cleanup_containers",
    "docker_client",
    "find_containers",
    "image_exists",
    "not_found",
    "parse_size",
]

#: Where the bot must listen, inside the container (also in ``$BOT_UNIX``).
CONTAINER_SOCKET: Final = "/run/bot/bot.sock"
CONTAINER_SOCKET_DIR: Final = "/run/bot"
#: The label every container the referee starts carries.
MANAGED_LABEL: Final = "referee.managed"

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
#: Longest unix socket path (sun_path is 108 bytes on Linux, NUL included).
_MAX_SOCKET_PATH: Final = 100


class ContainerLimits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How a container bot is confined (the league's ``[containers]`` table,
    a bot's ``limits``). Sizes are Docker's: ``"128m"``, ``"1g"``, ``"512k"``."""

    #: Memory, swap included (memory and memory-swap are both set to it): a bot
    #: that allocates more is killed by the kernel (exit 137).
    memory: str = "128m"
    #: CPUs (``--cpus``): 1.0 is one core's worth of time.
    cpus: float = 1.0
    #: Most processes and threads at once (``--pids-limit``): fork bombs stop here.
    pids: int = 64
    #: Size of the writable ``/tmp`` (a tmpfs; it counts against the memory too).
    tmpfs: str = "16m"
    #: Read-only root filesystem (only ``/tmp`` and the socket folder are writable).
    read_only: bool = True
    #: ``"none"``: no network interface but loopback; the bot is reached over
    #: its unix socket. The only value: see :func:`check_limits` for why an
    #: ``internal`` TCP network is refused.
    network: str = "none"
    #: How long the container may take to answer ``GET /`` on its socket.
    ready_timeout_s: float = 15.0
    #: ``uid:gid`` the bot runs as; default the referee's own, so the socket
    #: the bot creates is usable by the referee.
    user: str | None = None
    #: Cap of ``OUT/logs/<bot>.container.log`` (and of Docker's own log).
    log_limit: str = "10m"


def parse_size(text: str) -> int:
    """``"128m"`` -> 134217728 bytes; ValueError when it is not a size."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"expected a size like \"128m\", \"1g\" or \"512k\", got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def check_limits(limits: ContainerLimits) -> list[tuple[str, str]]:
    """What is wrong with `limits`: [(field, message)], empty when usable."""
    problems: list[tuple[str, str]] = []
    for key, minimum in (("memory", 6 * 1024**2), ("tmpfs", 4096), ("log_limit", 1024)):
        value = getattr(limits, key)
        try:
            size = parse_size(value)
        except ValueError as e:
            problems.append((key, str(e)))
            continue
        if size < minimum:
            problems.append((key, f"must be at least {minimum} bytes, got {value!r}"))
    if not limits.cpus > 0:
        problems.append(("cpus", f"must be more than 0, got {limits.cpus}"))
    if limits.pids < 4:
        problems.append(("pids", f"must be at least 4 (the init, the bot and its threads), got {limits.pids}"))
    if limits.ready_timeout_s <= 0:
        problems.append(("ready_timeout_s", f"must be a positive number of seconds, got {limits.ready_timeout_s}"))
    if limits.network != "none":
        problems.append((
            "network",
            f"only \"none\" is supported, got {limits.network!r}: Docker publishes no port of an "
            "internal network (so no 127.0.0.1-only TCP port), and reaching a container at its "
            "bridge address would let it reach the host as well; container bots talk over a "
            "unix socket",
        ))
    if limits.user is not None and not re.match(r"^\d+(:\d+)?$", limits.user):
        problems.append(("user", f"expected a numeric uid or uid:gid, got {limits.user!r}"))
    return problems


# ------------------------------------------------------------ the daemon


def _docker_module() -> Any:
    """The docker package (imported on first use: only container bots need it).

    Raises ImportError when it is not installed."""
    import importlib

    module = importlib.import_module("docker")
    if not hasattr(module, "from_env"):  # a folder named docker/ on sys.path, not the package
        raise ImportError("the docker package is not installed")
    importlib.import_module("docker.types")
    return module


class DockerUnavailable(BotError):
    """No Docker daemon answers (or the ``docker`` package is missing)."""


#: One checked client per DOCKER_HOST value.
_CLIENTS: dict[str, Any] = {}
_CLIENT_LOCK = threading.Lock()


def docker_client() -> DockerClient:
    """The process's Docker client for the daemon ``DOCKER_HOST`` names (or
    the local socket), made by ``docker.from_env()`` and checked with a ping
    once per address; blocking. Raises :class:`DockerUnavailable` saying what
    to do."""
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    with _CLIENT_LOCK:
        cached = _CLIENTS.get(where)
        if cached is not None:
            return cached
        try:
            docker_mod = _docker_module()
        except ImportError:
            raise DockerUnavailable(
                "the docker package is not installed: pip install 'referee[containers]'"
            ) from None
        try:
            client = docker_mod.from_env(timeout=30)
            client.ping()
        except Exception as e:  # noqa: BLE001 - every failure means "no daemon"
            raise DockerUnavailable(
                f"no Docker daemon answers at {where} ({_short(e)}): start it (dockerd, or "
                "systemctl start docker) or point DOCKER_HOST at it"
            ) from None
        _CLIENTS[where] = client
        return client


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else type(error).__name__
    return first[:300]


def image_exists(image: str, client: DockerClient | None = None) -> bool:
    """Whether `image` is on this machine (never pulled); blocking."""
    docker_mod = _docker_module()

    client = client or docker_client()
    try:
        client.images.get(image)
    except docker_mod.errors.ImageNotFound:
        return False
    return True


def not_found(image: str) -> str:
    return (
        f"image {image!r} is not on this machine (the referee never pulls): build it "
        f"(docker build -t {image} .) or load it (docker load -i bot.tar) first; "
        "`docker images` lists what is there"
    )


def _referee_alive(labels: Mapping[str, str]) -> bool:
    """Whether the referee process that started a container still runs here."""
    if labels.get("referee.host") != socket.gethostname():
        return False
    try:
        pid = int(labels.get("referee.pid", ""))
    except ValueError:
        return False
    return pid_alive(pid)


def _label_filters(label_filter: Mapping[str, str] | Sequence[str] | str | None) -> list[str]:
    labels = [f"{MANAGED_LABEL}=1"]
    if isinstance(label_filter, str):
        labels.append(label_filter)
    elif isinstance(label_filter, Mapping):
        labels += [f"{k}={v}" for k, v in label_filter.items()]
    elif label_filter is not None:
        labels += list(label_filter)
    return labels


def find_containers(label_filter: Mapping[str, str] | Sequence[str] | str | None = None, *,
                    client: DockerClient | None = None) -> list[Container]:
    """Containers the referee started (running or not) that match `label_filter`
    (``{"referee.out": "/path"}``, ``"referee.bot=greedy"`` or a list); blocking."""
    client = client or docker_client()
    return list(client.containers.list(all=True, filters={"label": _label_filters(label_filter)}))


def cleanup_containers(label_filter: Mapping[str, str] | Sequence[str] | str | None = None, *,
                       orphans_only: bool = False,
                       client: DockerClient | None = None) -> list[str]:
    """Remove the referee's containers matching `label_filter` (every one
    labelled ``referee.managed=1`` when None); their names. `orphans_only`:
    spare those whose referee process still runs on this host. Blocking."""
    docker_mod = _docker_module()

    removed: list[str] = []
    for c in find_containers(label_filter, client=client):
        labels = c.labels or {}
        if orphans_only and _referee_alive(labels):
            continue
        with contextlib.suppress(docker_mod.errors.NotFound):
            c.remove(force=True, v=True)
            removed.append(str(c.name))
    return removed


# ------------------------------------------------------------- the bot


class _LogPump(threading.Thread):
    """Copies a container's output into a file, up to a cap (blocking stream)."""

    def __init__(self, container: Container, path: Path, cap: int) -> None:
        super().__init__(name=f"logs-{container.name}", daemon=True)
        self.container = container
        self.path = path
        self.cap = cap

    def run(self) -> None:
        written = 0
        try:
            with self.path.open("ab") as f:
                try:
                    for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                        if written >= self.cap:
                            continue
                        if written + len(chunk) > self.cap:
                            chunk = chunk[: self.cap - written] + b"\n--- log cap reached: the rest is dropped\n"
                        written += len(chunk)
                        f.write(chunk)
                        f.flush()
                except Exception as e:  # noqa: BLE001 - the container went away
                    f.write(f"--- log stream ended: {_short(e)}\n".encode())
        except OSError:
            pass


class ContainerBot(ManagedBot):
    """A bot run from the container image `image`.

    `out_dir` is the tournament's output folder: the socket folder is
    ``out_dir/sockets/<label>/`` (a short folder under the temp dir when that
    path is too long for a unix socket) and the log
    ``out_dir/logs/<label>.container.log``, `label` being `name` made safe
    for a file name. `limits` confine it (:class:`ContainerLimits`); `command`
    overrides the image's CMD (``{unix}`` is replaced by the socket path);
    `env` adds environment variables; `labels` add Docker labels (on top of
    the ``referee.*`` ones). `secret` signs requests and is given to the
    container as ``BOT_SECRET``. Use ``async with ContainerBot(...) as bot``
    or :meth:`launch` and :meth:`stop`.
    """

    def __init__(
        self,
        image: str,
        *,
        out_dir: str | os.PathLike[str],
        name: str | None = None,
        limits: ContainerLimits | None = None,
        secret: str | bytes | None = None,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        client: DockerClient | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.image = image
        self.out_dir = Path(out_dir).resolve()
        self.limits = limits or ContainerLimits()
        problems = check_limits(self.limits)
        if problems:
            raise ValueError("; ".join(f"{k}: {m}" for k, m in problems))
        self.secret = secret
        self.command = list(command) if command is not None else None
        self.env = dict(env or {})
        self.extra_labels = dict(labels or {})
        self.max_body = max_body
        self._client = client
        super().__init__(name)
        self._label = _UNSAFE.sub("_", name or image).strip("_.")[:60] or "bot"
        #: How many containers were started.
        self.launches = 0
        #: Seconds from creating the last container to its first answer to ``GET /``.
        self.ready_seconds: float | None = None
        self._container: Container | None = None
        self._pump: _LogPump | None = None
        self._exited: str | None = None
        self._socket_dir: Path | None = None
        self._tmp_socket_dir = False

    # ---------------------------------------------------------------- basics

    def _fallback_name(self) -> str:
        return self.image

    @property
    def log_path(self) -> Path:
        return self.out_dir / "logs" / f"{self._label}.container.log"

    @property
    def socket_path(self) -> Path | None:
        """The bot's socket on the host (while a container runs)."""
        return self._socket_dir / "bot.sock" if self._socket_dir is not None else None

    @property
    def url(self) -> str | None:
        """``unix:/path/bot.sock`` while a container runs (for remote workers on this host)."""
        return f"unix:{self.socket_path}" if self._container is not None else None

    @property
    def container_name(self) -> str | None:
        return str(self._container.name) if self._container is not None else None

    def __repr__(self) -> str:
        return f"ContainerBot({self.image!r}, name={self._name!r}, container={self.container_name})"

    def _docker(self) -> DockerClient:
        if self._client is None:
            self._client = docker_client()
        return self._client

    # ------------------------------------------------------------- container

    async def _alive(self) -> bool:
        if self._exited is not None:
            return False
        state = await asyncio.to_thread(self._state)
        return state is None

    def _state(self) -> str | None:
        """None while the container runs, else why it stopped (blocking)."""
        docker_mod = _docker_module()

        c = self._container
        if c is None:
            return "no container"
        try:
            c.reload()
        except docker_mod.errors.NotFound:
            self._exited = "the container was removed"
            return self._exited
        except Exception as e:  # noqa: BLE001 - the daemon went away
            return f"the Docker daemon did not answer ({_short(e)})"
        st = c.attrs.get("State") or {}
        if st.get("Running"):
            return None
        code = st.get("ExitCode")
        if st.get("OOMKilled"):
            why = (f"the container was killed for using more than its memory limit of "
                   f"{self.limits.memory} (exit code {code})")
        else:
            why = f"the container exited with code {code}"
            if st.get("Error"):
                why += f" ({st['Error']})"
        self._exited = why
        return why

    def _state_after_fault(self) -> str | None:
        """:meth:`_state` after a connection fault: a bot process that just died
        (OOM-killed) leaves the container running for a few milliseconds more,
        so wait up to a second for it to stop (blocking)."""
        why = self._state()
        c = self._container
        if why is not None or c is None:
            return why
        try:
            c.wait(timeout=1.0)
        except Exception:  # noqa: BLE001 - still running after a second: not dead
            return None
        return self._state()

    def _socket_folder(self) -> Path:
        folder = self.out_dir / "sockets" / self._label
        if len(str(folder / "bot.sock")) > _MAX_SOCKET_PATH:
            self._tmp_socket_dir = True
            return Path(tempfile.mkdtemp(prefix="referee-sock-"))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _create(self) -> Container:
        """Create and start the container (blocking)."""
        docker_mod = _docker_module()

        client = self._docker()
        lim = self.limits
        assert self._socket_dir is not None
        user = lim.user or f"{os.getuid()}:{os.getgid()}"
        uid = int(user.split(":")[0])
        os.chmod(self._socket_dir, 0o700 if uid == os.getuid() else 0o777)
        env = {"BOT_UNIX": CONTAINER_SOCKET, "HOME": "/tmp", **self.env}
        if self.secret is not None:
            env["BOT_SECRET"] = self.secret.decode() if isinstance(self.secret, bytes) else self.secret
        command = [part.replace("{unix}", CONTAINER_SOCKET) for part in self.command] \
            if self.command is not None else None
        labels = {
            MANAGED_LABEL: "1",
            "referee.bot": self.name,
            "referee.out": str(self.out_dir),
            "referee.pid": str(os.getpid()),
            "referee.host": socket.gethostname(),
            **self.extra_labels,
        }
        memory = parse_size(lim.memory)
        try:
            container = client.containers.create(
                self.image,
                command=command,
                name=f"referee-{self._label[:40]}-{secrets.token_hex(4)}",
                detach=True,
                environment=env,
                labels=labels,
                user=user,
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(lim.cpus * 1e9),
                pids_limit=lim.pids,
                read_only=lim.read_only,
                tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={parse_size(lim.tmpfs)},mode=1777"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
                network_mode="none",
                ipc_mode="private",
                volumes={str(self._socket_dir): {"bind": CONTAINER_SOCKET_DIR, "mode": "rw"}},
                log_config=docker_mod.types.LogConfig(type="json-file",
                                     config={"max-size": str(parse_size(lim.log_limit)), "max-file": "1"}),
            )
        except docker_mod.errors.ImageNotFound:
            raise BotError(not_found(self.image)) from None
        except docker_mod.errors.APIError as e:
            if e.status_code == 404 and "image" in str(e.explanation or "").lower():
                raise BotError(not_found(self.image)) from None
            raise BotError(f"Docker could not create a container from {self.image!r}: "
                           f"{e.explanation or e}") from None
        except docker_mod.errors.DockerException as e:
            raise DockerUnavailable(f"the Docker daemon failed: {_short(e)}") from None
        try:
            container.start()
        except docker_mod.errors.DockerException as e:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise BotError(f"Docker could not start a container from {self.image!r}: "
                           f"{getattr(e, 'explanation', None) or _short(e)}") from None
        return container

    async def _launch(self) -> BotInfo:
        await self._stop(final=False)
        if self._socket_dir is None:
            self._socket_dir = self._socket_folder()
        with contextlib.suppress(FileNotFoundError):
            (self._socket_dir / "bot.sock").unlink()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"--- {stamp} start of a container from {self.image!r}\n".encode())
        t0 = time.perf_counter()
        self._exited = None
        await asyncio.to_thread(self._docker)  # DockerUnavailable before anything else
        self._container = await asyncio.to_thread(self._create)
        self.launches += 1
        self._pump = _LogPump(self._container, self.log_path, parse_size(self.limits.log_limit))
        self._pump.start()
        if self._http is None:
            # One HTTP client for the bot's life: the socket path stays the same
            # when a container is started again.
            self._http = HttpBot(f"unix:{self.socket_path}", name=self._name, secret=self.secret,
                                 max_body=self.max_body)
        try:
            self.info = await self._wait_ready()
        except BaseException:
            await self._stop(final=False)
            raise
        self.ready_seconds = time.perf_counter() - t0
        return self.info

    async def _wait_ready(self) -> BotInfo:
        return await self._poll_ready(
            self.limits.ready_timeout_s,
            lambda last: f"on its unix socket (last: {last}); does the image serve HTTP on "
            f"$BOT_UNIX ({CONTAINER_SOCKET})? The SDK does it by itself; other programs: "
            "listen on that path",
            check_every_s=0.25,
        )

    async def _died(self) -> str | None:
        why = await asyncio.to_thread(self._state)
        return None if why is None else f"stopped before answering GET /: {why}"

    def _may_answer(self) -> bool:
        return self.socket_path is not None and self.socket_path.exists()

    async def _why(self, what: str) -> str:
        # Give the log pump a moment to catch the container's last words.
        await asyncio.sleep(0.1)
        text = f"container bot {self.name!r} (image {self.image!r}) {what}"
        tail = tail_of(self.log_path)
        if tail:
            text += f"\n--- end of its output ({self.log_path}):\n{tail}"
        else:
            text += f" (its output, {self.log_path}, is empty)"
        return text

    async def _stop(self, final: bool = True) -> None:
        """Remove the container; `final`: also close the HTTP client and the socket folder."""
        container, pump = self._container, self._pump
        self._container = self._pump = None
        self.info = None
        if container is not None:
            await asyncio.to_thread(self._remove, container)
        if pump is not None:
            await asyncio.to_thread(pump.join, 2.0)
        if self._socket_dir is not None:
            with contextlib.suppress(OSError):
                (self._socket_dir / "bot.sock").unlink()
        if not final:
            return
        http, self._http = self._http, None
        if http is not None:
            await http.close()
        if self._socket_dir is not None and self._tmp_socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._tmp_socket_dir = False
        self._socket_dir = None

    @staticmethod
    def _remove(container: Container) -> None:
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)

    def _attached(self) -> bool:
        return self._container is not None

    def _not_running(self) -> str:
        return f"the container is not running ({self._exited or 'stopped'})"

    async def _explain(self, fault: Fault | None) -> Fault | None:
        """A connection fault, with why the container stopped when it has."""
        if fault is None or fault.kind != "connection":
            return fault
        try:
            why = self._exited or await asyncio.to_thread(self._state_after_fault)
        except Exception:  # noqa: BLE001 - never raise out of a call
            why = None
        if why is None:
            return fault
        return msgspec.structs.replace(fault, detail=f"{fault.detail} ({why})")
