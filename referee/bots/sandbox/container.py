"""A bot submitted as a container image, run sandboxed: ``image = "my-bot:1"``.

:class:`ContainerBot` creates a container from the image through the Docker
Engine API (the ``docker`` package; ``pip install referee[containers]``) with
the :class:`~referee.bots.sandbox.container_limits.ContainerLimits` of its league: memory (swap included), CPUs,
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
marks of its output (:mod:`referee.bots.sandbox.marks`).

The socket folder is the one place the container can write on the host, so
it is guarded (:func:`~referee.bots.sandbox.container_limits.file_key`,
:mod:`referee.bots.sandbox.socket_folder`, :class:`~referee.bots.sandbox.socket_guard.SocketGuard`):

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

What an image's config asks of the daemon is not the team's to ask: its
``HEALTHCHECK`` never runs (:data:`NO_HEALTHCHECK`: the daemon would exec
it every interval on the host's CPU, outside every limit) and its
``STOPSIGNAL`` is replaced (:data:`STOP_SIGNAL`); its ``VOLUME`` paths get a
tmpfs; its ``USER`` is replaced (below). Its ``ENTRYPOINT``, ``CMD``,
``ENV`` and ``WORKDIR`` are the bot's own, run inside the sandbox.

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
``referee.instance`` (the install's id, :mod:`referee.bots.sandbox.instance`; its
name starts ``referee-<id>-``), ``referee.bot``, ``referee.out`` (the
tournament's output folder), ``referee.pid`` and ``referee.host`` (the
referee process that started it), so containers left by a referee that
crashed are found and removed by
:func:`~referee.bots.sandbox.docker_daemon.cleanup_containers` (``referee
cleanup``), and by the next run of the same tournament: only the
instance's own, never another install's on the same daemon.

**gVisor** (defence in depth): with ``runtime = "runsc"`` in the limits (a
league file's ``[containers] runtime``) or ``--runtime runsc`` (the
operator's, :func:`~referee.bots.sandbox.docker_daemon.set_runtime`, which wins over a league file's) the
container runs under gVisor: the bot's system calls go to gVisor's own
kernel, not the host's. The daemon must have the runtime registered, with
the runtime arguments ``--network=none`` (gVisor cannot run with the network
enabled in the root network namespace; the bot has none anyway) and
``--host-uds=create`` (so the bot can create its socket in the mounted
folder); :func:`~referee.bots.sandbox.docker_daemon.check_runtime` refuses, before any game, a runtime the daemon
lacks, naming the ones it has. What differs under gVisor: the pids and
memory limits hold the sandbox's own threads and memory too (see
:data:`~referee.bots.sandbox.container_limits.GVISOR_THREADS`,
:data:`~referee.bots.sandbox.container_limits.GVISOR_MEMORY`), and the bot cannot stat, unlink or rename over
its socket once created (EPERM), so it cannot swap it at all.

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
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

import msgspec

from protocol.messages import BotInfo, Fault, GameStart

from ..base import ActOutcome, BotError
from ..http import DEFAULT_MAX_BODY
from ..managed import ACT_MARK as ACT_MARK
from ..managed import GAME_MARK as GAME_MARK
from ..managed import ManagedBot
from ..process import tail_of
from .container_limits import (
    GVISOR_MEMORY,
    GVISOR_THREADS,
    ContainerLimits,
    bot_user,
    check_limits,
    file_key,
    parse_size,
)
from .docker_daemon import (
    MANAGED_LABEL,
    Container,
    DockerClient,
    DockerUnavailable,
    check_runtime,
    docker_client,
    docker_module,
    effective_runtime,
    is_gvisor,
    not_found,
    short_error,
    volume_tmpfs,
)
from .instance import INSTANCE_LABEL, Instance, current
from .marks import OUTPUT_MARKS_ENV, OutputMarks
from .marks import without_marks as without_marks
from .socket_folder import CONTAINER_SOCKET_DIR, FolderWatch, empty_folder, mount_tmpfs, unmount
from .socket_guard import GuardedHttpBot, SocketGuard

__all__ = [
    "ACT_MARK",
    "CONTAINER_SOCKET",
    "GAME_MARK",
    "ContainerBot",
    "ContainerLimits",  # the type of the bot's `limits`, defined in container_limits
    "without_marks",
]

#: Where the bot must listen, inside the container (also in ``$BOT_UNIX``).
CONTAINER_SOCKET: Final = "/run/bot/bot.sock"
#: Longest unix socket path (sun_path is 108 bytes on Linux, NUL included).
_MAX_SOCKET_PATH: Final = 100
#: The health check every bot container runs with: none (``docker run --no-healthcheck``),
#: whatever the image's ``HEALTHCHECK`` says: the daemon runs a health check as an exec
#: on the host's CPU, outside the container's limits (issue 32: 1 ms cost 0.63 cores).
NO_HEALTHCHECK: Final = {"test": ["NONE"]}
#: The signal ``docker stop`` (and the daemon's own shutdown) sends, whatever the
#: image's ``STOPSIGNAL`` says (the referee itself removes containers with SIGKILL).
STOP_SIGNAL: Final = "SIGTERM"


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
    return at, line[m.end() :]


class _LogPump(threading.Thread):
    """Copies a container's output into a file, up to a cap (blocking stream),
    with the referee's `marks` placed by the bot's marks or the daemon's
    timestamps of its lines (:class:`referee.bots.sandbox.marks.OutputMarks`)."""

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
                    for chunk in self.container.logs(
                        stream=True, follow=True, stdout=True, stderr=True, timestamps=True
                    ):
                        if written >= self.cap:
                            continue
                        at, chunk = _stamp_of(chunk)
                        chunk = self.marks.place(at, chunk, at_line_start)
                        if written + len(chunk) > self.cap:
                            chunk = (
                                chunk[: self.cap - written] + b"\n--- log cap reached: the rest is dropped\n"
                            )
                        if chunk:
                            written += len(chunk)
                            at_line_start = chunk.endswith(b"\n")
                            f.write(chunk)
                            f.flush()
                except Exception as e:  # noqa: BLE001 - the container went away
                    f.write(f"--- log stream ended: {short_error(e)}\n".encode())
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
        self._watch: FolderWatch | None = None
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
    def socket_folder(self) -> Path:
        """The host folder mounted at ``/run/bot`` in the container, where the
        bot makes its socket (the one place it can write on the host):
        ``out_dir/sockets/<label>/``, `label` being the log's; or, when a
        socket there would be too long a path, a short folder under the temp
        dir, made at the launch (this then, until the bot stops)."""
        if self._socket_dir is not None:
            return self._socket_dir
        return self.out_dir / "sockets" / self._label

    @property
    def socket_path(self) -> Path | None:
        """The bot's socket on the host (while a container runs)."""
        return self._socket_dir / "bot.sock" if self._socket_dir is not None else None

    @property
    def marks_own_output(self) -> bool:
        """Whether the running (or last) container marks its output itself
        (it printed a valid mark with its ``BOT_OUTPUT_MARKS`` token,
        :mod:`referee.bots.sandbox.marks`): its lines are then in its log exactly
        next to the moves it printed them for; else the daemon's timestamps
        place them."""
        return self._marks.by_bot

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
        docker_mod = docker_module()

        c = self._container
        if c is None:
            return "no container"
        try:
            c.reload()
        except docker_mod.errors.NotFound:
            self._exited = "the container was removed"
            return self._exited
        except Exception as e:  # noqa: BLE001 - the daemon went away
            return f"the Docker daemon did not answer ({short_error(e)})"
        st = c.attrs.get("State") or {}
        if st.get("Running"):
            return None
        code = st.get("ExitCode")
        if self._stopped_why is not None:
            why = self._stopped_why
        elif st.get("OOMKilled"):
            why = (
                f"the container was killed for using more than its memory limit of "
                f"{self.limits.memory} (exit code {code})"
            )
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
        """The socket folder for a launch, made (:attr:`socket_folder`)."""
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
                    unmount(folder)
                mount_tmpfs(folder, parse_size(self.limits.socket_folder), self.uid, self.gid)
                self.folder_bound = "tmpfs"
            except OSError as e:
                self.folder_bound = "watchdog"
                self.folder_mount_error = f"no tmpfs on the socket folder ({e.strerror or e})"
        empty_folder(folder)
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
            raise BotError(
                f"the socket folder {folder} cannot be handed to uid {self.uid}: {e.strerror or e}"
            ) from None

    def _release_folder(self) -> None:
        """After the last container: empty the folder and unmount it (blocking)."""
        folder = self._socket_dir
        if folder is None:
            return
        empty_folder(folder)
        if self.folder_bound == "tmpfs":
            with contextlib.suppress(OSError):
                unmount(folder)
            self.folder_bound = None

    def _over_cap(self, used: int) -> None:
        """The watchdog's verdict: stop the container, empty the folder (its thread)."""
        why = (
            f"the container was stopped for writing more than {self.limits.socket_folder} "
            f"into its socket folder ({used} bytes or more)"
        )
        self._stopped_why = why  # what _state says from now on
        container, folder = self._container, self._socket_dir
        if container is not None:
            with contextlib.suppress(Exception):
                container.kill()
        if folder is not None:
            empty_folder(folder)
        self._exited = why

    def _create(self) -> Container:
        """Create and start the container (blocking)."""
        docker_mod = docker_module()

        client = self._docker()
        lim = self.limits
        assert self._socket_dir is not None
        user = f"{self.uid}:{self.gid}"
        env = {
            "BOT_UNIX": CONTAINER_SOCKET,
            "HOME": "/tmp",
            **self.env,
            OUTPUT_MARKS_ENV: self._marks.new_container(),
        }  # a fresh token: the bot's marks (marks.py)
        if self.secret is not None:
            env["BOT_SECRET"] = self.secret.decode() if isinstance(self.secret, bytes) else self.secret
        command = (
            [part.replace("{unix}", CONTAINER_SOCKET) for part in self.command]
            if self.command is not None
            else None
        )
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
        tmpfs = {**volume_tmpfs(client, self.image, tmpfs["/tmp"], skip=(CONTAINER_SOCKET_DIR,)), **tmpfs}
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
                # the image's HEALTHCHECK never runs (the daemon would exec it on the host's
                # CPU, outside the container's limits), and its STOPSIGNAL is not the team's
                healthcheck=NO_HEALTHCHECK,
                stop_signal=STOP_SIGNAL,
                volumes={str(self._socket_dir): {"bind": CONTAINER_SOCKET_DIR, "mode": "rw"}},
                log_config=docker_mod.types.LogConfig(
                    type="json-file", config={"max-size": str(parse_size(lim.log_limit)), "max-file": "1"}
                ),
            )
        except docker_mod.errors.ImageNotFound:
            raise BotError(not_found(self.image)) from None
        except docker_mod.errors.APIError as e:
            if e.status_code == 404 and "image" in str(e.explanation or "").lower():
                raise BotError(not_found(self.image)) from None
            if runtime is not None and "runtime" in str(e.explanation or "").lower():
                check_runtime(runtime, client, field=where)  # says which runtimes there are
            raise BotError(
                f"Docker could not create a container from {self.image!r}: {e.explanation or e}"
            ) from None
        except docker_mod.errors.DockerException as e:
            raise DockerUnavailable(f"the Docker daemon failed: {short_error(e)}") from None
        try:
            container.start()
        except docker_mod.errors.DockerException as e:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise BotError(
                f"Docker could not start a container from {self.image!r}: "
                f"{getattr(e, 'explanation', None) or short_error(e)}"
            ) from None
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
            self._watch = FolderWatch(self._socket_dir, parse_size(self.limits.socket_folder), self._over_cap)
            self._watch.start()
        if self._http is None:
            # One HTTP client for the bot's life: the socket path stays the same
            # when a container is started again. Every connection is guarded.
            self._guard = SocketGuard(self._socket_dir / "bot.sock", self.uid)
            self._http = GuardedHttpBot(
                self._guard, name=self._name, secret=self.secret, max_body=self.max_body
            )
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
            lambda last: (
                f"on its unix socket (last: {last}); does the image serve HTTP on "
                f"$BOT_UNIX ({CONTAINER_SOCKET})? The SDK does it by itself; other programs: "
                "listen on that path"
            ),
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
