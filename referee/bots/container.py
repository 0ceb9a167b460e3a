"""A bot submitted as a container image, run sandboxed: ``image = "my-bot:1"``.

:class:`ContainerBot` creates a container from the image through the Docker
Engine API (the ``docker`` package; ``pip install referee[containers]``) with
the :class:`ContainerLimits` of its league: memory (swap included), CPUs,
PIDs, a read-only root with a small ``/tmp`` tmpfs, every capability
dropped, ``no-new-privileges``, an init process (so it stops at once) and
**no network at all** (``--network none``).

The referee talks to the bot over a unix socket in a host folder mounted
into the container: ``OUT/sockets/<key>/`` on the host is ``/run/bot`` in the
container, and the bot must serve HTTP on ``/run/bot/bot.sock``. The
container gets ``BOT_UNIX=/run/bot/bot.sock`` in its environment (the SDK in
``sample_bots/sdk.py`` listens there by itself) and, when a `command` is
given, ``{unix}`` in it is replaced by that path. A league secret arrives as
``BOT_SECRET``; ``BOT_OUTPUT_MARKS`` holds the token of this container's
marks of its output (:mod:`referee.bots.marks`).

The socket folder is the one place the container can write on the host, so
it is guarded (:func:`file_key`, :class:`SocketGuard`):

- its name (and the log's) is the bot's `key` (a team's id) or name, kept as
  it is when it is a plain lowercase file name and otherwise made safe *plus
  a hash of the exact text*, so ``"team a"`` and ``"team_a"`` never share
  one;
- it is a tmpfs of ``limits.socket_folder`` bytes (1 MiB) mounted by the
  referee when it runs as root, so a bot cannot fill the host's disk
  through it (ENOSPC for the bot); without root, a watchdog measures it
  twice a second and stops a container over the cap; either way it is
  emptied before each container starts;
- every connection the referee makes opens the socket with
  ``O_PATH|O_NOFOLLOW``, checks that what it got is a socket owned by the
  bot's uid (not a symbolic link, a FIFO or a file the bot put there to
  redirect the referee, e.g. to the Docker daemon's socket), and connects
  through ``/proc/self/fd/N``, i.e. to that very inode: a swap between the
  check and the connection is not followed. A refusal is a ``connection``
  fault saying what was found.

A container never runs as root: it runs as the referee's own uid:gid (so the
socket it creates is the referee's to use), as ``65534:65534`` (nobody) when
the referee is root, or as the limits' ``user`` (uid or gid 0 refused); a
root referee hands the folder (mode 0700) to that uid.

Readiness is ``GET /`` over the socket; the container's output is streamed
to ``OUT/logs/<bot>.container.log`` (capped); the container is removed by
:meth:`ContainerBot.stop` (``remove(force=True)``: SIGKILL to the init, so
every process of the bot dies). A container that exits or is OOM-killed
mid-game only costs its bot connection faults (data, never an exception);
it is started again before its next game.

Every container carries the labels ``referee.managed=1``,
``referee.instance`` (the install's id, :mod:`referee.bots.instance`; its
name starts ``referee-<id>-``), ``referee.bot``, ``referee.out`` (the
tournament's output folder), ``referee.pid`` and ``referee.host`` (the
referee process that started it), so containers left by a referee that
crashed are found and removed by :func:`cleanup_containers` (``referee
cleanup``), and by the next run of the same tournament: only the
instance's own, never another install's on the same daemon.

**gVisor** (defence in depth): with ``runtime = "runsc"`` in the limits (a
league file's ``[containers] runtime``) or ``--runtime runsc`` (the
operator's, :func:`set_runtime`, which wins over a league file's) the
container runs under gVisor: the bot's system calls go to gVisor's own
kernel, not the host's. The daemon must have the runtime registered, with
the runtime arguments ``--network=none`` (gVisor cannot run with the network
enabled in the root network namespace; the bot has none anyway) and
``--host-uds=create`` (so the bot can create its socket in the mounted
folder); :func:`check_runtime` refuses, before any game, a runtime the daemon
lacks, naming the ones it has. What differs under gVisor: the pids and
memory limits hold the sandbox's own threads and memory too (see
:data:`GVISOR_THREADS`, :data:`GVISOR_MEMORY`), and the bot cannot stat, unlink or rename over
its socket once created (EPERM), so it cannot swap it at all.

The Docker calls block: each runs in a worker thread (``asyncio.to_thread``),
the event loop never waits on the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import aiohttp
import msgspec
from aiohttp.client_exceptions import UnixClientConnectorError
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import ceil_timeout
from aiohttp.tracing import Trace

from protocol.messages import BotInfo, Fault, GameStart

from .base import ActOutcome, BotError
from .http import DEFAULT_MAX_BODY, HttpBot, _user_agent
from .instance import INSTANCE_LABEL, Instance, current
from .managed import ACT_MARK as ACT_MARK
from .managed import GAME_MARK as GAME_MARK
from .managed import ManagedBot
from .marks import OUTPUT_MARKS_ENV, OutputMarks
from .marks import without_marks as without_marks
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
    "GVISOR_MEMORY",
    "GVISOR_THREADS",
    "NOBODY",
    "RUNTIME_ENV",
    "SocketGuard",
    "SocketRefused",
    "bot_user",
    "check_limits",
    "check_runtime",
    "check_runtimes",
    "cleanup_containers",
    "daemon_runtimes",
    "effective_runtime",
    "docker_client",
    "file_key",
    "find_containers",
    "log_file_of",
    "image_exists",
    "is_gvisor",
    "not_found",
    "parse_size",
    "set_runtime",
]

#: Where the bot must listen, inside the container (also in ``$BOT_UNIX``).
CONTAINER_SOCKET: Final = "/run/bot/bot.sock"
CONTAINER_SOCKET_DIR: Final = "/run/bot"
#: The label every container the referee starts carries.
MANAGED_LABEL: Final = "referee.managed"

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
#: A key used as a file name as it is: lowercase (no clash on a case-blind
#: file system), no "+" (what marks a hashed one), not starting with a dot.
_PLAIN_KEY: Final = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,59}$")
#: uid and gid a container runs as when the referee is root (nobody:nogroup).
NOBODY: Final = 65534
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
#: Longest unix socket path (sun_path is 108 bytes on Linux, NUL included).
_MAX_SOCKET_PATH: Final = 100
#: What a runtime's name looks like (a key of daemon.json's "runtimes").
_RUNTIME_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
#: Under gVisor the container's pids cgroup holds the sandbox's own threads
#: (its kernel, the sentry, and its file proxy: ~40 idle, ~70 in a game on 2
#: CPUs, more with more CPUs) and not the bot's processes, which are tasks of
#: the sentry: the host limit is the limits' `pids` plus this allowance.
#: A fork bomb inside ends at the memory limit (or when the sandbox runs out
#: of threads), killing only that container.
GVISOR_THREADS: Final = 256 + 32 * (os.cpu_count() or 1)
#: The memory gVisor's own kernel takes in the container's memory cgroup
#: (~16 MiB for an idle sample bot; a bot reached 120 MB of 128m under runc,
#: 140 MB of 160m under gVisor): added to the limit, so a bot has as much
#: under gVisor as under runc.
GVISOR_MEMORY: Final = 16 * 1024**2
#: The environment variable that holds the operator's runtime (``--runtime``):
#: it applies to every container of this process and of the processes it
#: starts (local Ray workers included), over what a league file says.
RUNTIME_ENV: Final = "REFEREE_CONTAINER_RUNTIME"


class ContainerLimits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How a container bot is confined (the league's ``[containers]`` table,
    a bot's ``limits``). Sizes are Docker's: ``"128m"``, ``"1g"``, ``"512k"``."""

    #: Memory, swap included (memory and memory-swap are both set to it): a bot
    #: that allocates more is killed by the kernel (exit 137). Under gVisor the
    #: host's limit is this plus :data:`GVISOR_MEMORY` (its kernel's own).
    memory: str = "128m"
    #: CPUs (``--cpus``): 1.0 is one core's worth of time.
    cpus: float = 1.0
    #: Most processes and threads at once (``--pids-limit``): fork bombs stop here.
    #: Under gVisor the host's limit is this plus :data:`GVISOR_THREADS` (the
    #: sandbox's own threads); a fork bomb there ends at the memory limit.
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
    #: ``uid:gid`` (or ``uid``, then gid = uid) the bot runs as; default the
    #: referee's own, so the socket the bot creates is usable by the referee,
    #: or 65534:65534 (nobody) when the referee is root. Never 0.
    user: str | None = None
    #: Cap of ``OUT/logs/<bot>.container.log`` (and of Docker's own log).
    log_limit: str = "10m"
    #: Cap of the socket folder, the container's only writable place on the
    #: host (a tmpfs of that size when the referee is root, else watched).
    socket_folder: str = "1m"
    #: The OCI runtime the container runs under (``--runtime``): ``"runsc"``
    #: for gVisor, a kernel of its own between the bot and the host's (see
    #: :func:`effective_runtime`); None: the daemon's default (runc). It must
    #: be registered in the daemon (``docker info`` lists its runtimes).
    runtime: str | None = None


