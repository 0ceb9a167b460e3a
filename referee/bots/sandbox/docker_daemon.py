"""The Docker daemon, for container bots: the client (:func:`docker_client`),
the runtime a container runs under (:func:`effective_runtime`,
:func:`check_runtime`: gVisor's ``runsc`` or the daemon's default), images
(:func:`image_exists`; a tmpfs over each ``VOLUME`` an image declares), and the
clean-up of containers a referee left.

Every container the referee starts carries the labels ``referee.managed=1``
(:data:`MANAGED_LABEL`), ``referee.instance`` (the install's id,
:mod:`referee.bots.sandbox.instance`), ``referee.bot``, ``referee.out`` (the
tournament's output folder), ``referee.pid`` and ``referee.host`` (the
referee process that started it), so containers left by a referee that
crashed are found (:func:`find_containers`) and removed
(:func:`cleanup_containers`, ``referee cleanup``): only the instance's own,
never another install's on the same daemon.

The calls block: run them in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..base import BotError
from ..process import pid_alive
from .container_limits import RUNTIME_NAME, ContainerLimits
from .instance import INSTANCE_LABEL, Instance, current
from .socket_folder import CONTAINER_SOCKET_DIR, release_orphan_folder

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any
Container = Any

__all__ = [
    "MANAGED_LABEL",
    "RUNTIME_ENV",
    "DockerUnavailable",
    "check_runtime",
    "check_runtimes",
    "cleanup_containers",
    "daemon_runtimes",
    "docker_client",
    "docker_module",
    "effective_runtime",
    "find_containers",
    "image_exists",
    "is_gvisor",
    "not_found",
    "referee_alive",
    "set_runtime",
    "short_error",
    "volume_tmpfs",
]

#: The label every container the referee starts carries.
MANAGED_LABEL: Final = "referee.managed"
#: The environment variable that holds the operator's runtime (``--runtime``):
#: it applies to every container of this process and of the processes it
#: starts (local Ray workers included), over what a league file says.
RUNTIME_ENV: Final = "REFEREE_CONTAINER_RUNTIME"


def docker_module() -> Any:
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
            docker_mod = docker_module()
        except ImportError:
            raise DockerUnavailable(
                "the docker package is not installed: pip install 'referee[containers]'"
            ) from None
        try:
            client = docker_mod.from_env(timeout=30)
            client.ping()
        except Exception as e:  # noqa: BLE001 - every failure means "no daemon"
            raise DockerUnavailable(
                f"no Docker daemon answers at {where} ({short_error(e)}): start it (dockerd, or "
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
        raise DockerUnavailable(f"the Docker daemon did not answer ({short_error(e)})") from None
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
    if not RUNTIME_NAME.match(runtime):
        raise BotError(f'{field}: {runtime!r} is not a runtime\'s name ("runsc" for gVisor)')
    known, default = daemon_runtimes(client)
    if runtime in known:
        return
    raise BotError(
        f"{field}: the Docker daemon has no runtime {runtime!r} (it has: {', '.join(known) or 'none'}; "
        f'default {default}): register it in the daemon\'s daemon.json under "runtimes" and '
        'restart the daemon (for gVisor: {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": '
        '["--network=none", "--host-uds=create"]}}), or name one it has'
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


def short_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else type(error).__name__
    return first[:300]


def image_exists(image: str, client: DockerClient | None = None) -> bool:
    """Whether `image` is on this machine (never pulled); blocking."""
    docker_mod = docker_module()

    client = client or docker_client()
    try:
        client.images.get(image)
    except docker_mod.errors.ImageNotFound:
        return False
    return True


def not_found(image: str) -> str:
    """Why `image` cannot start, and what to do. An image pinned by its id
    (``sha256:…``: an uploaded version, a run's pinned image) can never be
    built again under that name: it was removed (pruned, or by hand), and
    only submitting the bot again brings a new one (issue 32)."""
    if image.startswith("sha256:") or "@sha256:" in image:
        return (
            f"image {image[:19]}… is no longer on this machine: it was removed (to save space, "
            "or by hand), and an image pinned by its id cannot be built again under that id; "
            "submit that bot again (or pick another version)"
        )
    return (
        f"image {image!r} is not on this machine (the referee never pulls): build it "
        f"(docker build -t {image} .) or load it (docker load -i bot.tar) first; "
        "`docker images` lists what is there"
    )


def volume_tmpfs(
    client: DockerClient, image: str, options: str, *, skip: Sequence[str] = ()
) -> dict[str, str]:
    """A tmpfs (mounted with `options`) over every ``VOLUME`` the image
    declares, so that none becomes writable host disk (Docker makes an
    anonymous volume under /var/lib/docker/volumes for one not covered);
    `skip`: paths mounted otherwise. BotError for a volume path Docker would
    not clean to an absolute one. Uploaded images with a VOLUME are refused
    (:func:`~referee.bots.images.image_archive.load_image_archive`): this covers the others
    (an admin-named image, house bots)."""
    import posixpath

    docker_mod = docker_module()
    try:
        volumes = client.images.get(image).attrs.get("Config", {}).get("Volumes") or {}
    except docker_mod.errors.NotFound:
        return {}  # create says so
    except docker_mod.errors.DockerException as e:
        raise DockerUnavailable(f"the Docker daemon failed: {short_error(e)}") from None
    out: dict[str, str] = {}
    for raw in volumes:
        path = posixpath.normpath(str(raw))
        if not path.startswith("/") or "\0" in path or "," in path or ":" in path:
            raise BotError(
                f"image {image!r} declares VOLUME {str(raw)[:200]!r}, which cannot be covered "
                "by a tmpfs: remove the VOLUME line from its Dockerfile"
            )
        path = "/" + path.lstrip("/")
        if path == "/":
            raise BotError(f"image {image!r} declares VOLUME '/': remove the VOLUME line from its Dockerfile")
        if path not in skip:
            out[path] = options
    return out


def referee_alive(labels: Mapping[str, str]) -> bool:
    """Whether the referee process that started a container still runs here."""
    if labels.get("referee.host") != socket.gethostname():
        return False
    try:
        pid = int(labels.get("referee.pid", ""))
    except ValueError:
        return False
    return pid_alive(pid)


def _label_filters(
    label_filter: Mapping[str, str] | Sequence[str] | str | None, instance: Instance | None = None
) -> list[str]:
    labels = [f"{MANAGED_LABEL}=1", (instance or current()).label_filter]
    if isinstance(label_filter, str):
        labels.append(label_filter)
    elif isinstance(label_filter, Mapping):
        labels += [f"{k}={v}" for k, v in label_filter.items()]
    elif label_filter is not None:
        labels += list(label_filter)
    return labels


def find_containers(
    label_filter: Mapping[str, str] | Sequence[str] | str | None = None,
    *,
    client: DockerClient | None = None,
    instance: Instance | None = None,
) -> list[Container]:
    """Containers `instance` (default: the process's) started, running or
    not, that match `label_filter` (``{"referee.out": "/path"}``,
    ``"referee.bot=greedy"`` or a list); blocking. Never another instance's."""
    client = client or docker_client()
    inst = instance or current()
    found = client.containers.list(all=True, filters={"label": _label_filters(label_filter, inst)})
    return [c for c in found if (c.labels or {}).get(INSTANCE_LABEL) == inst.id]


def remove_own_tags(client: DockerClient, instance: Instance, image_id: str) -> list[str]:
    """Remove every tag of `instance` on the image `image_id`, never by
    force: the image goes once nothing else names or uses it (another
    install's tag, or the same image uploaded by another team, keeps it; a
    tag a container holds stays for the next clean-up). The tags removed."""
    errors = docker_module().errors
    try:
        tags = list(client.images.get(image_id).tags or [])
    except errors.ImageNotFound:
        return []
    removed = []
    for tag in tags:
        if instance.owns_tag(tag):
            with contextlib.suppress(errors.APIError):
                client.images.remove(tag, force=False, noprune=False)
                removed.append(tag)
    return removed


def cleanup_containers(
    label_filter: Mapping[str, str] | Sequence[str] | str | None = None,
    *,
    orphans_only: bool = False,
    client: DockerClient | None = None,
    instance: Instance | None = None,
) -> list[str]:
    """Remove `instance`'s containers (default: the process's) matching
    `label_filter` (every one labelled ``referee.managed=1`` and
    ``referee.instance=<id>`` when None); their names. `orphans_only`: spare
    those whose referee process still runs on this host. Blocking."""
    docker_mod = docker_module()

    removed: list[str] = []
    freed: set[str] = set()  # socket folders of the containers removed
    kept: set[str] = set()  # and of those spared, which stay mounted
    for c in find_containers(label_filter, client=client, instance=instance):
        labels = c.labels or {}
        folders = _socket_folders(c) if labels.get("referee.host") == socket.gethostname() else set()
        if orphans_only and referee_alive(labels):
            kept |= folders
            continue
        with contextlib.suppress(docker_mod.errors.NotFound):
            c.remove(force=True, v=True)
            removed.append(str(c.name))
            freed |= folders
    # A referee that died (a node killed mid-run) never unmounted its bots'
    # socket-folder tmpfs: a mount left under the run's folder, which nothing
    # but root's umount removes. Its containers gone, so is the mount.
    for folder in sorted(freed - kept):
        with contextlib.suppress(OSError):
            release_orphan_folder(Path(folder))
    return removed


def _socket_folders(container: Container) -> set[str]:
    """The host folders bound at the bot's socket folder in `container`."""
    mounts = (getattr(container, "attrs", None) or {}).get("Mounts") or []
    return {
        str(m["Source"])
        for m in mounts
        if isinstance(m, dict) and m.get("Destination") == CONTAINER_SOCKET_DIR and m.get("Source")
    }
