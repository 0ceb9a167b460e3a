"""What every build of a team's upload shares; every team is hostile.

Two kinds of upload, each a file already on disk (the web layer streams it
there with its own size cap), each made into a pinned, runnable image:
a ``docker save`` archive loaded (:func:`referee.bots.images.image_archive.load_image_archive`)
and a source archive built (:func:`referee.bots.images.source_build.build_source`).
Here: what they return, their log, the daemon's streamed build with its
deadline and limits, the service's labels, and :func:`remove_image`.

Both return a :class:`BuildResult`: the image id the service pins, the log
(capped, control characters removed; for that team's eyes only: it names
their files) and, when refused, one line saying what is wrong and how to
fix it. A refusal is data; only a missing daemon raises
(:class:`~referee.bots.sandbox.docker_daemon.DockerUnavailable`: not the team's fault).

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
import hashlib
import json
import posixpath
import re
import socket
import tarfile
import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from ..sandbox.instance import INSTANCE_LABEL, current

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any

__all__ = [
    "BUILD_CPUS",
    "BUILD_MEMORY",
    "BUILD_PIDS",
    "BUILT_BY_LABEL",
    "DEFAULT_MAX_BUILD_GROWTH",
    "INPUT_LABEL",
    "LOG_LIMIT",
    "SOURCE_LABEL",
    "BuildLimits",
    "BuildResult",
    "file_sha256",
    "remove_image",
]  # the rest (the log, the streamed build, labels, refusals): shared with image_archive and source_build

#: Memory of the build's containers (the compile step), swap included.
BUILD_MEMORY: Final = 512 * 1024**2
#: Processes (threads included) the compile step may have at once: the
#: ``nproc`` ulimit of its own uid (:func:`~referee.bots.images.source_build.build_uid`). ``node --check``
#: needs ~10.
BUILD_PIDS: Final = 64
#: CPUs of the compile step (a CFS quota).
BUILD_CPUS: Final = 1.0
#: Most a source build may add to its parent image (the bot's files and
#: their compiled form), by default (``referee serve --max-build-growth``).
DEFAULT_MAX_BUILD_GROWTH: Final = 64 * 1024**2
#: Cap of :attr:`BuildResult.log` (its head and its tail are kept).
LOG_LIMIT: Final = 64 * 1024
#: Every image made here: ``referee.built-by=referee``.
BUILT_BY_LABEL: Final = "referee.built-by"
#: The sha256 of the uploaded file.
INPUT_LABEL: Final = "referee.input-sha256"
#: ``image``, ``python`` or ``node``.
SOURCE_LABEL: Final = "referee.source"
_TAG: Final = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
)
CHUNK: Final = 1024 * 1024


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
        ulimits = [
            {"Name": "nproc", "Soft": self.pids, "Hard": self.pids},
            {"Name": "fsize", "Soft": self.max_growth_bytes, "Hard": self.max_growth_bytes},
        ]
        return {
            "memory": self.memory,
            "memswap": self.memory,
            "cpuperiod": 100_000,
            "cpuquota": max(1000, int(self.cpus * 100_000)),
            "ulimits": json.dumps(ulimits),
        }


class Refused(Exception):
    """The upload is refused: str(self) is the reason."""


class TookTooLong(Exception):
    pass


def check_tag(tag: str) -> None:
    if not _TAG.match(tag):
        raise ValueError(f"not a lowercase repository:tag: {tag!r}")


def client_of(client: DockerClient | None) -> DockerClient:
    if client is not None:
        return client
    from ..sandbox.docker_daemon import docker_client

    return docker_client()


def docker_errors() -> Any:
    from ..sandbox.docker_daemon import docker_module

    return docker_module().errors


def file_sha256(path: Path) -> str:
    """The sha256 of a file, hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def mb(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n < 1024**3 else f"{n / 1024**3:.2f} GiB"


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-9;?]*[A-Za-z]")


class BuildLog:
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