def parse_size(text: str) -> int:
    """``"128m"`` -> 134217728 bytes; ValueError when it is not a size."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"expected a size like \"128m\", \"1g\" or \"512k\", got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def check_limits(limits: ContainerLimits) -> list[tuple[str, str]]:
    """What is wrong with `limits`: [(field, message)], empty when usable."""
    problems: list[tuple[str, str]] = []
    for key, minimum in (("memory", 6 * 1024**2), ("tmpfs", 4096), ("log_limit", 1024),
                         ("socket_folder", 4096)):
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
    if limits.runtime is not None and not _RUNTIME_NAME.match(limits.runtime):
        problems.append(("runtime", f"expected the name of a runtime registered in the Docker daemon "
                                    f"(\"runsc\" for gVisor), got {limits.runtime!r}"))
    if limits.user is not None:
        if not re.match(r"^\d+(:\d+)?$", limits.user):
            problems.append(("user", f"expected a numeric uid or uid:gid, got {limits.user!r}"))
        elif 0 in _ids(limits.user):
            problems.append((
                "user",
                f"{limits.user!r} names uid or gid 0 (root): a bot never runs as root; leave "
                f"`user` unset (the referee's uid, or {NOBODY} when the referee is root) or name "
                "an unprivileged uid:gid",
            ))
    return problems


def _ids(user: str) -> tuple[int, int]:
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def bot_user(limits: ContainerLimits) -> tuple[int, int]:
    """(uid, gid) a container with `limits` runs as: never 0 (see :attr:`ContainerLimits.user`)."""
    if limits.user is not None:
        uid, gid = _ids(limits.user)
    else:
        uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        uid = gid = NOBODY
    return uid, (NOBODY if gid == 0 else gid)


def file_key(text: str) -> str:
    """The file name of a bot's socket folder and logs, from its key (a team's
    id) or name: `text` itself when it is a plain lowercase name (``greedy``,
    ``team-7``), else it made safe plus a hash of the exact text
    (``"team a"`` -> ``team_a+5d3f…``), so two different texts never share one."""
    if _PLAIN_KEY.match(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_UNSAFE.sub('_', text).strip('_.')[:40] or 'bot'}+{digest}"


def log_file_of(out_dir: str | os.PathLike[str], key: str) -> Path:
    """Where the container bot keyed `key` (its `key`, else its name) logs in
    the output folder `out_dir` (:func:`file_key`: no other bot's text maps there)."""
    return Path(out_dir) / "logs" / f"{file_key(key)}.container.log"


# ------------------------------------------------------------ the socket


class SocketRefused(aiohttp.ClientConnectionError):
    """What is at a bot's socket path is not a socket the referee will talk to."""


_WHAT: Final = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFREG: "a regular file",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFDIR: "a folder",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}
#: Connect through the O_PATH descriptor (Linux): the kernel connects to the
#: inode that was checked, whatever is at the path by then.
_BY_FD: Final = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


