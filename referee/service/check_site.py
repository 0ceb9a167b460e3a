"""Where a submission's build and admission check run (issue 37).

The pipeline (:mod:`referee.service.pipeline`) decides **what** is checked and
**in which order** (teams in turn, one waiting submission per team); a
:class:`CheckSite` decides **where** the work runs:

- :class:`LocalChecks` (the default, one machine): the coordinator's own
  Docker daemon builds the image and plays the check, as the pipeline always
  did.
- :class:`RayChecks` (``referee serve --executor ray --registry HOST:PORT``):
  a node of the Ray cluster with the fewest jobs in flight builds the upload
  on its own daemon and pushes the image to the registry, **by digest**; the
  coordinator pulls that digest onto its daemon (its ladder, finals, disk
  accounting and clean-up see the image as a local build) and a node (maybe
  another) pulls it by digest through its image cache and plays the check
  there, sending back the report and the check's folder (logs, replays).

A node lost mid-build or mid-check (its raylet or worker dies) has the job
taken again on another node (:meth:`~referee.tournament.executors.RayExecutor.call_node`);
with no node left, or a node whose daemon fails, it is a
:class:`~referee.service.health.ServiceFault`: the submission waits and is
tried again, never refused for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from ..admission import HOUSE_BOT, AdmissionReport, AdmissionSettings, admit
from ..bots.cluster.registry import ClusterError, ImageCache, PinnedImage
from ..bots.factory import BotSpec
from ..bots.sandbox.container_limits import ContainerLimits
from ..bots.sandbox.instance import INSTANCE_LABEL, VERSION_LABEL, Instance
from .health import ServiceFault, docker_ok
from .settings import Settings

log = logging.getLogger("referee.service.check_site")

T = TypeVar("T")


async def _in_daemon_thread(fn: Callable[[], T]) -> T:
    """`fn()` in a daemon thread of its own, awaited: unlike ``asyncio.to_thread``
    (the loop's pool, which the loop's end and the process's exit wait for), a
    call that never returns leaves a stop free to finish; cancelled, its result
    is dropped."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def body() -> None:
        try:
            result, error = fn(), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting task as it is
            result, error = None, e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no one waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=body, name="check-site-join", daemon=True).start()
    return await done


__all__ = ["BuildLimits", "CheckSite", "LocalChecks", "Made", "RayChecks", "make_image"]


class BuildLimits(msgspec.Struct, kw_only=True, frozen=True):
    """The service's bounds on making an image (``referee serve``'s settings)."""

    timeout_s: float
    max_image_unpacked: int
    min_free_disk: int
    max_build_growth: int

    @classmethod
    def of(cls, settings: Settings) -> BuildLimits:
        """The bounds `settings` set."""
        return cls(
            timeout_s=settings.build_timeout_s,
            max_image_unpacked=settings.max_image_unpacked,
            min_free_disk=settings.min_free_disk,
            max_build_growth=settings.max_build_growth,
        )


class Made(msgspec.Struct, kw_only=True):
    """What making an image gave: its id (None: refused, `reason` says why) and the build log."""

    image_id: str | None
    log: str = ""
    reason: str | None = None


def make_image(
    kind: str,
    upload: Path,
    *,
    tid: int,
    sid: int,
    version: int,
    instance: Instance,
    limits: ContainerLimits,
    bounds: BuildLimits,
    room_dir: Path,
    client: Any,
) -> Made:
    """Load (``kind`` "archive") or build (``source``) the upload at `upload`
    on `client`'s daemon, tagged and labelled for team `tid`'s submission
    `sid` (the team's version `version`) of `instance` (blocking). `room_dir`: whose disk must keep
    ``bounds.min_free_disk`` free when an archive unpacks."""
    from ..bots.images.image_archive import load_image_archive
    from ..bots.images.source_build import build_source
    from .disk import check_room_to_load

    labels = {
        "referee.team": str(tid),
        "referee.submission": str(sid),
        VERSION_LABEL: str(version),
        INSTANCE_LABEL: instance.id,
    }
    tag = instance.team_tag(tid, version)
    if kind == "archive":
        try:
            daemon_root = str(client.info().get("DockerRootDir") or "") or None
        except Exception:  # noqa: BLE001 - the load says what is wrong with the daemon
            daemon_root = None
        result = load_image_archive(
            upload,
            tag=tag,
            labels=labels,
            client=client,
            timeout_s=bounds.timeout_s,
            max_unpacked=bounds.max_image_unpacked,
            # issue 32: the disk floor counts what the image unpacks to, before the daemon loads it
            before_load=lambda need: check_room_to_load(room_dir, bounds.min_free_disk, need, daemon_root),
        )
    else:
        result = build_source(
            upload,
            tag=tag,
            labels=labels,
            client=client,
            timeout_s=bounds.timeout_s,
            workdir=upload.parent,
            instance=instance,
            max_growth_bytes=bounds.max_build_growth,
            limits=limits,
        )
    return Made(image_id=result.image_id if result.ok else None, log=result.log, reason=result.reason)