def daemon_message(error: BaseException) -> str:
    explanation = getattr(error, "explanation", None)
    text = str(explanation or error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


@dataclass
class DaemonStream:
    """One streamed Engine API call (build or load) in a worker thread, so a
    deadline can cut it: the connection is shut down, and the daemon cancels
    the build (and removes its container) when its client goes away."""

    client: DockerClient
    path: str
    params: Mapping[str, Any]
    body: Any
    log: BuildLog
    headers: Mapping[str, str] = field(default_factory=lambda: {"Content-Type": "application/tar"})
    cancelled: threading.Event = field(default_factory=threading.Event)
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    response: Any = None

    def run(self, timeout_s: float) -> None:
        """Raise TookTooLong after `timeout_s`, or re-raise what the call raised."""
        worker = threading.Thread(target=self._work, name=f"docker{self.path}", daemon=True)
        worker.start()
        worker.join(max(0.0, timeout_s))
        if worker.is_alive():
            self.cancel()
            worker.join(10.0)
            raise TookTooLong()
        if self.error is not None:
            raise self.error

    def _work(self) -> None:
        api = self.client.api
        try:
            # docker-py's build() and load_image() hide the response, which
            # a deadline must be able to close: the same request, kept.
            self.response = api._post(
                api._url(self.path),
                data=self.body,
                params=dict(self.params),
                headers=dict(self.headers),
                stream=True,
                timeout=None,
            )
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


def daemon_build(
    client: DockerClient,
    context: IO[bytes],
    *,
    tag: str,
    timeout_s: float,
    log: BuildLog,
    step_failed: str = "",
    limits: BuildLimits | None = None,
) -> str:
    """Build `context` (a tar holding the Dockerfile) as `tag`, no network,
    its containers under `limits`; the id. (Labels are in the Dockerfile,
    one LABEL step: the API's labels would make one step each.)

    Raises TookTooLong, or Refused with the daemon's message."""
    params = {
        "t": tag,
        "q": False,
        "nocache": False,
        "rm": True,
        "forcerm": True,
        "pull": False,
        "dockerfile": "Dockerfile",
        "networkmode": "none",
        **(limits or BuildLimits()).params(),
    }
    stream = DaemonStream(client, "/build", params, context, log)
    try:
        try:
            stream.run(timeout_s)
        except docker_errors().APIError as e:
            raise Refused(f"the Docker daemon refused the build: {daemon_message(e)}") from None
        if (failed := stream.failure()) is not None:
            if "returned a non-zero code: 137" in failed:  # SIGKILL: the step's memory cap
                memory = (limits or BuildLimits()).memory
                raise Refused(
                    f"the build ran out of its {mb(memory)} of memory (compiling the bot's files): "
                    "a module that big cannot be compiled here; split it or make it smaller"
                )
            if step_failed and "returned a non-zero code" in failed:
                raise Refused(step_failed)
            raise Refused(f"the build failed: {(failed.splitlines() or [''])[0]}")
        ids = [
            str(m["aux"]["ID"])
            for m in stream.messages
            if isinstance(m.get("aux"), dict) and m["aux"].get("ID")
        ]
        if not ids:
            raise Refused("the build ended without an image (see the log)")
        return ids[-1]
    except (Refused, TookTooLong):
        _drop_steps(client, stream.messages)
        raise


_STEP: Final = re.compile(r"^ ---> ([0-9a-f]{12,64})\s*$")


def _drop_steps(client: DockerClient, messages: list[dict[str, Any]]) -> None:
    """Remove the images the steps of a failed build left (newest first),
    when untagged and unused: never the image it was built FROM, nor one
    another image or container still needs (the daemon refuses those)."""
    steps = [
        m.group(1)
        for msg in messages
        if isinstance(text := msg.get("stream"), str) and (m := _STEP.match(text))
    ]
    for short in reversed(steps[1:]):  # steps[0]: the FROM image
        drop_untagged(client, short, prune=False)


def drop_untagged(client: DockerClient, image_ref: str, *, prune: bool = True) -> None:
    with contextlib.suppress(Exception):
        image = client.images.get(image_ref)
        if not image.tags:
            client.images.remove(str(image.id), force=False, noprune=not prune)


def clean_member_path(name: str) -> str | None:
    """`name` as a plain relative path inside the archive, or None."""
    if not name or "\\" in name or has_control(name):
        return None
    norm = posixpath.normpath(name)
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        return None
    return norm


def has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in text)


def tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    return info.tobuf(format=tarfile.PAX_FORMAT)


def tar_padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


LABEL_KEY: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")


def image_labels(extra: Mapping[str, str] | None, kind: str, digest: str) -> dict[str, str]:
    """The image's labels: the caller's, then the service's own. ValueError
    for a key that is not ``[A-Za-z0-9._/-]`` or a value with a control character."""
    out = {}
    for key, value in (extra or {}).items():
        if not LABEL_KEY.match(key) or has_control(value):
            raise ValueError(f"not a usable label: {key!r}={value!r}")
        out[key] = value
    out.setdefault(INSTANCE_LABEL, current().id)  # the caller's instance, else the process's
    out.update({BUILT_BY_LABEL: "referee", SOURCE_LABEL: kind, INPUT_LABEL: digest})
    return out


def label_line(labels: Mapping[str, str]) -> str:
    """One Dockerfile LABEL instruction (quoted: no variable is expanded)."""

    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'

    return "LABEL " + " ".join(f"{quote(k)}={quote(v)}" for k, v in sorted(labels.items()))


def remove_image(tag: str, client: DockerClient | None = None, *, image_id: str | None = None) -> bool:
    """Remove the service's `tag` (a refused or replaced version), never by
    force: the image itself goes only when nothing else names or uses it.
    `image_id`: only when `tag` still names that image. Whether the tag went."""
    client = client_of(client)
    errors = docker_errors()
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
