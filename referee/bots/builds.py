"""A team's upload made into a pinned, runnable image; every team is hostile.

Two kinds of upload, each a file already on disk (the web layer streams it
there with its own size cap):

- :func:`load_image_archive`: the output of ``docker save``. It is checked
  (a plain tar, its headers read in bounded memory; a ``manifest.json``
  naming exactly one image whose config and layers are in the archive, no
  ``ONBUILD``, no ``VOLUME``, this machine's OS and CPU; what its layers
  unpack to, plain or gzip, counted and capped, 2 GiB by default:
  :mod:`referee.bots.archives`) and a **copy** holding only
  ``manifest.json`` (its ``RepoTags`` removed), the config and the layers is
  streamed to the daemon (``POST /images/load``).
  The archive's own names (``RepoTags``, the ``repositories`` file, an OCI
  ``index.json``) never reach the daemon, so an archive that claims
  ``referee-base:<instance>`` or another team's tag renames nothing. The loaded
  image is then given the service's labels by a build ``FROM`` its id that
  only adds them (no ``RUN``, no network) and is tagged with the service's
  `tag`.
- :func:`build_source`: a ``.zip``, ``.tar.gz`` (or plain ``.tar``) of a
  Python bot (``bot.py`` using the SDK) or a Node bot (``package.json`` or
  ``bot.js``), told apart by content, never by file name. The archive is
  extracted into a temporary folder with every entry checked (no absolute
  path, no ``..``, no link, device or fifo, no control character, a cap on
  files and on bytes, counted while reading, so a zip bomb stops at the cap)
  and built with the service's **own** Dockerfile (a team's Dockerfile is
  copied as a plain file and ignored) FROM the local base image, with no
  network, memory capped and a time limit: the build is cancelled when it
  runs over (closing the connection makes the daemon stop it and remove its
  container). Its only ``RUN`` step compiles the bot (``compileall`` for
  Python, ``node --check`` for Node): the team's code is never run during
  the build (see *The build's sandbox* below).

The build's sandbox (no file of a team runs at build time, and if one
could, it would be boxed in):

- The ``RUN`` step is ``/usr/local/bin/python -I -S -m compileall -q
  /app/bot`` or ``/usr/local/bin/node --check /app/bot/ENTRY``, by absolute
  path (no ``PATH`` lookup, so no ``node_modules/.bin``), with the working
  folder ``/``, not the team's: ``-I`` leaves the current folder, the
  script's folder, ``PYTHON*`` variables and the user site out of
  ``sys.path`` (no ``compileall.py``, ``py_compile.py``, ``argparse.py`` of
  the team's is imported), ``-S`` skips ``site`` (no ``sitecustomize``,
  ``usercustomize``, ``.pth`` file). Node's ``--check`` parses, never runs;
  no npm is in the image, so ``package.json`` scripts never run.
- It runs as a uid of its own (:func:`build_uid`, from the upload's hash, in
  ``1000000..1999999``: neither root nor a bot's 65534), the owner of the
  bot's files (``COPY --chown``), with no capability left, and the
  ``nproc`` ulimit (:data:`BUILD_PIDS`, which counts that uid's processes
  on the host) is a real pids cap of this build alone (the legacy builder
  has no pids limit); a CPU quota (:data:`BUILD_CPUS`), the memory cap and
  a file-size ulimit (the growth cap) as well.
- What the build adds to its parent image (the team's files and their
  ``.pyc``: the image's ``Size`` less its parent's) is capped
  (``max_growth_bytes``, :data:`DEFAULT_MAX_BUILD_GROWTH`): files over it
  are refused before the build, an image over it after, and removed.

Both return a :class:`BuildResult`: the image id the service pins, the log
(capped, control characters removed; for that team's eyes only: it names
their files) and, when refused, one line saying what is wrong and how to
fix it. A refusal is data; only a missing daemon raises
(:class:`~referee.bots.container.DockerUnavailable`: not the team's fault).

Every image made here carries the labels ``referee.built-by=referee``,
``referee.source`` (``image``, ``python`` or ``node``) and
``referee.input-sha256`` (the hash of the uploaded file), plus the caller's
(say ``referee.team``); ``referee.*`` labels a loaded image brought along are
blanked, so a label search finds only what the service set.

The functions block (the daemon, hashing, extraction): call them with
``asyncio.to_thread`` from the web layer.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import shutil
import socket
import stat
import tarfile
import tempfile
import threading
import time
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from . import archives, baseimage
from .archives import DEFAULT_MAX_IMAGE_UNPACKED
from .instance import INSTANCE_LABEL, Instance, current

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any

__all__ = [
    "BUILT_BY_LABEL",
    "BuildLimits",
    "DEFAULT_BUILD_TIMEOUT_S",
    "DEFAULT_LOAD_TIMEOUT_S",
    "DEFAULT_MAX_BUILD_GROWTH",
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "DEFAULT_MAX_IMAGE_UNPACKED",
    "DEFAULT_MAX_SOURCE_BYTES",
    "DEFAULT_MAX_UNPACKED_BYTES",
    "INPUT_LABEL",
    "PYTHON_PACKAGES",
    "SOURCE_LABEL",
    "BuildResult",
    "build_source",
    "build_uid",
    "ensure_sdk_image",
    "file_sha256",
    "load_image_archive",
    "remove_image",
]

#: Largest ``docker save`` archive (the issue's default: 1 GiB).
DEFAULT_MAX_IMAGE_BYTES: Final = 1024**3
#: Largest source archive, as uploaded.
DEFAULT_MAX_SOURCE_BYTES: Final = 32 * 1024**2
#: Most bytes a source archive may unpack to (declared and actually read).
DEFAULT_MAX_UNPACKED_BYTES: Final = 64 * 1024**2
#: Most entries (files and folders) in a source archive.
DEFAULT_MAX_FILES: Final = 2000
#: Time limit of a source build (extraction included).
DEFAULT_BUILD_TIMEOUT_S: Final = 120.0
#: Time limit of loading a ``docker save`` archive (and labelling it).
DEFAULT_LOAD_TIMEOUT_S: Final = 300.0
#: Memory of the build's containers (the compile step), swap included.
BUILD_MEMORY: Final = 512 * 1024**2
#: Processes (threads included) the compile step may have at once: the
#: ``nproc`` ulimit of its own uid (:func:`build_uid`). ``node --check``
#: needs ~10.
BUILD_PIDS: Final = 64
#: CPUs of the compile step (a CFS quota).
BUILD_CPUS: Final = 1.0
#: Most a source build may add to its parent image (the bot's files and
#: their compiled form), by default (``referee serve --max-build-growth``).
DEFAULT_MAX_BUILD_GROWTH: Final = 64 * 1024**2
#: The uids the compile step runs as: a range no bot (65534) nor system
#: account uses, below 2**21 (a plain tar header's uid field).
BUILD_UID_FIRST: Final = 1_000_000
BUILD_UID_COUNT: Final = 1_000_000
#: Cap of :attr:`BuildResult.log` (its head and its tail are kept).
LOG_LIMIT: Final = 64 * 1024
#: Most layers of a loaded image (overlayfs stops at ~125 with the service's own).
MAX_LAYERS: Final = 100
#: Most entries in a ``docker save`` archive.
MAX_ARCHIVE_ENTRIES: Final = 10_000

#: Every image made here: ``referee.built-by=referee``.
BUILT_BY_LABEL: Final = "referee.built-by"
#: The sha256 of the uploaded file.
INPUT_LABEL: Final = "referee.input-sha256"
#: ``image``, ``python`` or ``node``.
SOURCE_LABEL: Final = "referee.source"

# The image Python source bots are built FROM, the base image with the SDK
# (``protocol/``, ``sample_bots/``, ``referee/game/``) compiled in ``/app``,
# is the instance's: Instance.sdk_tag (``referee-sdk-python:<id>``).
#: Where a bot's files go in its image.
BOT_DIR: Final = "/app/bot"

#: The distributions a Python source bot may import besides the standard
#: library, the SDK and its own files (what the base image holds).
PYTHON_PACKAGES: Final = (
    "aiohttp", "msgspec", "aiohappyeyeballs", "aiosignal", "attrs", "frozenlist", "idna",
    "multidict", "propcache", "typing-extensions", "yarl",
)

_TAG: Final = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_CHUNK: Final = 1024 * 1024
#: Entries skipped without a word: an OS's litter, caches, version control.
_LITTER_DIRS: Final = frozenset({"__MACOSX", "__pycache__", ".git", ".hg", ".svn", ".mypy_cache",
                                 ".pytest_cache", ".venv", "venv", ".idea", ".vscode"})
_LITTER_FILES: Final = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})

_SDK_DOCKERFILE: Final = """\
# The image Python source bots are built FROM (made by referee.bots.builds).
ARG BASE
FROM ${BASE}
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 \\
    PYTHONUNBUFFERED=1 \\
    PYTHONPATH=/app \\
    BOT_UNIX=/run/bot/bot.sock