class CheckSite(Protocol):
    """Where the pipeline's builds and checks run."""

    name: str
    #: The pipeline calls :meth:`warm` at its start, in the background (the cluster: join it, and
    #: each node makes its base images; its count is what ``--admission-workers`` defaults to).
    warm_at_start: bool

    async def build(
        self,
        kind: str,
        upload: Path,
        *,
        tid: int,
        sid: int,
        version: int,
        limits: ContainerLimits,
        bounds: BuildLimits,
        phases: dict[str, float] | None = None,
    ) -> Made:
        """The upload made into an image (its id), or why it is refused. A
        :class:`ServiceFault` when the service could not (then the submission
        waits). `phases`: where the time went is added there (seconds by name)."""
        ...

    async def find(self, image_id: str) -> str | None:
        """The image a submission recorded before a stop, where its check can reach it; None: gone."""
        ...

    async def accepted(self, image_id: str, tag: str, phases: dict[str, float] | None = None) -> None:
        """The image of an accepted submission on the coordinator's daemon as `tag` (its ladder plays it)."""
        ...

    def refused(self, image_id: str) -> None:
        """The image's submission is refused: whatever the site kept for it goes."""
        ...

    async def warm(self) -> int:
        """Wait until the base images the builds need are made where they run: how many places build."""
        ...

    async def check(
        self,
        spec: BotSpec,
        *,
        out_dir: Path,
        settings: AdmissionSettings,
        limits: ContainerLimits,
        seat_name: str,
        opponents: Sequence[str],
        house: BotSpec = HOUSE_BOT,
        phases: dict[str, float] | None = None,
    ) -> AdmissionReport:
        """:func:`referee.admission.admit` of `spec`, its folder `out_dir` on the coordinator."""
        ...

    async def close(self) -> None: ...


class LocalChecks:
    """Everything on the coordinator's own Docker daemon (one machine: the default)."""

    name = "local"
    warm_at_start = False

    def __init__(self, instance: Instance, room_dir: Path) -> None:
        self.instance = instance
        self.room_dir = room_dir

    async def build(
        self,
        kind: str,
        upload: Path,
        *,
        tid: int,
        sid: int,
        version: int,
        limits: ContainerLimits,
        bounds: BuildLimits,
        phases: dict[str, float] | None = None,
    ) -> Made:
        return await asyncio.to_thread(self._build, kind, upload, tid, sid, version, limits, bounds)

    async def find(self, image_id: str) -> str | None:
        return await asyncio.to_thread(_local_image, image_id)

    async def accepted(self, image_id: str, tag: str, phases: dict[str, float] | None = None) -> None:
        return None  # built here, tagged so

    def refused(self, image_id: str) -> None:
        return None

    async def warm(self) -> int:
        """This daemon's base images for source builds (Python's, with the SDK), made unless made."""
        from ..bots.images.source_build import ensure_sdk_image

        await asyncio.to_thread(ensure_sdk_image, _client(), instance=self.instance)
        return 1

    def _build(
        self,
        kind: str,
        upload: Path,
        tid: int,
        sid: int,
        version: int,
        limits: ContainerLimits,
        bounds: BuildLimits,
    ) -> Made:
        client = _client()
        return make_image(
            kind,
            upload,
            tid=tid,
            sid=sid,
            version=version,
            instance=self.instance,
            limits=limits,
            bounds=bounds,
            room_dir=self.room_dir,
            client=client,
        )

    async def check(
        self,
        spec: BotSpec,
        *,
        out_dir: Path,
        settings: AdmissionSettings,
        limits: ContainerLimits,
        seat_name: str,
        opponents: Sequence[str],
        house: BotSpec = HOUSE_BOT,
        phases: dict[str, float] | None = None,
    ) -> AdmissionReport:
        return await admit(
            spec,
            out_dir=out_dir,
            settings=settings,
            limits=limits,
            seat_name=seat_name,
            opponents=opponents,
            house=house,
            instance=self.instance,
        )

    async def close(self) -> None:
        return None


