"""A ``docker save`` upload made into a pinned, runnable image; every team is hostile.

:func:`load_image_archive`: the output of ``docker save``. It is checked
(a plain tar, its headers read in bounded memory; a ``manifest.json``
naming exactly one image whose config and layers are in the archive, no
``ONBUILD``, no ``VOLUME``, this machine's OS and CPU; what its layers
unpack to, plain or gzip, counted and capped, 2 GiB by default:
:mod:`referee.bots.images.archives`) and a **copy** holding only
``manifest.json`` (its ``RepoTags`` removed), the config and the layers is
streamed to the daemon (``POST /images/load``).
The archive's own names (``RepoTags``, the ``repositories`` file, an OCI
``index.json``) never reach the daemon, so an archive that claims
``referee-base:<instance>`` or another team's tag renames nothing. The loaded
image is then given the service's labels by a build ``FROM`` its id that
only adds them (no ``RUN``, no network), with its ``HEALTHCHECK`` cleared
and its ``STOPSIGNAL`` reset (:data:`ADMITTED_CONFIG`), and is tagged with
the service's `tag`.

It returns a :class:`~referee.bots.images.builds.BuildResult` (see :mod:`referee.bots.images.builds`).
Blocking: call it with ``asyncio.to_thread`` from the web layer.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from . import archives
from .archives import DEFAULT_MAX_IMAGE_UNPACKED
from .builds import (
    CHUNK,
    LABEL_KEY,
    BuildLog,
    BuildResult,
    DaemonStream,
    DockerClient,
    Refused,
    TookTooLong,
    check_tag,
    clean_member_path,
    client_of,
    daemon_build,
    daemon_message,
    docker_errors,
    drop_untagged,
    file_sha256,
    image_labels,
    label_line,
    mb,
    tar_header,
    tar_padding,
)

__all__ = [
    "ADMITTED_CONFIG",
    "DEFAULT_LOAD_TIMEOUT_S",
    "DEFAULT_MAX_IMAGE_BYTES",
    "MAX_ARCHIVE_ENTRIES",
    "MAX_LAYERS",
    "load_bytes",
    "load_image_archive",
]

#: Largest ``docker save`` archive (the issue's default: 1 GiB).
DEFAULT_MAX_IMAGE_BYTES: Final = 1024**3
#: Time limit of loading a ``docker save`` archive (and labelling it).
DEFAULT_LOAD_TIMEOUT_S: Final = 300.0
#: Most layers of a loaded image (overlayfs stops at ~125 with the service's own).
MAX_LAYERS: Final = 100
#: Most entries in a ``docker save`` archive.
MAX_ARCHIVE_ENTRIES: Final = 10_000
#: A file-system block: the least disk a file takes (:func:`load_bytes`).
BLOCK: Final = 4096
#: What the labelling build resets of the image's config, so that the daemon
#: does no work on the team's behalf: no ``HEALTHCHECK`` (an exec every interval,
#: on the host's CPU), the usual ``STOPSIGNAL``. (``ONBUILD`` and ``VOLUME`` are
#: refused; ``ContainerBot`` overrides both of these at ``docker run`` as well.)
ADMITTED_CONFIG: Final = "HEALTHCHECK NONE\nSTOPSIGNAL SIGTERM\n"


class _Manifest(msgspec.Struct):
    Config: str
    Layers: list[str]
    RepoTags: list[str] | None = None


class _RootFS(msgspec.Struct):
    type: str = ""
    diff_ids: list[str] = []


class _ImageConfig(msgspec.Struct, rename={"on_build": "OnBuild", "labels": "Labels", "volumes": "Volumes"}):
    on_build: list[str] | None = None
    labels: dict[str, str] | None = None
    volumes: dict[str, Any] | None = None


class _Config(msgspec.Struct):
    rootfs: _RootFS
    architecture: str = ""
    os: str = ""
    config: _ImageConfig | None = None


def _resolve(members: Mapping[str, archives.Entry], name: str, what: str) -> archives.Entry:
    """The regular file `name` refers to (following symlinks inside the archive)."""
    path = clean_member_path(name)
    if path is None:
        raise Refused(
            f"manifest.json names {what} {name!r}, not a plain path inside the archive: "
            "upload the file docker save writes, unchanged"
        )
    for _ in range(8):
        info = members.get(path)
        if info is None:
            raise Refused(
                f"{what} {name!r} is missing from the archive: it is incomplete or was "
                "edited; upload the file `docker save IMAGE -o bot.tar` writes"
            )
        if info.isreg():
            return info
        if not info.issym():
            raise Refused(f"{what} {name!r} is not a file in the archive")
        target = clean_member_path(posixpath.join(posixpath.dirname(path), info.linkname))
        if target is None:
            raise Refused(f"{what} {name!r} links outside the archive")
        path = target
    raise Refused(f"{what} {name!r} is a loop of links")


def _daemon_platform(client: DockerClient) -> tuple[str, str]:
    try:
        version = client.version()
    except Exception:  # noqa: BLE001 - unknown: do not refuse on it
        return "", ""
    return str(version.get("Os") or ""), str(version.get("Arch") or "")


def _read_member(f: IO[bytes], info: archives.Entry, limit: int, what: str) -> bytes:
    if info.size > limit:
        raise Refused(f"{what} is {mb(info.size)}, more than {mb(limit)}: not a docker save archive?")
    f.seek(info.offset)
    data = f.read(info.size)
    if len(data) != info.size:
        raise Refused(f"{what} is cut short in the archive: upload it again")
    return data


def _index(f: IO[bytes], size: int) -> dict[str, archives.Entry]:
    """The entries of the archive `f` by their clean path, read in bounded
    memory (no name over 1024 characters is kept: docker save's are < 100)."""
    members: dict[str, archives.Entry] = {}
    for count, info in enumerate(archives.entries(archives.FileRegion(f, 0, size)), 1):
        if count > MAX_ARCHIVE_ENTRIES:
            raise Refused(
                f"the archive holds more than {MAX_ARCHIVE_ENTRIES} entries: not a docker save archive"
            )
        if info.sparse:
            raise Refused(
                "the archive holds a sparse file: upload the file `docker save IMAGE -o bot.tar` "
                "writes, unchanged"
            )
        if len(info.name) <= 1024 and (name := clean_member_path(info.name)) is not None:
            members[name] = info
    return members


def load_bytes(counts: list[archives.LayerCount], archive_size: int) -> int:
    """The disk a load takes at most: what the layers unpack to (a layer named
    twice counted twice), a file-system block per entry (a 10-byte file takes
    4 KiB), and the archive itself, which the daemon unpacks from a copy."""
    return sum(c.unpacked + c.files * BLOCK for c in counts) + archive_size


def _volumes(image_config: _ImageConfig) -> list[str]:
    return sorted(str(v) for v in image_config.volumes or {})


def _clean_archive(
    f: IO[bytes], files: list[tuple[str, archives.Entry | bytes]], cancelled: threading.Event
) -> Iterator[bytes]:
    """The copy the daemon gets, as a stream: `files` (name, member of the
    archive `f` or bytes) and nothing else."""
    for name, src in files:
        if isinstance(src, bytes):
            yield tar_header(name, len(src)) + src + tar_padding(len(src))
            continue
        yield tar_header(name, src.size)
        region = archives.FileRegion(f, src.offset, src.size)
        left = src.size
        while left > 0:
            if cancelled.is_set():
                raise TookTooLong()
            chunk = region.read(min(CHUNK, left))
            if not chunk:
                raise Refused(f"{name!r} is cut short in the archive")
            left -= len(chunk)
            yield chunk
        yield tar_padding(src.size)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def load_image_archive(
    path: str | os.PathLike[str],
    *,
    tag: str,
    labels: Mapping[str, str] | None = None,
    client: DockerClient | None = None,
    max_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
    max_unpacked: int = DEFAULT_MAX_IMAGE_UNPACKED,
    before_load: Callable[[int], None] | None = None,
) -> BuildResult:
    """Load the ``docker save`` archive at `path` as `tag`, safely (blocking).

    Checks the archive (its tar headers read in bounded memory, what its
    layers unpack to counted against `max_unpacked` before the daemon sees a
    byte: :mod:`referee.bots.images.archives`; no ``VOLUME``), streams the daemon a
    copy without the archive's own names, then labels the image (`labels`
    plus :data:`BUILT_BY_LABEL`, :data:`SOURCE_LABEL` and
    :data:`INPUT_LABEL`) and tags it `tag`. The result's ``image_id`` is the
    labelled image (the one to pin and run), ``parent_id`` the uploaded
    image's own id.

    `before_load` is called, once the layers are counted and before the
    daemon gets a byte, with the disk the load will take (:func:`load_bytes`:
    what the layers unpack to, a block per file, and the archive, which the
    daemon keeps while it loads); it raises to stop the load (the service's
    disk floor), and what it raises goes through.
    """
    check_tag(tag)
    image_labels(labels, "image", "")  # ValueError now for a bad one
    t0 = time.perf_counter()
    log = BuildLog()
    file = Path(path)
    digest = ""
    parent: str | None = None

    def result(image_id: str | None, reason: str | None) -> BuildResult:
        if reason is not None:
            log.line(f"REFUSED: {reason}")
        return BuildResult(
            ok=reason is None,
            image_id=image_id,
            tag=tag,
            kind="image",
            log=log.text(),
            reason=reason,
            seconds=time.perf_counter() - t0,
            input_sha256=digest,
            parent_id=parent,
        )

    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise Refused(
                f"the image archive is {mb(size)}, more than the limit of {mb(max_bytes)}: "
                "make the image smaller (fewer files, no build tools or caches)"
            )
        with file.open("rb") as f:
            magic = f.read(512)
        if magic[:2] == b"\x1f\x8b":
            raise Refused(
                "the image archive is gzip-compressed: upload the plain tar that "
                "`docker save IMAGE -o bot.tar` writes"
            )
        digest = file_sha256(file)
        ours = image_labels(labels, "image", digest)
        log.line(f"archive: {mb(size)}, sha256 {digest}")
        client = client_of(client)
        deadline = t0 + timeout_s
        with file.open("rb") as tar:
            try:
                members = _index(tar, size)
            except archives.Refused as e:
                if not archives.is_tar_header(magic):
                    raise Refused(
                        "not a tar archive: upload the file `docker save IMAGE -o bot.tar` writes"
                    ) from None
                raise Refused(str(e)) from None
            if "manifest.json" not in members or not members["manifest.json"].isreg():
                hint = " (an old docker save format)" if "repositories" in members else ""
                raise Refused(
                    f"the archive has no manifest.json{hint}: upload the file "
                    "`docker save IMAGE -o bot.tar` writes (Docker 1.10 or newer)"
                )
            raw_manifest = _read_member(tar, members["manifest.json"], 1024**2, "manifest.json")
            try:
                manifest = msgspec.json.decode(raw_manifest, type=list[_Manifest])
            except msgspec.DecodeError as e:
                raise Refused(f"manifest.json is not a docker save manifest ({e})") from None
            if len(manifest) != 1:
                raise Refused(
                    f"the archive holds {len(manifest)} images; save exactly one: "
                    "`docker save IMAGE -o bot.tar` with a single image name"
                )
            entry = manifest[0]
            log.line(f"its own names, ignored: {', '.join(entry.RepoTags or []) or 'none'}")
            if not entry.Layers:
                raise Refused("the image has no layers: save a real image")
            if len(entry.Layers) > MAX_LAYERS:
                raise Refused(
                    f"the image has {len(entry.Layers)} layers, more than {MAX_LAYERS}: "
                    "build it with fewer steps (or squash it)"
                )
            config_info = _resolve(members, entry.Config, "the image config")
            config_bytes = _read_member(tar, config_info, 8 * 1024**2, "the image config")
            try:
                config = msgspec.json.decode(config_bytes, type=_Config)
            except msgspec.DecodeError as e:
                raise Refused(f"the image config is not valid ({e})") from None
            if config.rootfs.type != "layers" or len(config.rootfs.diff_ids) != len(entry.Layers):
                raise Refused(
                    f"the image config lists {len(config.rootfs.diff_ids)} layers but "
                    f"manifest.json {len(entry.Layers)}: the archive was edited; save it again"
                )
            image_config = config.config or _ImageConfig()
            if image_config.on_build:
                raise Refused(
                    "the image has ONBUILD triggers, which would run here: "
                    "remove the ONBUILD lines from its Dockerfile"
                )
            if volumes := _volumes(image_config):
                shown = ", ".join(repr(v[:200]) for v in volumes[:5]) + (" ..." if len(volumes) > 5 else "")
                raise Refused(
                    f"the image declares VOLUME {shown}: a bot may not write to the server's "
                    "disk; remove the VOLUME line from its Dockerfile (or build FROM a base "
                    "without one) and write to /tmp, the bot's only writable folder"
                )
            os_name, arch = _daemon_platform(client)
            if config.os and os_name and config.os != os_name:
                raise Refused(f"the image is for {config.os}, this server runs {os_name} images")
            if config.architecture and arch and config.architecture != arch:
                raise Refused(
                    f"the image is for {config.architecture} CPUs, this server runs {arch}: "
                    f"build it with --platform {os_name or 'linux'}/{arch}"
                )
            files: list[tuple[str, archives.Entry | bytes]] = []
            config_name = clean_member_path(entry.Config)
            assert config_name is not None
            files.append((config_name, config_bytes))
            layer_names: list[str] = []
            layers: list[tuple[str, archives.Entry]] = []
            for i, layer in enumerate(entry.Layers, 1):
                info = _resolve(members, layer, f"layer {i}")
                name = clean_member_path(layer)
                assert name is not None
                if name != config_name and name not in layer_names:
                    files.append((name, info))
                layer_names.append(name)
                layers.append((f"layer {i}", info))
            t_count = time.perf_counter()
            try:
                counts = archives.count_layers(
                    tar, layers, max_unpacked, deadline=time.monotonic() + deadline - t_count
                )
            except archives.Refused as e:
                raise Refused(str(e)) from None
            except archives.OutOfTime:
                raise TookTooLong() from None
            log.line(
                f"layers: {mb(sum(c.unpacked for c in counts))} unpacked in all (the limit: "
                f"{mb(max_unpacked)}), {sum(c.files for c in counts)} entries, "
                f"{'/'.join(sorted({c.kind for c in counts}))}; counted in {time.perf_counter() - t_count:.1f} s"
            )
            if before_load is not None:
                before_load(load_bytes(counts, size))
            clean = msgspec.json.encode([{"Config": config_name, "RepoTags": None, "Layers": layer_names}])
            files.insert(0, ("manifest.json", clean))
            parent = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
            log.line(
                f"image {parent}: {len(layer_names)} layers, {config.os}/{config.architecture}; "
                f"checked in {time.perf_counter() - t0:.1f} s"
            )
            stream = DaemonStream(
                client,
                "/images/load",
                {"quiet": True},
                None,
                log,
                headers={"Content-Type": "application/x-tar"},
            )
            stream.body = _clean_archive(tar, files, stream.cancelled)
            try:
                stream.run(deadline - time.perf_counter())
            except docker_errors().APIError as e:
                raise Refused(f"the Docker daemon refused the archive: {daemon_message(e)}") from None
            if (failed := stream.failure()) is not None:
                raise Refused(f"the Docker daemon refused the archive: {failed}")
        loaded = [
            m["stream"].split("Loaded image ID:", 1)[1].strip()
            for m in stream.messages
            if "Loaded image ID:" in str(m.get("stream", ""))
        ]
        if loaded and loaded[-1] != parent:  # another image store's ids (containerd)
            parent = loaded[-1]
        errors = docker_errors()
        try:
            client.images.get(parent)
        except errors.ImageNotFound:
            raise Refused("the Docker daemon loaded no image from the archive (see the log)") from None
        for key in image_config.labels or {}:
            if key.startswith("referee.") and key not in ours:
                if not LABEL_KEY.match(key):
                    raise Refused(
                        f"the image carries a label {key[:80]!r} in the service's referee.* names: remove it"
                    )
                ours[key] = ""  # a team's own referee.* labels never pass for the service's
        context = io.BytesIO()
        dockerfile = f"FROM {parent}\n{ADMITTED_CONFIG}{label_line(ours)}\n".encode()
        context.write(
            tar_header("Dockerfile", len(dockerfile))
            + dockerfile
            + tar_padding(len(dockerfile))
            + b"\0" * (2 * tarfile.BLOCKSIZE)
        )
        context.seek(0)
        log.line("labelling it:")
        image_id = daemon_build(client, context, tag=tag, timeout_s=deadline - time.perf_counter(), log=log)
        log.line(f"tagged {tag}: {image_id}")
        return result(image_id, None)
    except Refused as e:
        return result(None, str(e))
    except TookTooLong:
        if parent is not None and client is not None:  # a load the daemon finished anyway
            drop_untagged(client, parent)
        return result(None, f"loading the image took longer than {timeout_s:g} s: make it smaller")
    except FileNotFoundError:
        return result(None, "the uploaded file is gone (internal error): upload it again")