COPY protocol/ protocol/
COPY sample_bots/ sample_bots/
COPY referee/__init__.py referee/
COPY referee/game/ referee/game/
RUN ["python", "-m", "compileall", "-q", "protocol", "sample_bots", "referee"]
"""


class BuildResult(msgspec.Struct, kw_only=True):
    """What became of an upload."""

    #: Whether the image is there, tagged and labelled.
    ok: bool
    #: ``sha256:...``: what the service pins and runs (None when refused).
    image_id: str | None
    #: The service's tag, given to the image when ok.
    tag: str
    #: ``image`` (a docker save archive), ``python``, ``node``, or ``""`` when
    #: refused before the kind was known.
    kind: str
    #: The load or build log, capped; safe to show to the team that uploaded
    #: it (and only to them).
    log: str
    #: One line: what is wrong and how to fix it (None when ok).
    reason: str | None
    #: Wall time of the whole call.
    seconds: float
    #: sha256 of the uploaded file (also the ``referee.input-sha256`` label).
    input_sha256: str = ""
    #: The image it was made from: the uploaded image's own id (a docker save
    #: archive) or the image a source bot is built FROM.
    parent_id: str | None = None


class BuildLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits of a source build's containers (its compile step)."""

    #: Memory, swap included.
    memory: int = BUILD_MEMORY
    #: A CFS quota, in CPUs.
    cpus: float = BUILD_CPUS
    #: The ``nproc`` ulimit: processes and threads of the step's uid.
    pids: int = BUILD_PIDS
    #: Most the build may add to its parent image; also the largest file the
    #: step may write (the ``fsize`` ulimit).
    max_growth_bytes: int = DEFAULT_MAX_BUILD_GROWTH

    def params(self) -> dict[str, Any]:
        """The Engine API's build parameters (the legacy builder) for them."""
        ulimits = [{"Name": "nproc", "Soft": self.pids, "Hard": self.pids},
                   {"Name": "fsize", "Soft": self.max_growth_bytes, "Hard": self.max_growth_bytes}]
        return {"memory": self.memory, "memswap": self.memory, "cpuperiod": 100_000,
                "cpuquota": max(1000, int(self.cpus * 100_000)), "ulimits": json.dumps(ulimits)}


def build_uid(digest: str) -> int:
    """The uid a source build's compile step runs as, from the upload's
    sha256 (hex): the same upload gets the same uid (its build steps come
    from the cache), two uploads almost never share one, so the ``nproc``
    ulimit counts this build's processes only."""
    return BUILD_UID_FIRST + int(digest[:12] or "0", 16) % BUILD_UID_COUNT


class _Refused(Exception):
    """The upload is refused: str(self) is the reason."""


class _TookTooLong(Exception):
    pass


# ------------------------------------------------------------------ helpers


def _check_tag(tag: str) -> None:
    if not _TAG.match(tag):
        raise ValueError(f"not a lowercase repository:tag: {tag!r}")


def _client(client: DockerClient | None) -> DockerClient:
    if client is not None:
        return client
    from .container import docker_client

    return docker_client()


def _docker_errors() -> Any:
    from .container import _docker_module

    return _docker_module().errors


