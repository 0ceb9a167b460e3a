"""How a container bot is confined: :class:`ContainerLimits` (a league's
``[containers]`` table, a bot's ``limits``), checked by :func:`check_limits`;
the uid a container runs as (:func:`bot_user`: never root); the file name of a
bot's socket folder and logs (:func:`file_key`: a plain lowercase key as it
is, anything else made safe *plus a hash of the exact text*, so ``"team a"``
and ``"team_a"`` never share one).

The bot that applies them is :class:`referee.bots.sandbox.container.ContainerBot`;
the runtime a container runs under, :mod:`referee.bots.sandbox.docker_daemon`.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Final

import msgspec

__all__ = [
    "GVISOR_MEMORY",
    "GVISOR_THREADS",
    "NODES_DIR",
    "NOBODY",
    "RUNTIME_NAME",
    "ContainerLimits",
    "bot_user",
    "check_limits",
    "file_key",
    "log_file_of",
    "log_files_of",
    "parse_size",
]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
#: A key used as a file name as it is: lowercase (no clash on a case-blind
#: file system), no "+" (what marks a hashed one), not starting with a dot.
_PLAIN_KEY: Final = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,59}$")
#: uid and gid a container runs as when the referee is root (nobody:nogroup).
NOBODY: Final = 65534
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS: Final = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
#: What a runtime's name looks like (a key of daemon.json's "runtimes").
RUNTIME_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
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
    #: :func:`~referee.bots.sandbox.docker_daemon.effective_runtime`); None: the daemon's default (runc). It must
    #: be registered in the daemon (``docker info`` lists its runtimes).
    runtime: str | None = None


def parse_size(text: str) -> int:
    """``"128m"`` -> 134217728 bytes; ValueError when it is not a size."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f'expected a size like "128m", "1g" or "512k", got {text!r}')
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def check_limits(limits: ContainerLimits) -> list[tuple[str, str]]:
    """What is wrong with `limits`: [(field, message)], empty when usable."""
    problems: list[tuple[str, str]] = []
    for key, minimum in (
        ("memory", 6 * 1024**2),
        ("tmpfs", 4096),
        ("log_limit", 1024),
        ("socket_folder", 4096),
    ):
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
        problems.append(
            ("pids", f"must be at least 4 (the init, the bot and its threads), got {limits.pids}")
        )
    if limits.ready_timeout_s <= 0:
        problems.append(
            ("ready_timeout_s", f"must be a positive number of seconds, got {limits.ready_timeout_s}")
        )
    if limits.network != "none":
        problems.append(
            (
                "network",
                f'only "none" is supported, got {limits.network!r}: Docker publishes no port of an '
                "internal network (so no 127.0.0.1-only TCP port), and reaching a container at its "
                "bridge address would let it reach the host as well; container bots talk over a "
                "unix socket",
            )
        )
    if limits.runtime is not None and not RUNTIME_NAME.match(limits.runtime):
        problems.append(
            (
                "runtime",
                f"expected the name of a runtime registered in the Docker daemon "
                f'("runsc" for gVisor), got {limits.runtime!r}',
            )
        )
    if limits.user is not None:
        if not re.match(r"^\d+(:\d+)?$", limits.user):
            problems.append(("user", f"expected a numeric uid or uid:gid, got {limits.user!r}"))
        elif 0 in _ids(limits.user):
            problems.append(
                (
                    "user",
                    f"{limits.user!r} names uid or gid 0 (root): a bot never runs as root; leave "
                    f"`user` unset (the referee's uid, or {NOBODY} when the referee is root) or name "
                    "an unprivileged uid:gid",
                )
            )
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


#: Under a run's output folder: a folder per cluster node whose file system
#: holds it (:mod:`referee.bots.cluster.nodepool`), with the node's sockets and logs.
NODES_DIR: Final = "nodes"


def log_files_of(out_dir: str | os.PathLike[str], key: str) -> list[Path]:
    """Every log of the container bot keyed `key` in the output folder
    `out_dir` that exists: this machine's (:func:`log_file_of`), then each
    cluster node's (``OUT/nodes/<node>/logs/``), by node."""
    out = Path(out_dir)
    found = [log_file_of(out, key)]
    nodes = out / NODES_DIR
    if nodes.is_dir():
        found += sorted(log_file_of(node, key) for node in nodes.iterdir())
    return [p for p in found if p.is_file()]