# ------------------------------------------------------------------ on the cluster


class BuildJob(msgspec.Struct, kw_only=True):
    kind: str
    #: The upload's file name (its suffix tells the archive's kind) and bytes.
    filename: str
    upload: bytes
    #: Instead of `upload`'s bytes: where the upload is (sent to the coordinator's own node, which
    #: reads it there), and its size.
    path: str = ""
    size: int = 0
    tid: int
    sid: int
    #: The team's number of the version (its image's tag and label); 0: as the submission id (older coordinators).
    version: int = 0
    instance: str
    limits: ContainerLimits
    bounds: BuildLimits
    #: Push the built image to the registry before answering (older coordinators); False: the
    #: coordinator asks for it (:meth:`CheckWorker.push`) when its own daemon does not have it.
    push: bool = True


class CheckJob(msgspec.Struct, kw_only=True):
    spec: BotSpec
    image: PinnedImage
    settings: AdmissionSettings
    limits: ContainerLimits
    seat_name: str
    opponents: list[str]
    #: The service's instance: the check's containers carry its names and labels, not the node's.
    instance: str = ""


class NodeReply(msgspec.Struct, kw_only=True):
    """A node's answer. `fault`: the node could not do it (its daemon, the
    registry): the service's fault, never the team's."""

    made: Made | None = None
    image: PinnedImage | None = None
    report: AdmissionReport | None = None
    #: The check's folder (logs, replays), a gzip'd tar.
    folder: bytes = b""
    fault: str | None = None
    docker: bool = False
    #: The node's id (which node did it).
    node: str = ""
    #: Where the node's time went (seconds): ``node_build``, ``push``, ``fetch``, ``node_check``.
    seconds: dict[str, float] = {}
    #: The node could not read the upload at the job's `path`: send its bytes.
    need_bytes: bool = False
    #: (A warm-up's answer.) The node reads an upload at a job's `path`: a node of an older
    #: install, which would build an empty upload, answers without it and gets the bytes.
    reads_paths: bool = False


#: An upload this large (bytes) is built on the coordinator's own Ray node when it can (an image's
#: ``docker save`` archive, tens to hundreds of MB: shipping it to another node took up to 1.6 s in a rush).
LARGE_UPLOAD = 8 * 1024 * 1024

_ENC = msgspec.msgpack.Encoder()
_BUILD = msgspec.msgpack.Decoder(BuildJob)
_CHECK = msgspec.msgpack.Decoder(CheckJob)
_REPLY = msgspec.msgpack.Decoder(NodeReply)