def file_sha256(path: Path) -> str:
    """The sha256 of a file, hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _mb(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n < 1024**3 else f"{n / 1024**3:.2f} GiB"


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-9;?]*[A-Za-z]")


class _Log:
    """A capped log: the first and the last LOG_LIMIT / 2 characters, control
    characters (terminal escapes included) removed."""

    def __init__(self, limit: int = LOG_LIMIT) -> None:
        self.limit = limit
        self.head: list[str] = []
        self.head_size = 0
        self.tail = ""
        self.dropped = 0
        self.lock = threading.Lock()

    def add(self, text: str) -> None:
        text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
        with self.lock:
            room = self.limit // 2 - self.head_size
            if room > 0:
                self.head.append(text[:room])
                self.head_size += min(room, len(text))
                text = text[room:]
            if text:
                self.tail += text
                keep = self.limit // 2
                if len(self.tail) > keep:
                    self.dropped += len(self.tail) - keep
                    self.tail = self.tail[-keep:]

    def line(self, text: str) -> None:
        self.add(text.rstrip("\n") + "\n")

    def text(self) -> str:
        with self.lock:
            cut = f"\n[... {self.dropped} characters of the log left out ...]\n" if self.dropped else ""
            return "".join(self.head) + cut + self.tail


def _daemon_message(error: BaseException) -> str:
    explanation = getattr(error, "explanation", None)
    text = str(explanation or error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# ---------------------------------------------------- the daemon, streamed


@dataclass
class _Stream:
    """One streamed Engine API call (build or load) in a worker thread, so a
    deadline can cut it: the connection is shut down, and the daemon cancels
    the build (and removes its container) when its client goes away."""

    client: DockerClient
    path: str
    params: Mapping[str, Any]
    body: Any
    log: _Log
    headers: Mapping[str, str] = field(default_factory=lambda: {"Content-Type": "application/tar"})
    cancelled: threading.Event = field(default_factory=threading.Event)
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    response: Any = None

    def run(self, timeout_s: float) -> None:
        """Raise _TookTooLong after `timeout_s`, or re-raise what the call raised."""
        worker = threading.Thread(target=self._work, name=f"docker{self.path}", daemon=True)
        worker.start()
        worker.join(max(0.0, timeout_s))
        if worker.is_alive():
            self.cancel()
            worker.join(10.0)
            raise _TookTooLong()
        if self.error is not None:
            raise self.error

    def _work(self) -> None:
        api = self.client.api
        try:
            # docker-py's build() and load_image() hide the response, which
            # a deadline must be able to close: the same request, kept.
            self.response = api._post(api._url(self.path), data=self.body, params=dict(self.params),
                                      headers=dict(self.headers), stream=True, timeout=None)
            if self.cancelled.is_set():
                return
            api._raise_for_status(self.response)
            for message in api._stream_helper(self.response, decode=True):
                if not isinstance(message, dict):
                    continue
                self.messages.append(message)
                if isinstance(message.get("stream"), str):
                    self.log.add(message["stream"])
                elif message.get("status"):
                    self.log.line(str(message["status"]))
                if message.get("error") or message.get("errorDetail"):
                    detail = message.get("errorDetail") or {}
                    self.log.line(f"ERROR: {detail.get('message') or message.get('error')}")
        except BaseException as e:  # noqa: BLE001 - handed to run()
            if not self.cancelled.is_set():
                self.error = e
        finally:
            if self.response is not None:
                with contextlib.suppress(Exception):
                    self.response.close()

    def cancel(self) -> None:
        self.cancelled.set()
        response = self.response
        if response is None:
            return
        with contextlib.suppress(Exception):
            raw = response.raw._fp.fp.raw
            sock = getattr(raw, "_sock", raw)
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            response.close()

    def failure(self) -> str | None:
        """The daemon's error message, if the stream carried one."""
        for message in self.messages:
            if message.get("error") or message.get("errorDetail"):
                detail = message.get("errorDetail") or {}
                return str(detail.get("message") or message.get("error"))[:500]
        return None


def _build(client: DockerClient, context: IO[bytes], *, tag: str, timeout_s: float, log: _Log,
           step_failed: str = "", limits: BuildLimits | None = None) -> str:
    """Build `context` (a tar holding the Dockerfile) as `tag`, no network,
    its containers under `limits`; the id. (Labels are in the Dockerfile,
    one LABEL step: the API's labels would make one step each.)

    Raises _TookTooLong, or _Refused with the daemon's message."""
    params = {
        "t": tag, "q": False, "nocache": False, "rm": True, "forcerm": True, "pull": False,
        "dockerfile": "Dockerfile", "networkmode": "none",
        **(limits or BuildLimits()).params(),
    }
    stream = _Stream(client, "/build", params, context, log)
    try:
        try:
            stream.run(timeout_s)
        except _docker_errors().APIError as e:
            raise _Refused(f"the Docker daemon refused the build: {_daemon_message(e)}") from None
        if (failed := stream.failure()) is not None:
            if "returned a non-zero code: 137" in failed:  # SIGKILL: the step's memory cap
                memory = (limits or BuildLimits()).memory
                raise _Refused(f"the build ran out of its {_mb(memory)} of memory (compiling the bot's files): "
                               "a module that big cannot be compiled here; split it or make it smaller")
            if step_failed and "returned a non-zero code" in failed:
                raise _Refused(step_failed)
            raise _Refused(f"the build failed: {(failed.splitlines() or [''])[0]}")
        ids = [str(m["aux"]["ID"]) for m in stream.messages
               if isinstance(m.get("aux"), dict) and m["aux"].get("ID")]
        if not ids:
            raise _Refused("the build ended without an image (see the log)")
        return ids[-1]
    except (_Refused, _TookTooLong):
        _drop_steps(client, stream.messages)
        raise


_STEP: Final = re.compile(r"^ ---> ([0-9a-f]{12,64})\s*$")


def _drop_steps(client: DockerClient, messages: list[dict[str, Any]]) -> None:
    """Remove the images the steps of a failed build left (newest first),
    when untagged and unused: never the image it was built FROM, nor one
    another image or container still needs (the daemon refuses those)."""
    steps = [m.group(1) for msg in messages
             if isinstance(text := msg.get("stream"), str) and (m := _STEP.match(text))]
    for short in reversed(steps[1:]):  # steps[0]: the FROM image
        _drop_untagged(client, short, prune=False)


def _drop_untagged(client: DockerClient, image_ref: str, *, prune: bool = True) -> None:
    with contextlib.suppress(Exception):
        image = client.images.get(image_ref)
        if not image.tags:
            client.images.remove(str(image.id), force=False, noprune=not prune)


# ------------------------------------------------------ docker save archives


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


def _clean_member_path(name: str) -> str | None:
    """`name` as a plain relative path inside the archive, or None."""
    if not name or "\\" in name or _has_control(name):
        return None
    norm = posixpath.normpath(name)
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        return None
    return norm


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in text)


def _resolve(members: Mapping[str, archives.Entry], name: str, what: str) -> archives.Entry:
    """The regular file `name` refers to (following symlinks inside the archive)."""
    path = _clean_member_path(name)
    if path is None:
        raise _Refused(f"manifest.json names {what} {name!r}, not a plain path inside the archive: "
                       "upload the file docker save writes, unchanged")
    for _ in range(8):
        info = members.get(path)
        if info is None:
            raise _Refused(f"{what} {name!r} is missing from the archive: it is incomplete or was "
                           "edited; upload the file `docker save IMAGE -o bot.tar` writes")
        if info.isreg():
            return info
        if not info.issym():
            raise _Refused(f"{what} {name!r} is not a file in the archive")
        target = _clean_member_path(posixpath.join(posixpath.dirname(path), info.linkname))
        if target is None:
            raise _Refused(f"{what} {name!r} links outside the archive")
        path = target
    raise _Refused(f"{what} {name!r} is a loop of links")


