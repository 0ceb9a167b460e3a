"""Container images on more than one machine: a registry, digests, a bounded cache.

A Ray cluster's nodes each run their own Docker daemon. The coordinator
(the service, ``referee tournament``) has every accepted image on its own
daemon; with ``--registry HOST:PORT`` it pushes each one there
(:meth:`Registry.push`) and names it **by digest** from then on
(:class:`PinnedImage`: ``HOST:PORT/referee-<instance>/bots@sha256:…`` and the
image's id). A node pulls by that digest before its first game with the bot
(:meth:`ImageCache.ensure`) and checks that what it got has the very image
id the coordinator pinned, so a re-tag (on the coordinator's daemon, in the
registry, on the node) can never swap a bot: a tag is never looked at again
once the game is planned.

A node keeps what it pulled, up to a bound on disk (``REFEREE_NODE_IMAGE_CACHE``,
default 20g: the sum of the pulled images' sizes); past it the least recently
used images that no container uses are removed. Images the node's daemon had
before (a node that shares the coordinator's daemon) are used as they are and
never removed. The cache's index (what it pulled, when each was last used) is
a small JSON file per daemon.

What can go wrong is said plainly: :class:`RegistryError` (the registry does
not answer, refuses a push, does not have a digest) and
:class:`ImageUnavailable` (a node cannot get an image) are errors of the
cluster, not of a bot: a run stops on them (resumably), it never charges the
bot a fault.

Docker talks to a registry on a loopback address (``127.0.0.1:5000``) over
plain HTTP by itself; any other address needs TLS, or the address in each
daemon's ``insecure-registries`` (see docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec

from ..base import BotError
from ..sandbox.container_limits import parse_size
from ..sandbox.docker_daemon import (
    DockerClient,
    DockerUnavailable,
    not_found,
)
from ..sandbox.docker_daemon import docker_module as _docker_module
from ..sandbox.docker_daemon import short_error as _short
from ..sandbox.instance import Instance, current

__all__ = [
    "CACHE_ENV",
    "DEFAULT_CACHE",
    "ClusterError",
    "ImageCache",
    "ImageUnavailable",
    "PinnedImage",
    "Registry",
    "RegistryError",
    "check_registry",
    "lru_victims",
]

#: The environment variable of a node that bounds its image cache (a size: ``"20g"``).
CACHE_ENV: Final = "REFEREE_NODE_IMAGE_CACHE"
DEFAULT_CACHE: Final = "20g"

_ADDRESS: Final = re.compile(
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):(\d{1,5})$"
)
_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")


class ClusterError(RuntimeError):
    """Images cannot reach the nodes: the cluster's fault, never a bot's."""


class RegistryError(ClusterError):
    """The registry cannot take or give an image (down, refusing, missing a digest)."""


class ImageUnavailable(ClusterError):
    """A node cannot have the image a game is pinned to."""


class PinnedImage(msgspec.Struct, frozen=True, kw_only=True):
    """An image as a game names it: never by tag.

    `image_id`: the image's id (``sha256:`` of its config) on the
    coordinator's daemon, which a pull by digest gives back unchanged.
    `ref`: ``HOST:PORT/repository@sha256:<manifest digest>`` in the registry;
    None without a registry (the nodes share the coordinator's daemon)."""

    image_id: str
    ref: str | None = None


def check_registry(text: str) -> str:
    """`text` as a registry address (``HOST:PORT``), or ValueError saying what one looks like."""
    address = text.strip()
    m = _ADDRESS.match(address)
    if m is None or not 0 < int(m.group(1)) < 65536:
        raise ValueError(
            f"--registry: expected HOST:PORT of a Docker registry (127.0.0.1:5000, "
            f"registry.school.example:443), got {text!r}"
        )
    return address


class Registry:
    """The registry at `address` (``HOST:PORT``) that `instance`'s images are
    pushed to, as ``HOST:PORT/referee-<instance>/bots:<12 hex of the id>``.

    :meth:`push` is blocking and remembers what it pushed (by image id) for the
    life of the object: a second push of the same image costs nothing."""

    def __init__(self, address: str, instance: Instance | None = None) -> None:
        self.address = check_registry(address)
        self.instance = instance or current()
        self.repository = f"{self.address}/referee-{self.instance.id}/bots"
        self._pushed: dict[str, PinnedImage] = {}
        self._gates: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        #: Seconds the pushes took, and how many there were (benchmarks).
        self.push_seconds = 0.0
        self.pushes = 0

    def __repr__(self) -> str:
        return f"Registry({self.address!r})"

    def _down(self, e: BaseException | str) -> RegistryError:
        text = e if isinstance(e, str) else _short(e)
        return RegistryError(
            f"the registry at {self.address} cannot take the image ({text}): is it running "
            f"(docker-registry serve CONFIG, or the compose service 'registry') and does "
            f"--registry {self.address} name it?"
        )

    def push(self, client: DockerClient, image: str) -> PinnedImage:
        """Push `image` (a tag or an id on `client`'s daemon) and name it by digest.

        Raises :class:`~referee.bots.base.BotError` when the image is not on
        the daemon, :class:`RegistryError` when the registry does not take it."""
        docker_mod = _docker_module()
        try:
            found = client.images.get(image)
        except docker_mod.errors.ImageNotFound:
            raise BotError(not_found(image)) from None
        except docker_mod.errors.DockerException as e:
            raise DockerUnavailable(f"the Docker daemon failed: {_short(e)}") from None
        image_id = str(found.id)
        with self._lock:
            gate = self._gates.setdefault(image_id, threading.Lock())
        with gate:  # one push per image, however many bots run it
            with self._lock:
                done = self._pushed.get(image_id)
            if done is not None:
                return done
            return self._push(client, found, image, image_id)

    def _push(self, client: DockerClient, found: Any, image: str, image_id: str) -> PinnedImage:
        docker_mod = _docker_module()
        tag = image_id.removeprefix("sha256:")[:12]
        t0 = time.perf_counter()
        try:
            found.tag(self.repository, tag)
            digest = None
            for line in client.api.push(self.repository, tag=tag, stream=True, decode=True):
                if "error" in line or "errorDetail" in line:
                    detail = (line.get("errorDetail") or {}).get("message") or line.get("error")
                    raise self._down(str(detail))
                aux = line.get("aux") or {}
                if isinstance(aux.get("Digest"), str):
                    digest = aux["Digest"]
        except docker_mod.errors.DockerException as e:
            raise self._down(e) from None
        finally:
            # The registry's tag on the coordinator is of no use once pushed:
            # the image keeps its own names (and the digest is what games use).
            with contextlib.suppress(Exception):
                client.images.remove(f"{self.repository}:{tag}", noprune=True)
        if digest is None or not _DIGEST.match(digest):
            raise self._down(f"the push of {image!r} named no digest")
        pinned = PinnedImage(image_id=image_id, ref=f"{self.repository}@{digest}")
        with self._lock:
            self._pushed[image_id] = pinned
            self.push_seconds += time.perf_counter() - t0
            self.pushes += 1
        return pinned


# ------------------------------------------------------------ the node's cache


class _Entry(msgspec.Struct):
    ref: str
    size: int
    used: float


def lru_victims(entries: dict[str, tuple[int, float]], cap: int, *, keep: Iterable[str] = ()) -> list[str]:
    """Which images to remove, least recently used first, so that the sizes
    of those left fit in `cap` bytes: `entries` is {image id: (size, last
    use)}; those in `keep` (in use, just pulled) are never chosen, even when
    the rest cannot be brought under the cap."""
    kept = set(keep)
    total = sum(size for size, _ in entries.values())
    out: list[str] = []
    for image_id, (size, _) in sorted(entries.items(), key=lambda kv: kv[1][1]):
        if total <= cap:
            break
        if image_id in kept:
            continue
        out.append(image_id)
        total -= size
    return out


def _daemon_key(client: DockerClient) -> str:
    base = str(
        getattr(getattr(client, "api", None), "base_url", "") or os.environ.get("DOCKER_HOST", "local")
    )
    return hashlib.sha256(base.encode()).hexdigest()[:12]


class ImageCache:
    """The images a node pulled for games, on its daemon (`client`), at most
    `cap` bytes (default: ``$REFEREE_NODE_IMAGE_CACHE``, else 20g), least
    recently used removed first. `index`: where what it pulled is written
    (default: a file per daemon under the temp dir). Blocking; thread-safe."""

    def __init__(
        self,
        client: DockerClient,
        *,
        cap: int | str | None = None,
        index: str | os.PathLike[str] | None = None,
    ) -> None:
        self.client = client
        raw = cap if cap is not None else (os.environ.get(CACHE_ENV, "").strip() or DEFAULT_CACHE)
        try:
            self.cap = raw if isinstance(raw, int) else parse_size(raw)
        except ValueError as e:
            raise ValueError(f"{CACHE_ENV}: {e}") from None
        self.index = (
            Path(index)
            if index is not None
            else Path(tempfile.gettempdir()) / f"referee-image-cache-{_daemon_key(client)}.json"
        )
        self._lock = threading.Lock()
        self._pulling: dict[str, threading.Lock] = {}
        #: Pulls made, and the seconds they took (benchmarks).
        self.pulls = 0
        self.pull_seconds = 0.0
        #: Image ids removed to stay under the cap.
        self.evicted: list[str] = []

    def _read(self) -> dict[str, _Entry]:
        try:
            return msgspec.json.decode(self.index.read_bytes(), type=dict[str, _Entry])
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return {}

    def _write(self, entries: dict[str, _Entry]) -> None:
        self.index.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.index.parent, prefix=".image-cache-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(entries))
            os.replace(tmp, self.index)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def cached(self) -> dict[str, int]:
        """{image id: size} of what this cache pulled and still keeps."""
        with self._lock:
            return {k: e.size for k, e in self._read().items()}

    def _local_id(self, name: str) -> str | None:
        docker_mod = _docker_module()
        try:
            return str(self.client.images.get(name).id)
        except docker_mod.errors.ImageNotFound:
            return None
        except docker_mod.errors.DockerException as e:
            raise DockerUnavailable(f"the node's Docker daemon failed: {_short(e)}") from None

    def ensure(self, image: PinnedImage) -> str:
        """The id of `image` on this node's daemon, pulled by digest first when
        it is not there; the cache's least recently used images are then
        removed past the cap. Raises :class:`ImageUnavailable` saying why."""
        with self._lock:
            gate = self._pulling.setdefault(image.image_id, threading.Lock())
        with gate:
            if self._local_id(image.image_id) == image.image_id:
                self._touch(image.image_id)
                return image.image_id
            if image.ref is None:
                raise ImageUnavailable(
                    f"image {image.image_id[:19]} is not on this node's Docker daemon and the "
                    "coordinator names no registry: give it --registry HOST:PORT (the nodes pull "
                    "from there), or load the image on every node"
                )
            self._pull(image)
            self._after_pull(image)
            return image.image_id

    def adopt(self, image: PinnedImage) -> None:
        """Keep `image`, which this node's daemon made itself (a build) and
        pushed as `image.ref`, as if it had been pulled: bounded by the cap
        with the rest, least recently used removed first."""
        with self._lock:
            gate = self._pulling.setdefault(image.image_id, threading.Lock())
        with gate:
            self._after_pull(image)

    def _pull(self, image: PinnedImage) -> None:
        docker_mod = _docker_module()
        assert image.ref is not None
        registry = image.ref.split("/", 1)[0]
        t0 = time.perf_counter()
        try:
            for line in self.client.api.pull(image.ref, stream=True, decode=True):
                if "error" in line or "errorDetail" in line:
                    detail = (line.get("errorDetail") or {}).get("message") or line.get("error")
                    raise ImageUnavailable(self._cannot_pull(image, registry, str(detail)))
        except docker_mod.errors.DockerException as e:
            raise ImageUnavailable(self._cannot_pull(image, registry, _short(e))) from None
        got = self._local_id(image.ref)
        if got != image.image_id:
            with contextlib.suppress(Exception):
                self.client.images.remove(image.ref, noprune=False)
            raise ImageUnavailable(
                f"{image.ref} gave image {got} on this node, not {image.image_id} as the game is "
                "pinned to: refused (the registry does not hold what was pushed)"
            )
        with self._lock:
            self.pulls += 1
            self.pull_seconds += time.perf_counter() - t0

    @staticmethod
    def _cannot_pull(image: PinnedImage, registry: str, detail: str) -> str:
        return (
            f"this node cannot pull {image.ref} from the registry at {registry} ({detail}): "
            "is the registry running, and can this node reach it?"
        )

    def _touch(self, image_id: str) -> None:
        with self._lock:
            entries = self._read()
            if image_id in entries:
                entries[image_id].used = time.time()
                self._write(entries)

    def _in_use(self) -> set[str]:
        """Image ids of every container on the daemon, running or not (one
        listing: the SDK's ``containers.list`` inspects each container)."""
        try:
            return {str(c["ImageID"]) for c in self.client.api.containers(all=True) if c.get("ImageID")}
        except Exception:  # noqa: BLE001 - the daemon busy or gone
            return set(self._read())  # unsure: remove nothing

    def _present(self) -> set[str] | None:
        """Every image id on the daemon (one listing); None when it cannot say."""
        try:
            return {str(i["Id"]) for i in self.client.api.images(all=False)}
        except Exception:  # noqa: BLE001 - the daemon busy or gone
            return None

    def _after_pull(self, image: PinnedImage) -> None:
        docker_mod = _docker_module()
        assert image.ref is not None
        try:
            size = int(self.client.images.get(image.image_id).attrs.get("Size") or 0)
        except docker_mod.errors.DockerException:
            size = 0
        with self._lock:
            entries = self._read()
            entries[image.image_id] = _Entry(ref=image.ref, size=size, used=time.time())
            # Forget what someone else removed.
            present = self._present()
            if present is not None:
                entries = {k: e for k, e in entries.items() if k == image.image_id or k in present}
            victims = lru_victims(
                {k: (e.size, e.used) for k, e in entries.items()},
                self.cap,
                keep={image.image_id, *self._in_use()},
            )
            for victim in victims:
                try:
                    # By id, forced: it drops the digest reference and the tags of
                    # the instance (a tag keeps `docker image prune` off a live bot).
                    self.client.images.remove(victim, force=True, noprune=False)
                except docker_mod.errors.NotFound:
                    pass
                except docker_mod.errors.APIError:
                    continue  # a container took it meanwhile: kept, the next pull tries again
                entries.pop(victim, None)
                self.evicted.append(victim)
            self._write(entries)