def _pack(folder: Path) -> bytes:
    """`folder` as a gzip'd tar (its socket folders left out: nothing to read there)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            if entry.name != "sockets":
                tar.add(entry, arcname=entry.name)
    return buf.getvalue()


def _unpack(data: bytes, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    if data:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(folder, filter="data")


class CheckWorker:
    """A Ray actor body, one per node (pinned there): builds uploads and plays
    admission checks on the node's own Docker daemon (``DOCKER_HOST`` of the
    node), images through the registry by digest.

    The node keeps what it built until its check (sent to the same node: no
    pull); then an accepted image stays in the node's image cache (bounded by
    ``REFEREE_NODE_IMAGE_CACHE`` with what it pulls, so its ladder games
    reuse it) and a refused one is removed. :meth:`warm` makes the base
    images the builds need when the node joins, once."""

    def __init__(self) -> None:
        import threading

        self._cache: ImageCache | None = None
        self._instances: dict[str, Instance] = {}
        #: The images this node built and has not checked yet: image id → the instance that built it.
        self._built: dict[str, Instance] = {}
        #: One warm-up at a time (the first builds wait for it rather than make the base images again).
        self._warming = threading.Lock()
        self._warm: set[str] = set()

    def _node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def _instance(self, inst: str) -> Instance:
        if inst not in self._instances:
            self._instances[inst] = Instance(inst)
        return self._instances[inst]

    async def warm(self, inst: str, registry: str | None = None) -> bytes:
        """Make instance `inst`'s base images (Python's, with the SDK) on this
        node's daemon, unless made already: what every source build starts FROM;
        pushed to `registry`, so that a build's push sends the bot's own layers only."""
        reply = await asyncio.to_thread(self._warm_up, inst, registry)
        reply.reads_paths = True
        return _ENC.encode(reply)

    def _warm_up(self, inst: str, registry: str | None = None) -> NodeReply:
        from ..bots.cluster.registry import Registry
        from ..bots.images.source_build import ensure_sdk_image
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client

        node = self._node()
        t0 = time.perf_counter()
        with self._warming:
            if inst in self._warm:
                return NodeReply(node=node)
            try:
                client = docker_client()
                sdk = ensure_sdk_image(client, instance=self._instance(inst))
                if registry is not None:
                    Registry(registry, self._instance(inst)).push(client, sdk)
            except DockerUnavailable as e:
                return NodeReply(
                    fault=f"Docker is not reachable on node {node[:12]}: {e}", docker=True, node=node
                )
            except Exception as e:  # noqa: BLE001 - the node's daemon: the first build says it again
                return NodeReply(fault=f"node {node[:12]} could not make its base images: {e}", node=node)
            self._warm.add(inst)
        return NodeReply(node=node, seconds={"warm": time.perf_counter() - t0})

    async def build(self, job_bytes: bytes, registry: str) -> bytes:
        job = _BUILD.decode(job_bytes)
        return _ENC.encode(await asyncio.to_thread(self._build, job, registry))

    def _build(self, job: BuildJob, registry: str) -> NodeReply:
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client

        node = self._node()
        try:
            client = docker_client()
        except DockerUnavailable as e:
            return NodeReply(
                fault=f"Docker is not reachable on node {node[:12]}: {e}", docker=True, node=node
            )
        if job.kind == "source":
            self._warm_up(job.instance, registry)  # joined before this instance's first job: now
        inst = self._instance(job.instance)
        work = Path(tempfile.mkdtemp(prefix="referee-node-build-"))
        seconds: dict[str, float] = {}
        try:
            upload = work / Path(job.filename).name
            if job.path:  # the coordinator's upload, on this machine
                try:
                    shutil.copyfile(job.path, upload)
                    if (size := upload.stat().st_size) != job.size:
                        raise OSError(f"{size} bytes, not {job.size}")
                except OSError as e:
                    return NodeReply(
                        fault=f"node {node[:12]} cannot read the upload at {job.path}: {e}",
                        node=node,
                        need_bytes=True,
                    )
            else:
                upload.write_bytes(job.upload)
            t0 = time.perf_counter()
            try:
                made = make_image(
                    job.kind,
                    upload,
                    tid=job.tid,
                    sid=job.sid,
                    version=job.version or job.sid,
                    instance=inst,
                    limits=job.limits,
                    bounds=job.bounds,
                    room_dir=work,
                    client=client,
                )
            except ServiceFault as e:
                return NodeReply(fault=f"node {node[:12]}: {e.cause}", docker=e.docker, node=node)
            seconds["node_build"] = time.perf_counter() - t0
            if made.image_id is None:
                if (cause := docker_ok()) is not None:  # the node's daemon gone while it built
                    return NodeReply(fault=f"node {node[:12]}: {cause}", docker=True, node=node)
                return NodeReply(made=made, node=node, seconds=seconds)
            # Kept here for its check (sent to this node: no pull), then cached or removed.
            self._built[made.image_id] = inst
            if not job.push:
                pinned = PinnedImage(image_id=made.image_id)
                return NodeReply(made=made, image=pinned, node=node, seconds=seconds)
            reply = self._push(made.image_id, registry)
            if reply.fault is None:
                reply.made = made
                reply.seconds = {**seconds, **reply.seconds}
            return reply
        finally:
            shutil.rmtree(work, ignore_errors=True)

    async def push(self, image_id: str, registry: str) -> bytes:
        """Push `image_id`, which this node built, to `registry` by digest (the
        coordinator's daemon does not have it: it pulls it from there once accepted,
        and another node from there if this one is lost before the check)."""
        return _ENC.encode(await asyncio.to_thread(self._push, image_id, registry))

    def _push(self, image_id: str, registry: str) -> NodeReply:
        from ..bots.cluster.registry import Registry
        from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client, remove_own_tags

        node = self._node()
        instance = self._built.get(image_id)
        if instance is None:  # a call taken to another node after the builder was lost
            return NodeReply(
                fault=f"node {node[:12]} did not build image {image_id[:19]} (the node that did is "
                "lost): the submission is built again",
                node=node,
            )
        t0 = time.perf_counter()
        try:
            client = docker_client()
            pinned = Registry(registry, instance).push(client, image_id)
        except (ClusterError, DockerUnavailable) as e:
            self._built.pop(image_id, None)
            with contextlib.suppress(Exception):  # the submission is built again: this one goes
                remove_own_tags(docker_client(), instance, image_id)
            return NodeReply(fault=f"node {node[:12]}: {e}", node=node)
        return NodeReply(image=pinned, node=node, seconds={"push": time.perf_counter() - t0})

    async def check(self, job_bytes: bytes) -> bytes:
        job = _CHECK.decode(job_bytes)
        node = self._node()
        seconds: dict[str, float] = {}
        report: AdmissionReport | None = None
        t0 = time.perf_counter()
        try:
            try:
                image_id = await asyncio.to_thread(self._ensure, job.image)
            except (ClusterError, ServiceFault) as e:
                why = str(e)
                if job.image.ref is None:  # never pushed: on the coordinator's daemon, for its node
                    why = (
                        f"image {job.image.image_id[:19]} is on the coordinator's Docker daemon, not "
                        "this node's (the node meant for its check was lost): the check is taken again"
                    )
                return _ENC.encode(NodeReply(fault=f"node {node[:12]}: {why}", node=node))
            except Exception as e:  # noqa: BLE001 - the node's daemon
                return _ENC.encode(NodeReply(fault=f"node {node[:12]}: {e}", docker=True, node=node))
            seconds["fetch"] = time.perf_counter() - t0
            work = Path(tempfile.mkdtemp(prefix="referee-node-check-"))
            try:
                t0 = time.perf_counter()
                report = await admit(
                    msgspec.structs.replace(job.spec, image=image_id),
                    out_dir=work,
                    settings=job.settings,
                    limits=job.limits,
                    seat_name=job.seat_name,
                    opponents=job.opponents,
                    instance=self._instance(job.instance) if job.instance else None,
                )
                seconds["node_check"] = time.perf_counter() - t0
                if not report.ok and (cause := await asyncio.to_thread(docker_ok)) is not None:
                    report = None
                    return _ENC.encode(NodeReply(fault=f"node {node[:12]}: {cause}", docker=True, node=node))
                folder = await asyncio.to_thread(_pack, work)
                return _ENC.encode(NodeReply(report=report, folder=folder, node=node, seconds=seconds))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        finally:
            await asyncio.to_thread(self._checked, job.image, report)

    def _checked(self, image: PinnedImage, report: AdmissionReport | None) -> None:
        """The check of an image this node built is over: accepted, the image
        joins the node's cache (bounded, its games reuse it); refused, or not
        checked (the service takes it again), it goes."""
        from ..bots.sandbox.docker_daemon import remove_own_tags

        inst = self._built.pop(image.image_id, None)
        if inst is None or self._cache is None:
            return
        with contextlib.suppress(Exception):  # best effort: the daemon may be busy or gone
            if report is None or not report.ok:
                remove_own_tags(self._cache.client, inst, image.image_id)
            elif image.ref is not None:
                self._cache.adopt(image)
            # accepted and never pushed: the coordinator's daemon has it (this node's is the
            # coordinator's, most likely): the coordinator tags it, as its own build

    def _ensure(self, image: PinnedImage) -> str:
        from ..bots.sandbox.docker_daemon import docker_client

        if self._cache is None:
            self._cache = ImageCache(docker_client())
        return self._cache.ensure(image)


def bring_home(client: Any, image: PinnedImage, tag: str) -> None:
    """The image `image` names on the coordinator's daemon (`client`), pulled
    by digest unless it is there, tagged `tag` (blocking). ServiceFault when it cannot."""
    from ..bots.sandbox.docker_daemon import docker_module

    docker_mod = docker_module()
    try:
        try:
            have = str(client.images.get(image.image_id).id)
        except docker_mod.errors.ImageNotFound:
            have = None
        if have != image.image_id:
            assert image.ref is not None
            for line in client.api.pull(image.ref, stream=True, decode=True):
                if "error" in line or "errorDetail" in line:
                    detail = (line.get("errorDetail") or {}).get("message") or line.get("error")
                    raise ServiceFault(f"the coordinator cannot pull {image.ref}: {detail}")
            have = str(client.images.get(image.ref).id)
            if have != image.image_id:
                raise ServiceFault(f"{image.ref} gave image {have}, not {image.image_id} as built: refused")
        client.images.get(image.image_id).tag(*tag.rsplit(":", 1))
        with contextlib.suppress(Exception):  # the digest's name: the team's tag is what keeps it
            if image.ref is not None:
                client.images.remove(image.ref, noprune=True)
    except docker_mod.errors.DockerException as e:
        raise ServiceFault(f"Docker failed on the coordinator: {e}", docker=True) from None


def _add(phases: dict[str, float] | None, name: str, seconds: float) -> None:
    if phases is not None:
        phases[name] = phases.get(name, 0.0) + max(0.0, seconds)


class RayChecks:
    """Builds and checks on the nodes of the service's Ray cluster, images
    through `registry` (``HOST:PORT``), by digest. `executor` is a
    :class:`~referee.tournament.executors.RayExecutor` whose node actors are
    :class:`CheckWorker` s (it picks the node with the fewest jobs in flight,
    and takes a job again elsewhere when a node dies).

    Each image crosses the registry once on its way to a verdict: the node
    that built it pushes it and checks it (no pull); the coordinator pulls it
    home only once it is accepted (:meth:`accepted`: its ladder plays it). A
    node warms its base images when it joins (:meth:`CheckWorker.warm`)."""

    name = "ray"
    warm_at_start = True

    def __init__(self, instance: Instance, address: str | None, registry: str) -> None:
        self.instance = instance
        self.address = address
        self.registry = registry
        #: Made at the first job or at :meth:`start` (as a run's executor is): a cluster down at
        #: the service's start stops no one; the first submission waits until the cluster answers.
        self.executor: Any = None
        self._joining = asyncio.Lock()
        #: Which node did each build and check (by submission: "build"/"check" → node id), for tests.
        self.where: dict[tuple[int, str], str] = {}
        #: The submissions whose upload a node read where it lies (the rest were sent whole).
        self.read_in_place: set[int] = set()
        #: What the nodes built and pushed, by image id: the image by digest and the node that has it.
        self._pushed: dict[str, tuple[PinnedImage, str]] = {}
        #: The nodes' warm-ups in flight (started when each joins).
        self._warming: dict[str, Any] = {}

    async def _executor(self) -> Any:
        from ..tournament.executors import ExecutorError, RayExecutor

        async with self._joining:
            if self.executor is None:
                try:
                    # in a daemon thread, not the loop's pool: a join that hangs (Ray retries a
                    # silent head for minutes) must never hold the service's stop
                    self.executor = await _in_daemon_thread(
                        lambda: RayExecutor(
                            address=self.address, workers=0, registry=self.registry, node_body=CheckWorker
                        )
                    )
                except ExecutorError as e:
                    raise ServiceFault(f"the cluster could not take the job: {e}") from None
                self.executor.on_join = self._joined
            return self.executor

    def _joined(self, node: str, worker: Any) -> None:
        """A node joined: its base images are made now, not at its first build."""
        self._warming[node] = worker.warm.remote(self.instance.id, self.registry)

    async def warm(self) -> int:
        """Join the cluster, and wait until every live node has its base images: the live nodes' count."""
        executor = await self._executor()
        await executor.refresh()
        for node in list(self._warming):
            reply = await self._warmed(node)
            if reply is None:
                continue
            if reply.fault is not None:
                log.warning("%s", reply.fault)
            elif "warm" in reply.seconds:
                log.info("node %s: base images made in %.1f s", node[:12], reply.seconds["warm"])
        return len(executor.nodes)

    async def _warmed(self, node: str) -> NodeReply | None:
        """`node`'s warm-up answer (waited for); None when it never warmed or was lost warming."""
        ref = self._warming.get(node)
        if ref is None:
            return None
        try:
            return _REPLY.decode(await ref)
        except Exception as e:  # noqa: BLE001 - a node lost while it warmed: the next build warms another
            log.warning("node %s could not warm up: %s", node[:12], e)
            return None

    async def _reply(self, method: str, *args: Any, prefer: str | None = None) -> NodeReply:
        """A node's answer to `method`, a fault included; :class:`ServiceFault` when no node takes it."""
        from ..tournament.executors import ExecutorError

        executor = await self._executor()
        try:
            raw, _ = await executor.call_node(method, *args, prefer=prefer)
        except ExecutorError as e:
            raise ServiceFault(f"the cluster could not take the job: {e}") from None
        return _REPLY.decode(raw)

    async def _call(self, method: str, *args: Any, prefer: str | None = None) -> NodeReply:
        """A node's answer to `method`; :class:`ServiceFault` for its fault."""
        reply = await self._reply(method, *args, prefer=prefer)
        if reply.fault is not None:
            raise ServiceFault(reply.fault, docker=False)
        return reply

    async def build(
        self,
        kind: str,
        upload: Path,
        *,
        tid: int,
        sid: int,
        version: int,
        limits: ContainerLimits,
        bounds: BuildLimits,
        phases: dict[str, float] | None = None,
    ) -> Made:
        executor = await self._executor()
        size = (await asyncio.to_thread(upload.stat)).st_size
        # A large upload (an image's archive) is built on the coordinator's own node when that node
        # is no busier than the others: the node reads the file there, no bytes cross Ray
        home = executor.home if size >= LARGE_UPLOAD else None
        if home is not None and await executor.pick(lean=home) != home:
            home = None
        if home is not None and not ((warmed := await self._warmed(home)) and warmed.reads_paths):
            home = None  # a node of an older install: it would build an empty upload
        job = BuildJob(
            kind=kind,
            filename=upload.name,
            upload=b"",
            path=str(upload.resolve()),
            size=size,
            tid=tid,
            sid=sid,
            version=version,
            instance=self.instance.id,
            limits=limits,
            bounds=bounds,
            push=False,
        )
        t0 = time.perf_counter()
        reply, in_place = await self._build_on(job, home)
        self._timed(phases, reply, time.perf_counter() - t0)
        if in_place:
            self.read_in_place.add(sid)
        self.where[(sid, "build")] = reply.node
        assert reply.made is not None
        if (pinned := reply.image) is not None:
            if pinned.ref is None and await asyncio.to_thread(_local_image, pinned.image_id) is None:
                # built on another daemon than the coordinator's: through the registry, by digest
                # (the coordinator pulls it from there once accepted, another node if this one is lost)
                t0 = time.perf_counter()
                pushed = await self._call("push", pinned.image_id, self.registry, prefer=reply.node)
                self._timed(phases, pushed, time.perf_counter() - t0)
                assert pushed.image is not None
                pinned = pushed.image
            self._pushed[pinned.image_id] = (pinned, reply.node)
        return reply.made

    async def _build_on(self, job: BuildJob, home: str | None) -> tuple[NodeReply, bool]:
        """`job` built on the coordinator's own node `home`, which reads the upload
        at its path; with the upload's bytes on any node when `home` is None or
        cannot read it there after all (another user, another mount). The
        node's reply, and whether it read the upload in place."""
        if home is not None:
            reply = await self._reply("build", _ENC.encode(job), self.registry, prefer=home)
            if reply.fault is None:
                return reply, True
            if not reply.need_bytes:
                raise ServiceFault(reply.fault, docker=False)
            log.warning("%s: its bytes are sent instead", reply.fault)
        data = await asyncio.to_thread(Path(job.path).read_bytes)
        job = msgspec.structs.replace(job, upload=data, path="")
        return await self._call("build", _ENC.encode(job), self.registry), False

    @staticmethod
    def _timed(phases: dict[str, float] | None, reply: NodeReply, total: float) -> None:
        """The node's phases, and what the call cost besides (Ray, the upload's or folder's bytes)."""
        for name, seconds in reply.seconds.items():
            _add(phases, name, seconds)
        _add(phases, "transfer", total - sum(reply.seconds.values()))

    async def find(self, image_id: str) -> str | None:
        """`image_id` where its check can reach it (resumed after a restart): on
        the coordinator's daemon, else in the registry (as its node pushed it,
        brought home here to be pushed again by digest); None when it is gone."""
        from ..bots.cluster.registry import Registry

        if (have := await asyncio.to_thread(_local_image, image_id)) is not None:
            return have
        if image_id in self._pushed:
            return image_id
        ref = f"{Registry(self.registry, self.instance).repository}:{image_id.removeprefix('sha256:')[:12]}"
        try:
            await asyncio.to_thread(
                bring_home,
                _client(),
                PinnedImage(image_id=image_id, ref=ref),
                self.instance.keep_tag(image_id),
            )
        except ServiceFault as e:
            log.warning("image %s is not in the registry: %s", image_id[:19], e.cause)
            return None
        return image_id

    async def accepted(self, image_id: str, tag: str, phases: dict[str, float] | None = None) -> None:
        """The accepted image on the coordinator's daemon as `tag` (its ladder,
        finals, disk accounting and clean-up see it as a local build): pulled by
        digest now, once. A :class:`ServiceFault` when it cannot (the submission waits)."""
        pinned = self._pushed.get(image_id, (None, ""))[0]
        t0 = time.perf_counter()
        if pinned is None:  # resumed: home already (find), or never pushed
            pinned = PinnedImage(image_id=image_id)
        await asyncio.to_thread(bring_home, _client(), pinned, tag)
        self._pushed.pop(image_id, None)
        _add(phases, "pull", time.perf_counter() - t0)

    def refused(self, image_id: str) -> None:
        self._pushed.pop(image_id, None)

    async def check(
        self,
        spec: BotSpec,
        *,
        out_dir: Path,
        settings: AdmissionSettings,
        limits: ContainerLimits,
        seat_name: str,
        opponents: Sequence[str],
        house: BotSpec = HOUSE_BOT,
        phases: dict[str, float] | None = None,
    ) -> AdmissionReport:
        """On the node that built the image (another when that one is lost, which
        pulls it by digest): the house bot plays as the service's own program there
        (`house`, the coordinator's image of it, is on the coordinator's daemon only)."""
        del house
        from ..tournament.executors import ExecutorError

        assert spec.image is not None
        executor = await self._executor()
        pinned, built_on = self._pushed.get(spec.image, (None, None))
        if pinned is not None and pinned.ref is None and built_on not in executor.nodes:
            pinned = None  # built on the coordinator's daemon by a node since lost: pushed from here
        if pinned is None:  # resumed after a restart, or an image named on the server: pushed from here
            try:
                pinned = await executor.pin(spec.image)
            except ExecutorError as e:
                raise ServiceFault(str(e)) from None
        job = CheckJob(
            spec=spec,
            image=pinned,
            settings=settings,
            limits=limits,
            seat_name=seat_name,
            opponents=list(opponents),
            instance=self.instance.id,
        )
        t0 = time.perf_counter()
        reply = await self._call("check", _ENC.encode(job), prefer=built_on)
        self._timed(phases, reply, time.perf_counter() - t0)
        sid = int(out_dir.name.removeprefix("check-")) if out_dir.name.startswith("check-") else -1
        self.where[(sid, "check")] = reply.node
        assert reply.report is not None
        await asyncio.to_thread(_unpack, reply.folder, out_dir)
        return reply.report

    async def close(self) -> None:
        if self.executor is not None:
            await self.executor.close()


def _client() -> Any:
    from ..bots.sandbox.docker_daemon import DockerUnavailable, docker_client

    try:
        return docker_client()
    except DockerUnavailable as e:
        raise ServiceFault(f"Docker is not reachable: {e}", docker=True) from None


def _local_image(image_id: str) -> str | None:
    """The image's id when the coordinator's daemon has it (blocking); None when it is gone."""
    from ..bots.sandbox.docker_daemon import docker_module

    client = _client()
    try:
        return str(client.images.get(image_id).id)
    except docker_module().errors.ImageNotFound:
        return None


def site_for(settings: Settings, instance: Instance, room_dir: Path) -> CheckSite:
    """The site ``referee serve``'s options name: the cluster with ``--executor
    ray --registry``, else this machine. (Without a registry the nodes could
    not get what another node built: builds stay here.)"""
    if settings.executor == "ray" and settings.executor_registry:
        return RayChecks(instance, settings.executor_address, settings.executor_registry)
    return LocalChecks(instance, room_dir)