def _daemon_platform(client: DockerClient) -> tuple[str, str]:
    try:
        version = client.version()
    except Exception:  # noqa: BLE001 - unknown: do not refuse on it
        return "", ""
    return str(version.get("Os") or ""), str(version.get("Arch") or "")


def _read_member(f: IO[bytes], info: archives.Entry, limit: int, what: str) -> bytes:
    if info.size > limit:
        raise _Refused(f"{what} is {_mb(info.size)}, more than {_mb(limit)}: not a docker save archive?")
    f.seek(info.offset)
    data = f.read(info.size)
    if len(data) != info.size:
        raise _Refused(f"{what} is cut short in the archive: upload it again")
    return data


def _index(f: IO[bytes], size: int) -> dict[str, archives.Entry]:
    """The entries of the archive `f` by their clean path, read in bounded
    memory (no name over 1024 characters is kept: docker save's are < 100)."""
    members: dict[str, archives.Entry] = {}
    for count, info in enumerate(archives.entries(archives.FileRegion(f, 0, size)), 1):
        if count > MAX_ARCHIVE_ENTRIES:
            raise _Refused(f"the archive holds more than {MAX_ARCHIVE_ENTRIES} entries: "
                           "not a docker save archive")
        if info.sparse:
            raise _Refused("the archive holds a sparse file: upload the file `docker save IMAGE -o bot.tar` "
                           "writes, unchanged")
        if len(info.name) <= 1024 and (name := _clean_member_path(info.name)) is not None:
            members[name] = info
    return members


def _volumes(image_config: _ImageConfig) -> list[str]:
    return sorted(str(v) for v in image_config.volumes or {})