class SocketGuard:
    """Checks a bot's socket before each connection: `path` must be a socket
    (not a symbolic link, not a FIFO or a file), owned by `uid` when given.

    :meth:`open` gives a descriptor of it (``O_PATH|O_NOFOLLOW``: never
    followed, never opened for I/O, so a FIFO cannot block) and
    :meth:`address` the path that connects to exactly that inode
    (``/proc/self/fd/N``), so a bot that swaps its socket after the check
    is not followed either. One ``open`` + ``fstat`` + ``close``: a few µs,
    paid per new connection (kept-alive ones are reused)."""

    def __init__(self, path: str | os.PathLike[str], uid: int | None = None) -> None:
        self.path = os.fspath(path)
        self.uid = uid

    def refusal(self, st: os.stat_result) -> str | None:
        """Why the file `st` describes is refused (None: it is fine)."""
        kind = stat.S_IFMT(st.st_mode)
        if kind != stat.S_IFSOCK:
            what = _WHAT.get(kind, f"a file of type {kind:o}")
            return f"the bot's socket was replaced by {what}: refused"
        if self.uid is not None and st.st_uid != self.uid:
            return (f"the bot's socket belongs to uid {st.st_uid}, not to the bot's uid "
                    f"{self.uid}: refused")
        return None

    def check(self) -> str | None:
        """Why what is at the path now is refused; None when it is fine or absent."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        return self.refusal(st)

    def open(self) -> int:
        """A descriptor of the checked socket (close it after connecting).

        Raises :class:`SocketRefused`, or ``OSError`` (``FileNotFoundError``
        before the bot listens)."""
        if not _BY_FD:  # no O_PATH: check, then connect by path (a window remains)
            why = self.refusal(os.lstat(self.path))
            if why is not None:
                raise SocketRefused(why)
            return -1
        fd = os.open(self.path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            why = self.refusal(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        if why is not None:
            os.close(fd)
            raise SocketRefused(why)
        return fd

    def address(self, fd: int) -> str:
        """Where to connect to reach the socket `fd` (from :meth:`open`) is."""
        return f"/proc/self/fd/{fd}" if fd >= 0 else self.path

    @staticmethod
    def release(fd: int) -> None:
        if fd >= 0:
            os.close(fd)


class _GuardedConnector(aiohttp.UnixConnector):
    """A unix connector whose every connection goes through a :class:`SocketGuard`."""

    def __init__(self, guard: SocketGuard, limit: int) -> None:
        super().__init__(path=guard.path, limit=limit)
        self.guard = guard

    async def _create_connection(
        self, req: aiohttp.ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        try:
            fd = self.guard.open()
        except SocketRefused:
            raise
        except OSError as exc:
            raise UnixClientConnectorError(self.path, req.connection_key, exc) from exc
        try:
            async with ceil_timeout(timeout.sock_connect, ceil_threshold=timeout.ceil_threshold):
                _, proto = await self._loop.create_unix_connection(self._factory, self.guard.address(fd))
        except OSError as exc:
            if exc.errno is None and isinstance(exc, asyncio.TimeoutError):
                raise
            raise UnixClientConnectorError(self.path, req.connection_key, exc) from exc
        finally:
            self.guard.release(fd)
        return proto


class _GuardedHttpBot(HttpBot):
    """An :class:`HttpBot` on a unix socket whose connections are guarded."""

    def __init__(self, guard: SocketGuard, **kwargs: Any) -> None:
        super().__init__(f"unix:{guard.path}", **kwargs)
        self.guard = guard

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # make_session(unix_socket=...) with the guarded connector
            self._session = aiohttp.ClientSession(
                connector=_GuardedConnector(self.guard, self.connections),
                timeout=aiohttp.ClientTimeout(),
                auto_decompress=False,
                trust_env=False,
                headers={"Accept-Encoding": "identity", "User-Agent": _user_agent()},
            )
        return self._session


# ------------------------------------------------------- the socket folder

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MNT_DETACH = 2, 4, 8, 2
#: Files (inodes) the socket folder's tmpfs holds: the socket and a few more.
_FOLDER_INODES: Final = 64


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(folder: Path, size: int, uid: int, gid: int) -> None:
    """Mount a tmpfs of `size` bytes on `folder`, owned by uid:gid, mode 0700
    (root, Linux); OSError when that cannot be done."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        raise OSError(errno.EPERM, "only root can mount a tmpfs")
    options = f"size={size},nr_inodes={_FOLDER_INODES},mode=0700,uid={uid},gid={gid}"
    if _libc().mount(b"tmpfs", os.fsencode(folder), b"tmpfs",
                     _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options.encode()) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _unmount(folder: Path) -> None:
    if _libc().umount2(os.fsencode(folder), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _empty(folder: Path) -> None:
    """Remove what is in `folder` (never following a link); blocking."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _usage(folder: Path, cap: int) -> int:
    """Bytes `folder` holds on disk (4 KiB at least per file), counted until
    past `cap`; blocking."""
    total = 0
    stack = [os.fspath(folder)]
    while stack and total <= cap:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += max(st.st_blocks * 512, 4096)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    if total > cap:
                        break
        except OSError:
            continue
    return total


class _FolderWatch(threading.Thread):
    """Without a tmpfs: measures the socket folder every `every_s` and calls
    `over(used)` once when it holds more than `cap` bytes."""

    def __init__(self, folder: Path, cap: int, over: Callable[[int], None], every_s: float = 0.5) -> None:
        super().__init__(name=f"watch-{folder.name}", daemon=True)
        self.folder, self.cap, self.over, self.every_s = folder, cap, over, every_s
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            used = _usage(self.folder, self.cap)
            if used > self.cap:
                self.over(used)
                return


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


def set_runtime(runtime: str | None) -> str | None:
    """Run every container of this process (and of the processes it starts)
    under `runtime` from now on, whatever the limits say (``--runtime``);
    None: each container's limits decide again. Returns the one set before."""
    previous = os.environ.get(RUNTIME_ENV) or None
    if runtime:
        os.environ[RUNTIME_ENV] = runtime
    else:
        os.environ.pop(RUNTIME_ENV, None)
    return previous


def effective_runtime(limits: ContainerLimits) -> tuple[str | None, str]:
    """(runtime, where it was set) a container with `limits` runs under:
    the operator's (``--runtime``, :data:`RUNTIME_ENV`) over the limits'
    (a league file's ``[containers] runtime``); (None, "") for the daemon's default."""
    forced = os.environ.get(RUNTIME_ENV, "").strip()
    if forced:
        return forced, "--runtime"
    if limits.runtime:
        return limits.runtime, "[containers] runtime"
    return None, ""


def daemon_runtimes(client: DockerClient | None = None) -> tuple[list[str], str]:
    """(the runtimes the daemon has, its default), from ``docker info``; blocking."""
    client = client or docker_client()
    try:
        info = client.info()
    except Exception as e:  # noqa: BLE001 - the daemon went away
        raise DockerUnavailable(f"the Docker daemon did not answer ({_short(e)})") from None
    return sorted(info.get("Runtimes") or {}), str(info.get("DefaultRuntime") or "runc")


#: Whether a runtime of a daemon is gVisor: {(daemon, runtime): bool}.
_GVISOR: dict[tuple[int, str], bool] = {}


def is_gvisor(runtime: str | None, client: DockerClient | None = None) -> bool:
    """Whether `runtime` of the daemon (None: its default runtime, which
    daemon.json's "default-runtime" may make runsc) runs ``runsc`` (gVisor);
    blocking, once per runtime."""
    client = client or docker_client()
    key = (id(client), runtime or "")
    if key not in _GVISOR:
        name = runtime or "runc"
        try:
            info = client.info()
            name = runtime or str(info.get("DefaultRuntime") or "runc")
            path = str(((info.get("Runtimes") or {}).get(name) or {}).get("path") or name)
        except Exception:  # noqa: BLE001 - the daemon went away: the name says it
            path = name
        _GVISOR[key] = os.path.basename(path).startswith("runsc") or "gvisor" in name.lower()
    return _GVISOR[key]


def check_runtime(runtime: str, client: DockerClient | None = None, *, field: str = "runtime") -> None:
    """Raise :class:`BotError` naming `field` when the daemon has no runtime
    `runtime` (with the ones it has and how to register one); blocking."""
    if not _RUNTIME_NAME.match(runtime):
        raise BotError(f"{field}: {runtime!r} is not a runtime's name (\"runsc\" for gVisor)")
    known, default = daemon_runtimes(client)
    if runtime in known:
        return
    raise BotError(
        f"{field}: the Docker daemon has no runtime {runtime!r} (it has: {', '.join(known) or 'none'}; "
        f"default {default}): register it in the daemon's daemon.json under \"runtimes\" and "
        "restart the daemon (for gVisor: {\"runsc\": {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": "
        "[\"--network=none\", \"--host-uds=create\"]}}), or name one it has"
    )


def check_runtimes(limits: Iterable[ContainerLimits], client: DockerClient | None = None) -> None:
    """:func:`check_runtime` for each runtime that containers with these
    `limits` would run under (:func:`effective_runtime`), once each; no daemon
    call when none names one. Raises :class:`BotError`; blocking."""
    seen: set[str] = set()
    for lim in limits:
        runtime, field = effective_runtime(lim)
        if runtime is not None and runtime not in seen:
            seen.add(runtime)
            check_runtime(runtime, client, field=field)


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


def _volume_tmpfs(client: DockerClient, image: str, options: str, *, skip: Sequence[str] = ()) -> dict[str, str]:
    """A tmpfs (mounted with `options`) over every ``VOLUME`` the image
    declares, so that none becomes writable host disk (Docker makes an
    anonymous volume under /var/lib/docker/volumes for one not covered);
    `skip`: paths mounted otherwise. BotError for a volume path Docker would
    not clean to an absolute one. Uploaded images with a VOLUME are refused
    (:func:`~referee.bots.builds.load_image_archive`): this covers the others
    (an admin-named image, house bots)."""
    import posixpath

    docker_mod = _docker_module()
    try:
        volumes = client.images.get(image).attrs.get("Config", {}).get("Volumes") or {}
    except docker_mod.errors.NotFound:
        return {}  # create says so
    except docker_mod.errors.DockerException as e:
        raise DockerUnavailable(f"the Docker daemon failed: {_short(e)}") from None
    out: dict[str, str] = {}
    for raw in volumes:
        path = posixpath.normpath(str(raw))
        if not path.startswith("/") or "\0" in path or "," in path or ":" in path:
            raise BotError(f"image {image!r} declares VOLUME {str(raw)[:200]!r}, which cannot be covered "
                           "by a tmpfs: remove the VOLUME line from its Dockerfile")
        path = "/" + path.lstrip("/")
        if path == "/":
            raise BotError(f"image {image!r} declares VOLUME '/': remove the VOLUME line from its Dockerfile")
        if path not in skip:
            out[path] = options
    return out


def _referee_alive(labels: Mapping[str, str]) -> bool:
    """Whether the referee process that started a container still runs here."""
    if labels.get("referee.host") != socket.gethostname():
        return False
    try:
        pid = int(labels.get("referee.pid", ""))
    except ValueError:
        return False
    return pid_alive(pid)


def _label_filters(label_filter: Mapping[str, str] | Sequence[str] | str | None,
                   instance: Instance | None = None) -> list[str]:
    labels = [f"{MANAGED_LABEL}=1", (instance or current()).label_filter]
    if isinstance(label_filter, str):
        labels.append(label_filter)
    elif isinstance(label_filter, Mapping):
        labels += [f"{k}={v}" for k, v in label_filter.items()]
    elif label_filter is not None:
        labels += list(label_filter)
    return labels


def find_containers(label_filter: Mapping[str, str] | Sequence[str] | str | None = None, *,
                    client: DockerClient | None = None, instance: Instance | None = None) -> list[Container]:
    """Containers `instance` (default: the process's) started, running or
    not, that match `label_filter` (``{"referee.out": "/path"}``,
    ``"referee.bot=greedy"`` or a list); blocking. Never another instance's."""
    client = client or docker_client()
    inst = instance or current()
    found = client.containers.list(all=True, filters={"label": _label_filters(label_filter, inst)})
    return [c for c in found if (c.labels or {}).get(INSTANCE_LABEL) == inst.id]


def cleanup_containers(label_filter: Mapping[str, str] | Sequence[str] | str | None = None, *,
                       orphans_only: bool = False, client: DockerClient | None = None,
                       instance: Instance | None = None) -> list[str]:
    """Remove `instance`'s containers (default: the process's) matching
    `label_filter` (every one labelled ``referee.managed=1`` and
    ``referee.instance=<id>`` when None); their names. `orphans_only`: spare
    those whose referee process still runs on this host. Blocking."""
    docker_mod = _docker_module()

    removed: list[str] = []
    for c in find_containers(label_filter, client=client, instance=instance):
        labels = c.labels or {}
        if orphans_only and _referee_alive(labels):
            continue
        with contextlib.suppress(docker_mod.errors.NotFound):
            c.remove(force=True, v=True)
            removed.append(str(c.name))
    return removed


# ------------------------------------------------------------- the bot


#: A line of ``docker logs --timestamps``: the daemon's time it read the line, a space, the line.
_STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


def _stamp_of(line: bytes) -> tuple[float | None, bytes]:
    """(the daemon's time of a log line, the line without it); None when it has none."""
    m = _STAMP.match(line)
    if m is None:
        return None, line
    try:
        at = datetime.fromisoformat(m.group(1).decode()).timestamp()
    except ValueError:
        return None, line
    return at, line[m.end():]


class _LogPump(threading.Thread):
    """Copies a container's output into a file, up to a cap (blocking stream),
    with the referee's `marks` placed by the bot's marks or the daemon's
    timestamps of its lines (:class:`referee.bots.marks.OutputMarks`)."""

    def __init__(self, container: Container, path: Path, cap: int, marks: OutputMarks | None = None) -> None:
        super().__init__(name=f"logs-{container.name}", daemon=True)
        self.container = container
        self.path = path
        self.cap = cap
        self.marks = marks or OutputMarks()

    def run(self) -> None:
        written = 0
        at_line_start = True
        try:
            with self.path.open("ab") as f:
                try:
                    for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True,
                                                     timestamps=True):
                        if written >= self.cap:
                            continue
                        at, chunk = _stamp_of(chunk)
                        chunk = self.marks.place(at, chunk, at_line_start)
                        if written + len(chunk) > self.cap:
                            chunk = chunk[: self.cap - written] + b"\n--- log cap reached: the rest is dropped\n"
                        if chunk:
                            written += len(chunk)
                            at_line_start = chunk.endswith(b"\n")
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
    ``out_dir/logs/<label>.container.log``, `label` being :func:`file_key`
    of `key` (a stable id, e.g. the team's; give one to every bot of a run or
    to none) or else of `name` (or the image). `limits` confine it
    (:class:`ContainerLimits`); `command` overrides the image's CMD
    (``{unix}`` is replaced by the socket path);
    `env` adds environment variables; `labels` add Docker labels (on top of
    the ``referee.*`` ones). `instance`: the install whose name prefix and
    ``referee.instance`` label the container carries (default: the
    process's). `secret` signs requests and is given to the
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
        key: str | None = None,
        instance: Instance | None = None,
    ) -> None:
        self.image = image
        #: The install whose name and label the containers carry (default: the process's).
        self.instance = instance or current()
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
        self._label = file_key(key if key is not None else (name or image))
        #: uid and gid the container runs as (never 0).
        self.uid, self.gid = bot_user(self.limits)
        #: How the socket folder is bounded: "tmpfs" (a mount of the cap's size,
        #: root only) or "watchdog" (measured twice a second); None before the
        #: first start.
        self.folder_bound: Literal["tmpfs", "watchdog"] | None = None
        #: Why no tmpfs could be mounted (with "watchdog").
        self.folder_mount_error: str | None = None
        self._guard: SocketGuard | None = None
        self._watch: _FolderWatch | None = None
        self._stopped_why: str | None = None
        #: How many containers were started.
        self.launches = 0
        #: Seconds from creating the last container to its first answer to ``GET /``.
        self.ready_seconds: float | None = None
        #: The runtime the last container was created with (None: the daemon's default).
        self.runtime: str | None = None
        self._container: Container | None = None
        self._pump: _LogPump | None = None
        self._marks = OutputMarks()
        self._exited: str | None = None
        self._socket_dir: Path | None = None
        self._tmp_socket_dir = False

    # ---------------------------------------------------------------- basics

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        """``POST /start``, after a line ``--- game <game_id>`` in the bot's log,
        so that its output can be read game by game (its team's diagnostics)."""
        self._marks.add(True, f"{GAME_MARK}{message.game_id}\n")
        return await super().start(message, timeout_s)

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        """``POST /act``, after a mark ``--- act <request id> <turn>`` for the
        bot's log (written before its next line of output, if any)."""
        self._marks.add(False, f"{ACT_MARK}{request_id} {turn}\n")
        return await super().act_bytes(body, request_id, turn, deadline_s)

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
        if self._stopped_why is not None:
            why = self._stopped_why
        elif st.get("OOMKilled"):
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

    def _prepare_folder(self) -> None:
        """Before a container starts: bound the socket folder (once), empty it
        and hand it to the bot's uid (blocking)."""
        folder = self._socket_dir
        assert folder is not None
        if self.folder_bound is None:
            try:
                if os.path.ismount(folder):  # left mounted by a referee that crashed
                    _unmount(folder)
                _mount_tmpfs(folder, parse_size(self.limits.socket_folder), self.uid, self.gid)
                self.folder_bound = "tmpfs"
            except OSError as e:
                self.folder_bound = "watchdog"
                self.folder_mount_error = f"no tmpfs on the socket folder ({e.strerror or e})"
        _empty(folder)
        try:
            if os.geteuid() == 0:
                os.chown(folder, self.uid, self.gid)
                os.chmod(folder, 0o700)
            elif self.uid == os.getuid():
                os.chmod(folder, 0o700)
            else:
                # Not root: no way to hand the folder to another uid but to open
                # it to all; the guard still refuses a socket not owned by the bot.
                os.chmod(folder, 0o777)
        except OSError as e:
            raise BotError(f"the socket folder {folder} cannot be handed to uid {self.uid}: "
                           f"{e.strerror or e}") from None

    def _release_folder(self) -> None:
        """After the last container: empty the folder and unmount it (blocking)."""
        folder = self._socket_dir
        if folder is None:
            return
        _empty(folder)
        if self.folder_bound == "tmpfs":
            with contextlib.suppress(OSError):
                _unmount(folder)
            self.folder_bound = None

    def _over_cap(self, used: int) -> None:
        """The watchdog's verdict: stop the container, empty the folder (its thread)."""
        why = (f"the container was stopped for writing more than {self.limits.socket_folder} "
               f"into its socket folder ({used} bytes or more)")
        self._stopped_why = why  # what _state says from now on
        container, folder = self._container, self._socket_dir
        if container is not None:
            with contextlib.suppress(Exception):
                container.kill()
        if folder is not None:
            _empty(folder)
        self._exited = why

    def _create(self) -> Container:
        """Create and start the container (blocking)."""
        docker_mod = _docker_module()

        client = self._docker()
        lim = self.limits
        assert self._socket_dir is not None
        user = f"{self.uid}:{self.gid}"
        env = {"BOT_UNIX": CONTAINER_SOCKET, "HOME": "/tmp", **self.env,
               OUTPUT_MARKS_ENV: self._marks.new_container()}  # a fresh token: the bot's marks (marks.py)
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
            INSTANCE_LABEL: self.instance.id,  # last: never another instance's
        }
        if self.image.startswith("sha256:"):  # pinned by id: keep a tag of ours on it (image prune)
            with contextlib.suppress(docker_mod.errors.DockerException):
                self.instance.ensure_tagged(client, self.image)
        tmpfs = {"/tmp": f"rw,nosuid,nodev,noexec,size={parse_size(lim.tmpfs)},mode=1777"}
        tmpfs = {**_volume_tmpfs(client, self.image, tmpfs["/tmp"], skip=(CONTAINER_SOCKET_DIR,)), **tmpfs}
        runtime, where = effective_runtime(lim)
        self.runtime = runtime
        gvisor = is_gvisor(runtime, client)
        memory = parse_size(lim.memory) + (GVISOR_MEMORY if gvisor else 0)
        pids = lim.pids + (GVISOR_THREADS if gvisor else 0)
        try:
            container = client.containers.create(
                self.image,
                command=command,
                name=f"{self.instance.container_prefix}{self._label[:40].replace('+', '-')}-{secrets.token_hex(4)}",
                detach=True,
                environment=env,
                labels=labels,
                user=user,
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(lim.cpus * 1e9),
                pids_limit=pids,
                read_only=lim.read_only,
                tmpfs=tmpfs,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
                network_mode="none",
                ipc_mode="private",
                runtime=runtime,
                volumes={str(self._socket_dir): {"bind": CONTAINER_SOCKET_DIR, "mode": "rw"}},
                log_config=docker_mod.types.LogConfig(type="json-file",
                                     config={"max-size": str(parse_size(lim.log_limit)), "max-file": "1"}),
            )
        except docker_mod.errors.ImageNotFound:
            raise BotError(not_found(self.image)) from None
        except docker_mod.errors.APIError as e:
            if e.status_code == 404 and "image" in str(e.explanation or "").lower():
                raise BotError(not_found(self.image)) from None
            if runtime is not None and "runtime" in str(e.explanation or "").lower():
                check_runtime(runtime, client, field=where)  # says which runtimes there are
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
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            # No pump runs now: the marks made since the last line go first.
            log.write(b"".join(self._marks.drain()))
            log.write(f"--- {stamp} start of a container from {self.image!r}\n".encode())
        t0 = time.perf_counter()
        self._exited = self._stopped_why = None
        await asyncio.to_thread(self._docker)  # DockerUnavailable before anything else
        try:
            await asyncio.to_thread(self._prepare_folder)
            self._container = await asyncio.to_thread(self._create)
        except BaseException:
            await asyncio.to_thread(self._release_folder)  # no mount left behind
            raise
        self.launches += 1
        self._pump = _LogPump(self._container, self.log_path, parse_size(self.limits.log_limit), self._marks)
        self._pump.start()
        if self.folder_bound == "watchdog":
            self._watch = _FolderWatch(self._socket_dir, parse_size(self.limits.socket_folder),
                                       self._over_cap)
            self._watch.start()
        if self._http is None:
            # One HTTP client for the bot's life: the socket path stays the same
            # when a container is started again. Every connection is guarded.
            self._guard = SocketGuard(self._socket_dir / "bot.sock", self.uid)
            self._http = _GuardedHttpBot(self._guard, name=self._name, secret=self.secret,
                                         max_body=self.max_body)
        try:
            self.info = await self._wait_ready()
        except BaseException:
            await self._stop(final=False)
            await asyncio.to_thread(self._release_folder)
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
        refused = self._guard.check() if self._guard is not None else None
        if refused is not None:
            return f"put something else than its socket at {self.socket_path}: {refused}"
        why = await asyncio.to_thread(self._state)
        return None if why is None else f"stopped before answering GET /: {why}"

    def _may_answer(self) -> bool:
        return self.socket_path is not None and os.path.lexists(self.socket_path)

    async def _why(self, what: str) -> str:
        # Give the log pump a moment to catch the container's last words.
        await asyncio.sleep(0.1)
        text = f"container bot {self.name!r} (image {self.image!r}) {what}"
        tail = without_marks(tail_of(self.log_path))
        if tail:
            text += f"\n--- end of its output ({self.log_path}):\n{tail}"
        else:
            text += f" (its output, {self.log_path}, is empty)"
        return text

    async def _stop(self, final: bool = True) -> None:
        """Remove the container; `final`: also close the HTTP client and the socket folder."""
        container, pump, watch = self._container, self._pump, self._watch
        self._container = self._pump = self._watch = None
        self.info = None
        if watch is not None:
            watch.done.set()
        if container is not None:
            await asyncio.to_thread(self._remove, container)
        if pump is not None:
            await asyncio.to_thread(pump.join, 2.0)
        if watch is not None:
            await asyncio.to_thread(watch.join, 2.0)
        if self._socket_dir is not None:
            with contextlib.suppress(OSError):
                (self._socket_dir / "bot.sock").unlink()
        if not final:
            return
        http, self._http = self._http, None
        self._guard = None
        if http is not None:
            await http.close()
        await asyncio.to_thread(self._release_folder)
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