def _tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def _clean_archive(f: IO[bytes], files: list[tuple[str, archives.Entry | bytes]],
                   cancelled: threading.Event) -> Iterator[bytes]:
    """The copy the daemon gets, as a stream: `files` (name, member of the
    archive `f` or bytes) and nothing else."""
    for name, src in files:
        if isinstance(src, bytes):
            yield _tar_header(name, len(src)) + src + _padding(len(src))
            continue
        yield _tar_header(name, src.size)
        region = archives.FileRegion(f, src.offset, src.size)
        left = src.size
        while left > 0:
            if cancelled.is_set():
                raise _TookTooLong()
            chunk = region.read(min(_CHUNK, left))
            if not chunk:
                raise _Refused(f"{name!r} is cut short in the archive")
            left -= len(chunk)
            yield chunk
        yield _padding(src.size)
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
) -> BuildResult:
    """Load the ``docker save`` archive at `path` as `tag`, safely (blocking).

    Checks the archive (its tar headers read in bounded memory, what its
    layers unpack to counted against `max_unpacked` before the daemon sees a
    byte: :mod:`referee.bots.archives`; no ``VOLUME``), streams the daemon a
    copy without the archive's own names, then labels the image (`labels`
    plus :data:`BUILT_BY_LABEL`, :data:`SOURCE_LABEL` and
    :data:`INPUT_LABEL`) and tags it `tag`. The result's ``image_id`` is the
    labelled image (the one to pin and run), ``parent_id`` the uploaded
    image's own id.
    """
    _check_tag(tag)
    _labels(labels, "image", "")  # ValueError now for a bad one
    t0 = time.perf_counter()
    log = _Log()
    file = Path(path)
    digest = ""
    parent: str | None = None

    def result(image_id: str | None, reason: str | None) -> BuildResult:
        if reason is not None:
            log.line(f"REFUSED: {reason}")
        return BuildResult(ok=reason is None, image_id=image_id, tag=tag, kind="image", log=log.text(),
                           reason=reason, seconds=time.perf_counter() - t0, input_sha256=digest,
                           parent_id=parent)

    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise _Refused(f"the image archive is {_mb(size)}, more than the limit of {_mb(max_bytes)}: "
                           "make the image smaller (fewer files, no build tools or caches)")
        with file.open("rb") as f:
            magic = f.read(512)
        if magic[:2] == b"\x1f\x8b":
            raise _Refused("the image archive is gzip-compressed: upload the plain tar that "
                           "`docker save IMAGE -o bot.tar` writes")
        digest = file_sha256(file)
        ours = _labels(labels, "image", digest)
        log.line(f"archive: {_mb(size)}, sha256 {digest}")
        client = _client(client)
        deadline = t0 + timeout_s
        with file.open("rb") as tar:
            try:
                members = _index(tar, size)
            except archives.Refused as e:
                if not archives.is_tar_header(magic):
                    raise _Refused("not a tar archive: upload the file `docker save IMAGE -o bot.tar` "
                                   "writes") from None
                raise _Refused(str(e)) from None
            if "manifest.json" not in members or not members["manifest.json"].isreg():
                hint = " (an old docker save format)" if "repositories" in members else ""
                raise _Refused(f"the archive has no manifest.json{hint}: upload the file "
                               "`docker save IMAGE -o bot.tar` writes (Docker 1.10 or newer)")
            raw_manifest = _read_member(tar, members["manifest.json"], 1024**2, "manifest.json")
            try:
                manifest = msgspec.json.decode(raw_manifest, type=list[_Manifest])
            except msgspec.DecodeError as e:
                raise _Refused(f"manifest.json is not a docker save manifest ({e})") from None
            if len(manifest) != 1:
                raise _Refused(f"the archive holds {len(manifest)} images; save exactly one: "
                               "`docker save IMAGE -o bot.tar` with a single image name")
            entry = manifest[0]
            log.line(f"its own names, ignored: {', '.join(entry.RepoTags or []) or 'none'}")
            if not entry.Layers:
                raise _Refused("the image has no layers: save a real image")
            if len(entry.Layers) > MAX_LAYERS:
                raise _Refused(f"the image has {len(entry.Layers)} layers, more than {MAX_LAYERS}: "
                               "build it with fewer steps (or squash it)")
            config_info = _resolve(members, entry.Config, "the image config")
            config_bytes = _read_member(tar, config_info, 8 * 1024**2, "the image config")
            try:
                config = msgspec.json.decode(config_bytes, type=_Config)
            except msgspec.DecodeError as e:
                raise _Refused(f"the image config is not valid ({e})") from None
            if config.rootfs.type != "layers" or len(config.rootfs.diff_ids) != len(entry.Layers):
                raise _Refused(f"the image config lists {len(config.rootfs.diff_ids)} layers but "
                               f"manifest.json {len(entry.Layers)}: the archive was edited; save it again")
            image_config = config.config or _ImageConfig()
            if image_config.on_build:
                raise _Refused("the image has ONBUILD triggers, which would run here: "
                               "remove the ONBUILD lines from its Dockerfile")
            if volumes := _volumes(image_config):
                shown = ", ".join(repr(v[:200]) for v in volumes[:5]) + (" ..." if len(volumes) > 5 else "")
                raise _Refused(f"the image declares VOLUME {shown}: a bot may not write to the server's "
                               "disk; remove the VOLUME line from its Dockerfile (or build FROM a base "
                               "without one) and write to /tmp, the bot's only writable folder")
            os_name, arch = _daemon_platform(client)
            if config.os and os_name and config.os != os_name:
                raise _Refused(f"the image is for {config.os}, this server runs {os_name} images")
            if config.architecture and arch and config.architecture != arch:
                raise _Refused(f"the image is for {config.architecture} CPUs, this server runs {arch}: "
                               f"build it with --platform {os_name or 'linux'}/{arch}")
            files: list[tuple[str, archives.Entry | bytes]] = []
            config_name = _clean_member_path(entry.Config)
            assert config_name is not None
            files.append((config_name, config_bytes))
            layer_names: list[str] = []
            layers: list[tuple[str, archives.Entry]] = []
            for i, layer in enumerate(entry.Layers, 1):
                info = _resolve(members, layer, f"layer {i}")
                name = _clean_member_path(layer)
                assert name is not None
                if name != config_name and name not in layer_names:
                    files.append((name, info))
                layer_names.append(name)
                layers.append((f"layer {i}", info))
            t_count = time.perf_counter()
            try:
                counts = archives.count_layers(tar, layers, max_unpacked, deadline=time.monotonic()
                                               + deadline - t_count)
            except archives.Refused as e:
                raise _Refused(str(e)) from None
            except archives.OutOfTime:
                raise _TookTooLong() from None
            log.line(f"layers: {_mb(sum(c.unpacked for c in counts))} unpacked in all (the limit: "
                     f"{_mb(max_unpacked)}), {sum(c.files for c in counts)} entries, "
                     f"{'/'.join(sorted({c.kind for c in counts}))}; counted in {time.perf_counter() - t_count:.1f} s")
            clean = msgspec.json.encode([{"Config": config_name, "RepoTags": None, "Layers": layer_names}])
            files.insert(0, ("manifest.json", clean))
            parent = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
            log.line(f"image {parent}: {len(layer_names)} layers, {config.os}/{config.architecture}; "
                     f"checked in {time.perf_counter() - t0:.1f} s")
            stream = _Stream(client, "/images/load", {"quiet": True}, None, log,
                             headers={"Content-Type": "application/x-tar"})
            stream.body = _clean_archive(tar, files, stream.cancelled)
            try:
                stream.run(deadline - time.perf_counter())
            except _docker_errors().APIError as e:
                raise _Refused(f"the Docker daemon refused the archive: {_daemon_message(e)}") from None
            if (failed := stream.failure()) is not None:
                raise _Refused(f"the Docker daemon refused the archive: {failed}")
        loaded = [m["stream"].split("Loaded image ID:", 1)[1].strip() for m in stream.messages
                  if "Loaded image ID:" in str(m.get("stream", ""))]
        if loaded and loaded[-1] != parent:  # another image store's ids (containerd)
            parent = loaded[-1]
        errors = _docker_errors()
        try:
            client.images.get(parent)
        except errors.ImageNotFound:
            raise _Refused("the Docker daemon loaded no image from the archive (see the log)") from None
        for key in image_config.labels or {}:
            if key.startswith("referee.") and key not in ours:
                if not _LABEL_KEY.match(key):
                    raise _Refused(f"the image carries a label {key[:80]!r} in the service's referee.* "
                                   "names: remove it")
                ours[key] = ""  # a team's own referee.* labels never pass for the service's
        context = io.BytesIO()
        dockerfile = f"FROM {parent}\n{_label_line(ours)}\n".encode()
        context.write(_tar_header("Dockerfile", len(dockerfile)) + dockerfile + _padding(len(dockerfile))
                      + b"\0" * (2 * tarfile.BLOCKSIZE))
        context.seek(0)
        log.line("labelling it:")
        image_id = _build(client, context, tag=tag, timeout_s=deadline - time.perf_counter(), log=log)
        log.line(f"tagged {tag}: {image_id}")
        return result(image_id, None)
    except _Refused as e:
        return result(None, str(e))
    except _TookTooLong:
        if parent is not None and client is not None:  # a load the daemon finished anyway
            _drop_untagged(client, parent)
        return result(None, f"loading the image took longer than {timeout_s:g} s: make it smaller")
    except FileNotFoundError:
        return result(None, "the uploaded file is gone (internal error): upload it again")


_LABEL_KEY: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")


def _labels(extra: Mapping[str, str] | None, kind: str, digest: str) -> dict[str, str]:
    """The image's labels: the caller's, then the service's own. ValueError
    for a key that is not ``[A-Za-z0-9._/-]`` or a value with a control character."""
    out = {}
    for key, value in (extra or {}).items():
        if not _LABEL_KEY.match(key) or _has_control(value):
            raise ValueError(f"not a usable label: {key!r}={value!r}")
        out[key] = value
    out.setdefault(INSTANCE_LABEL, current().id)  # the caller's instance, else the process's
    out.update({BUILT_BY_LABEL: "referee", SOURCE_LABEL: kind, INPUT_LABEL: digest})
    return out


def _label_line(labels: Mapping[str, str]) -> str:
    """One Dockerfile LABEL instruction (quoted: no variable is expanded)."""
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'

    return "LABEL " + " ".join(f"{quote(k)}={quote(v)}" for k, v in sorted(labels.items()))


# ------------------------------------------------------------ source archives


@dataclass
class _Extracted:
    """A source archive, unpacked: the files (relative names) under `root`."""

    root: Path
    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    skipped: int = 0
    total: int = 0


def _source_name(raw: str, *, zip_name: bool) -> str | None:
    """A source entry's checked relative name; None to skip it (litter).
    Raises _Refused for a dangerous one."""
    shown = raw.encode("unicode_escape").decode("ascii")[:200]
    if _has_control(raw):
        raise _Refused(f"the file name {shown!r} has control characters: rename it")
    name = raw.replace("\\", "/") if zip_name else raw
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise _Refused(f"the archive holds an absolute path, {shown!r}: archive relative paths "
                       "(run zip or tar inside the bot's folder)")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Refused(f"the archive holds a path that leaves its folder, {shown!r}: "
                       "remove the entries with '..'")
    if not parts:
        return None
    if any(len(p.encode()) > 255 for p in parts) or len(name) > 1024:
        raise _Refused(f"the file name {shown!r} is too long")
    if any(p in _LITTER_DIRS for p in parts[:-1]) or parts[-1] in _LITTER_FILES \
            or parts[-1] in _LITTER_DIRS or parts[-1].endswith((".pyc", ".pyo")):
        return None
    return "/".join(parts)


class _Unpacker:
    """Writes checked entries under `out.root`, counting files and bytes."""

    def __init__(self, out: _Extracted, *, max_files: int, max_bytes: int, deadline: float) -> None:
        self.out = out
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.deadline = deadline
        self.entries = 0

    def count(self) -> None:
        self.entries += 1
        if self.entries > self.max_files:
            raise _Refused(f"the archive holds more than {self.max_files} files and folders: "
                           "leave out what the bot does not need")

    def declare(self, size: int) -> None:
        if self.out.total + size > self.max_bytes:
            raise _Refused(f"the archive unpacks to more than {_mb(self.max_bytes)}: "
                           "leave out what the bot does not need")

    def directory(self, name: str) -> None:
        self._mkdirs(name)

    def _mkdirs(self, name: str) -> None:
        parts = name.split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d in self.out.files:
                raise _Refused(f"{d!r} is both a file and a folder in the archive")
            if d not in self.out.dirs:
                self.out.dirs.add(d)
                (self.out.root / d).mkdir(mode=0o755, exist_ok=True)

    def file(self, name: str, source: IO[bytes], declared: int | None) -> None:
        if name in self.out.files or name in self.out.dirs:
            raise _Refused(f"{name!r} appears twice in the archive")
        if "/" in name:
            self._mkdirs(name.rsplit("/", 1)[0])
        self.out.files.add(name)
        fd = os.open(self.out.root / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        written = 0
        with os.fdopen(fd, "wb") as f:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if declared is not None and written > declared:
                    raise _Refused(f"{name!r} unpacks to more than the size the archive declares: "
                                   "a damaged or hostile archive")
                self.declare(len(chunk))
                self.out.total += len(chunk)
                if time.perf_counter() > self.deadline:
                    raise _TookTooLong()
                f.write(chunk)


class _CappedReader(io.RawIOBase):
    """A stream that refuses to give more than `limit` bytes (the decompressed
    side of a .tar.gz: a gzip bomb, or a huge pax header, stops here)."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self.inner = inner
        self.left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self.left <= 0:
            raise _Refused("the archive unpacks to more than the limit: leave out what the bot "
                           "does not need")
        data = self.inner.read(min(len(view), self.left, _CHUNK))
        self.left -= len(data)
        view[: len(data)] = data
        return len(data)


def _unpack_zip(path: Path, unpack: _Unpacker) -> None:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise _Refused(f"the zip archive cannot be read ({e}): make it again") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > unpack.max_files:
            unpack.entries = unpack.max_files
            unpack.count()  # refuses
        unpack.declare(sum(i.file_size for i in infos))  # declared sizes first (a zip bomb says)
        for info in infos:
            unpack.count()
            mode = info.external_attr >> 16
            name = _source_name(info.filename, zip_name=True)
            if name is None:
                unpack.out.skipped += 1
                continue
            if stat.S_ISLNK(mode):
                raise _Refused(f"the archive holds a symbolic link, {info.filename!r}: "
                               "put the file itself in the archive")
            if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise _Refused(f"{info.filename!r} is not a file nor a folder")
            if info.flag_bits & 0x1:
                raise _Refused(f"{info.filename!r} is encrypted: zip without a password")
            if info.is_dir():
                unpack.directory(name)
                continue
            try:
                with zf.open(info) as src:
                    unpack.file(name, src, info.file_size)
            except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError, ValueError) as e:
                raise _Refused(f"{info.filename!r} cannot be unpacked ({e}): make the zip again, "
                               "with plain deflate") from None


def _unpack_tar(path: Path, unpack: _Unpacker, *, gz: bool) -> None:
    with path.open("rb") as raw:
        inner: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        # Headers and padding on top of the files' own bytes.
        limit = unpack.max_bytes + (unpack.max_files + 4) * 3 * tarfile.BLOCKSIZE + 64 * 1024
        try:  # tarfile reads a pax or long-name header whole: first, every header in bounded memory
            archives.check_headers(raw, path.stat().st_size, gz=gz, limit=limit, refusal=f"the archive unpacks "
                                   f"to more than {_mb(unpack.max_bytes)}: leave out what the bot does not need")
        except archives.Refused as e:
            raise _Refused(str(e)) from None
        raw.seek(0)
        capped = io.BufferedReader(_CappedReader(inner, limit), buffer_size=_CHUNK)
        try:
            # its `with` is below: an archive that cannot be opened is refused apart
            tar = tarfile.open(fileobj=capped, mode="r|")  # noqa: SIM115
        except (tarfile.TarError, OSError, EOFError) as e:
            raise _Refused(f"the archive cannot be read ({e}): make it again "
                           "(tar -czf bot.tar.gz -C mybot .)") from None
        with tar:
            try:
                for info in tar:
                    unpack.count()
                    name = _source_name(info.name, zip_name=False)
                    if name is None:
                        unpack.out.skipped += 1
                        continue
                    if not (info.isreg() or info.isdir()):
                        kind = ("a symbolic link" if info.issym() else "a hard link" if info.islnk()
                                else "a fifo" if info.isfifo() else "a device" if info.isdev()
                                else "a special entry")
                        raise _Refused(f"the archive holds {kind}, {info.name!r}: only files and "
                                       "folders are allowed; put the file itself in the archive")
                    if info.isdir():
                        unpack.directory(name)
                        continue
                    unpack.declare(info.size)
                    src = tar.extractfile(info)
                    assert src is not None
                    unpack.file(name, src, info.size)
            except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
                raise _Refused(f"the archive is damaged ({e}): make it again") from None


@dataclass
class _Bot:
    kind: str  # "python" | "node"
    root: str  # "" or "folder/"
    entry: str  # relative to root


_NO_BOT: Final = (
    "no bot.py (a Python bot) nor package.json or bot.js (a Node bot) at the top of the archive "
    "or in its single top folder: archive the bot's folder, e.g. `cd mybot && zip -r ../mybot.zip .`"
)


def _find_bot(out: _Extracted, log: _Log) -> _Bot:
    tops = {n.split("/", 1)[0] for n in out.files | out.dirs}
    root = ""
    markers = {"bot.py", "bot.js", "package.json"}
    if not tops & markers and len(tops) == 1 and next(iter(tops)) in out.dirs:
        root = next(iter(tops)) + "/"
    here = {n[len(root):] for n in out.files if n.startswith(root)}
    if "Dockerfile" in here or "dockerfile" in here:
        log.line("note: your Dockerfile is ignored: the service builds every source bot with its own")
    python = "bot.py" in here
    node = "package.json" in here or "bot.js" in here
    if python and node:
        raise _Refused("the archive holds both bot.py (Python) and package.json or bot.js (Node): "
                       "keep only one bot in it")
    if python:
        _check_requirements(out, root, here, log)
        return _Bot("python", root, "bot.py")
    if not node:
        if "manifest.json" in here and any(n.endswith("layer.tar") or n.startswith("blobs/") for n in here):
            raise _Refused("this is a docker save archive, not a source archive: submit it as an image")
        raise _Refused(_NO_BOT)
    entry = "bot.js" if "bot.js" in here else "index.js"
    if "package.json" in here:
        package = out.root / (root + "package.json")
        if package.stat().st_size > 1024**2:
            raise _Refused("package.json is larger than 1 MiB")
        try:
            meta = json.loads(package.read_bytes())
        except (ValueError, UnicodeDecodeError) as e:
            raise _Refused(f"package.json is not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise _Refused("package.json is not a JSON object")
        main = meta.get("main")
        if main is not None:
            clean = _clean_member_path(str(main)) if isinstance(main, str) else None
            if clean is None:
                raise _Refused(f"package.json's \"main\" is not a relative path: {main!r}")
            entry = clean
        deps = meta.get("dependencies") or {}
        if isinstance(deps, dict) and deps and not any(n.startswith("node_modules/") for n in here):
            raise _Refused(f"package.json needs {', '.join(sorted(map(str, deps))[:5])} but the archive has "
                           "no node_modules: the build has no network, so npm install cannot run; "
                           "run npm install --omit=dev first and include node_modules")
    if entry not in here:
        raise _Refused(f"the Node bot's entry file {entry!r} is not in the archive: add it, or name "
                       "the file in package.json's \"main\"")
    return _Bot("node", root, entry)


_REQ_NAME: Final = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _check_requirements(out: _Extracted, root: str, here: set[str], log: _Log) -> None:
    """requirements.txt may only name what the base image holds: no network, no pip."""
    if "requirements.txt" not in here:
        return
    path = out.root / (root + "requirements.txt")
    allowed = {re.sub(r"[-_.]+", "-", n).lower() for n in PYTHON_PACKAGES}
    missing = []
    for line in path.read_text(errors="replace").splitlines()[:1000]:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = _REQ_NAME.match(line)
        if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() not in allowed:
            missing.append(m.group(1))
    if missing:
        raise _Refused(f"requirements.txt asks for {', '.join(missing[:5])}: the build has no network, "
                       "so nothing is installed; a bot may use only the standard library, aiohttp, "
                       "msgspec, the SDK and pure-Python modules it brings in the archive")
    log.line("requirements.txt: every package it names is in the base image")


def _detect(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(512)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "tar.gz"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    what = "empty" if not head else f"starts with {head[:8]!r}"
    raise _Refused(f"not a .zip or .tar.gz archive (the file is {what}): "
                   "make one with `zip -r bot.zip .` or `tar -czf bot.tar.gz .` in the bot's folder")


def ensure_sdk_image(client: DockerClient | None = None, *, instance: Instance | None = None) -> str:
    """The image Python source bots are built FROM (the instance's
    ``referee-sdk-python:<id>``: the base image with the SDK), built FROM the
    base image's pinned id, or reused; its id. Blocking."""
    client = _client(client)
    inst = instance or current()
    base_id = baseimage.build_base_image(client, instance=inst)
    return baseimage.build_image(client, inst.sdk_tag, _SDK_DOCKERFILE, dict(baseimage.sdk_files()),
                                 buildargs={"BASE": base_id}, base_id=base_id, instance=inst)


def _dockerfile(bot: _Bot, base_id: str, labels: Mapping[str, str], uid: int) -> str:
    """The build of `bot`: its files owned by `uid`, compiled as `uid`
    (see the module's *The build's sandbox*)."""
    if bot.kind == "python":  # the SDK image sets PYTHONPATH=/app and BOT_UNIX
        env = "ENV PYTHONDONTWRITEBYTECODE=1"
        # -I: no cwd, script folder, PYTHON* variable nor user site on sys.path;
        # -S: no site (sitecustomize, usercustomize, .pth files)
        check = ["/usr/local/bin/python", "-I", "-S", "-m", "compileall", "-q", BOT_DIR]
        cmd = ["python", bot.entry]
    else:
        env = "ENV BOT_UNIX=/run/bot/bot.sock NODE_ENV=production"
        check = ["/usr/local/bin/node", "--check", f"{BOT_DIR}/{bot.entry}"]
        cmd = ["node", bot.entry]
    return "\n".join([
        "# The service's own Dockerfile for a source bot (referee.bots.builds).",
        f"FROM {base_id}",
        env,  # the same for every bot: these steps come from the cache
        "WORKDIR /",  # the compile step runs outside the team's folder
        f"CMD {json.dumps(cmd)}",
        f'COPY --chown={uid}:{uid} ["bot/", "{BOT_DIR}/"]',
        # Compiled, never run, as the build's own uid (no root, its own nproc
        # count): a syntax error fails the build, the error in its log.
        f"USER {uid}:{uid}",
        f"RUN {json.dumps(check)}",
        "USER 65534:65534",
        f"WORKDIR {BOT_DIR}",
        _label_line(labels),
        "",
    ])


def _context(extracted: _Extracted, bot: _Bot, dockerfile: str, out: IO[bytes]) -> None:
    """The build context: the Dockerfile and bot/ (the bot's folder, its top stripped)."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        def add(name: str, data: IO[bytes] | None, size: int, *, folder: bool = False) -> None:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if folder:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            else:
                info.size = size
                info.mode = 0o644
            tar.addfile(info, data)

        text = dockerfile.encode()
        add("Dockerfile", io.BytesIO(text), len(text))
        add("bot", None, 0, folder=True)
        for d in sorted(extracted.dirs):
            if d.startswith(bot.root) and d + "/" != bot.root:
                add(f"bot/{d[len(bot.root):]}", None, 0, folder=True)
        for name in sorted(extracted.files):
            if name.startswith(bot.root):
                path = extracted.root / name
                with path.open("rb") as f:
                    add(f"bot/{name[len(bot.root):]}", f, path.stat().st_size)


def build_source(
    path: str | os.PathLike[str],
    *,
    tag: str,
    labels: Mapping[str, str] | None = None,
    client: DockerClient | None = None,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
    workdir: str | os.PathLike[str] | None = None,
    max_growth_bytes: int = DEFAULT_MAX_BUILD_GROWTH,
    instance: Instance | None = None,
) -> BuildResult:
    """Build the bot source archive at `path` into the image `tag` (blocking).

    The kind (zip, tar.gz, tar) is read from the file's first bytes; the bot
    (Python or Node) from its files. `timeout_s` bounds the extraction and
    the build together; `max_bytes` the upload, `max_unpacked_bytes` and
    `max_files` what it unpacks to; `max_growth_bytes` what the build may
    add to its parent image (the bot's files and their compiled form).
    `workdir`: where the temporary build folder goes (default: the system's
    temp folder). `instance`: whose base images it is built FROM (default:
    the process's).
    """
    _check_tag(tag)
    _labels(labels, "python", "")  # ValueError now for a bad one
    t0 = time.perf_counter()
    log = _Log()
    file = Path(path)
    digest = ""
    kind = ""
    parent: str | None = None

    def result(image_id: str | None, reason: str | None) -> BuildResult:
        if reason is not None:
            log.line(f"REFUSED: {reason}")
        return BuildResult(ok=reason is None, image_id=image_id, tag=tag, kind=kind, log=log.text(),
                           reason=reason, seconds=time.perf_counter() - t0, input_sha256=digest,
                           parent_id=parent)

    tmp = Path(tempfile.mkdtemp(prefix="referee-build-", dir=workdir))
    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise _Refused(f"the source archive is {_mb(size)}, more than the limit of {_mb(max_bytes)}: "
                           "leave out what the bot does not need")
        archive = _detect(file)
        digest = file_sha256(file)
        log.line(f"source: {archive}, {_mb(size)}, sha256 {digest}")
        client = _client(client)
        t_team = time.perf_counter()
        deadline = t_team + timeout_s
        extracted = _Extracted(tmp / "src")
        extracted.root.mkdir()
        unpack = _Unpacker(extracted, max_files=max_files, max_bytes=max_unpacked_bytes, deadline=deadline)
        if archive == "zip":
            _unpack_zip(file, unpack)
        else:
            _unpack_tar(file, unpack, gz=archive == "tar.gz")
        log.line(f"unpacked {len(extracted.files)} files, {_mb(extracted.total)}"
                 + (f" ({extracted.skipped} caches and OS files left out)" if extracted.skipped else ""))
        bot = _find_bot(extracted, log)
        kind = bot.kind
        if extracted.total > max_growth_bytes:
            raise _Refused(f"the bot's files are {_mb(extracted.total)}, more than the {_mb(max_growth_bytes)} "
                           "a build may add to its image: leave out what the bot does not need (data, "
                           "caches, unused node_modules)")
        t_ours = time.perf_counter()  # the service's own base image: not on the team's clock
        if bot.kind == "python":
            parent = ensure_sdk_image(client, instance=instance)
        else:
            try:
                parent = baseimage.build_node_base_image(client, instance=instance)
            except FileNotFoundError:
                raise _Refused("this server cannot build Node bots (no node here): "
                               "submit a Python bot or an image") from None
        deadline += time.perf_counter() - t_ours
        log.line(f"a {bot.kind} bot: {bot.root}{bot.entry}")
        dockerfile = _dockerfile(bot, parent, _labels(labels, bot.kind, digest), build_uid(digest))
        log.line("the service's Dockerfile:\n" + dockerfile)
        with tempfile.TemporaryFile(dir=tmp) as context:
            _context(extracted, bot, dockerfile, context)
            context.seek(0)
            shutil.rmtree(extracted.root, ignore_errors=True)
            check = ("Python could not compile the bot's files" if bot.kind == "python"
                     else f"node --check found an error in {bot.entry}")
            image_id = _build(client, context, tag=tag, timeout_s=deadline - time.perf_counter(), log=log,
                              step_failed=f"{check}: the build log shows the error; fix it and upload again",
                              limits=BuildLimits(max_growth_bytes=max_growth_bytes))
        _check_growth(client, tag, image_id, parent, files=extracted.total, cap=max_growth_bytes, log=log)
        log.line(f"built {tag}: {image_id} in {time.perf_counter() - t_team:.1f} s")
        return result(image_id, None)
    except _Refused as e:
        return result(None, str(e))
    except _TookTooLong:
        return result(None, f"the build took longer than {timeout_s:g} s: make the bot smaller "
                            "(fewer or smaller files)")
    except FileNotFoundError:
        return result(None, "the uploaded file is gone (internal error): upload it again")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_growth(client: DockerClient, tag: str, image_id: str, parent: str, *, files: int, cap: int,
                  log: _Log) -> None:
    """Refuse (and remove) the image `image_id` when it adds more than `cap`
    to `parent`: the daemon's ``Size`` of each (all their layers)."""
    try:
        added = int(client.images.get(image_id).attrs["Size"]) - int(client.images.get(parent).attrs["Size"])
    except Exception as e:  # noqa: BLE001 - docker's errors: not the team's fault
        remove_image(tag, client, image_id=image_id)
        raise _Refused(f"the server could not measure the built image ({_daemon_message(e)}): "
                       "upload it again later") from None
    if added > cap:
        remove_image(tag, client, image_id=image_id)
        raise _Refused(f"the build adds {_mb(added)} to the image (the bot's files are {_mb(files)}, "
                       f"the rest is their compiled form), more than the limit of {_mb(cap)}: leave out "
                       "what the bot does not need")
    log.line(f"the build added {_mb(added)} to the image (at most {_mb(cap)})")


def remove_image(tag: str, client: DockerClient | None = None, *,
                 image_id: str | None = None) -> bool:
    """Remove the service's `tag` (a refused or replaced version), never by
    force: the image itself goes only when nothing else names or uses it.
    `image_id`: only when `tag` still names that image. Whether the tag went."""
    client = _client(client)
    errors = _docker_errors()
    try:
        image = client.images.get(tag)
        if image_id is not None and str(image.id) != image_id:
            return False
        client.images.remove(tag, force=False, noprune=False)
    except (errors.ImageNotFound, errors.NotFound):
        return False
    except errors.APIError:  # a container still uses it: the next clean-up
        return False
    return True
