"""A source upload built into a pinned, runnable image; every team is hostile.

:func:`build_source`: a ``.zip``, ``.tar.gz`` (or plain ``.tar``) of a
Python bot (``bot.py`` using the SDK) or a Node bot (``package.json`` or
``bot.js``), told apart by content, never by file name. The archive is
extracted into a temporary folder with every entry checked (no absolute
path, no ``..``, no link, device or fifo, no control character, a cap on
files and on bytes, counted while reading, so a zip bomb stops at the cap)
and made into an image by the service alone (a team's Dockerfile is a
plain file, ignored): a container is created FROM the local base image
(the SDK image for Python), the bot's files are put into it (a tar made
here, every entry owned by the build's uid), its one step that runs
anything compiles the bot (``compileall`` for Python, ``node --check`` for
Node) under the bots' runtime, with no network, memory capped and a time
limit, and the container is committed as the bot's image: one layer on its
base, nothing in between. The team's code is never run during the build
(see *The build's sandbox* below).

The build's sandbox (no file of a team runs at build time, and if one
could, it would be boxed in):

- The compile step is not a ``RUN`` step of a build (the daemon runs
  those under its default runtime, runc, whatever the bots run under): it
  runs in a container of its own (:func:`_compile`) under the bots' runtime
  (gVisor with ``--runtime runsc`` or the league's ``[containers]
  runtime``), with no network, and that container is committed as the
  bot's image with the config a bot's image has (user, folder, CMD, ENV,
  labels). No image is made before the commit: a build stopped at any
  point (a refusal, the time limit, the service killed) leaves at most its
  container, labelled ``referee.managed=1`` with its referee's pid, which
  the start-up sweep and ``referee cleanup`` remove.

- The step is ``/usr/local/bin/python -I -S -m compileall -q
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
  bot's files (the tar's entries), with no capability left, and the
  ``nproc`` ulimit (:data:`~referee.bots.images.builds.BUILD_PIDS`, which counts that uid's processes
  on the host) is a real pids cap of this build alone, with the container's
  pids limit; a CPU quota (:data:`~referee.bots.images.builds.BUILD_CPUS`), the memory cap and
  a file-size ulimit (the growth cap) as well.
- What the build adds to its parent image (the team's files and their
  ``.pyc``: the image's ``Size`` less its parent's) is capped
  (``max_growth_bytes``, :data:`DEFAULT_MAX_BUILD_GROWTH`): files over it
  are refused before the build, an image over it after, and removed.

It returns a :class:`~referee.bots.images.builds.BuildResult` (see :mod:`referee.bots.images.builds`).
Blocking: call it with ``asyncio.to_thread`` from the web layer.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import secrets
import shutil
import socket
import stat
import tarfile
import tempfile
import time
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from ..sandbox.container_limits import GVISOR_MEMORY, GVISOR_THREADS, ContainerLimits
from ..sandbox.docker_daemon import MANAGED_LABEL, docker_module, effective_runtime, is_gvisor
from ..sandbox.instance import INSTANCE_LABEL, Instance, current
from . import archives, baseimage
from .builds import (
    CHUNK,
    DEFAULT_MAX_BUILD_GROWTH,
    LOG_LIMIT,
    BuildLimits,
    BuildLog,
    BuildResult,
    DockerClient,
    Refused,
    TookTooLong,
    check_tag,
    clean_member_path,
    client_of,
    daemon_message,
    file_sha256,
    has_control,
    image_labels,
    mb,
    remove_image,
)
from .first_error import first_error, missing_module_fix

__all__ = [
    "BOT_DIR",
    "BUILD_UID_COUNT",
    "BUILD_UID_FIRST",
    "DEFAULT_BUILD_TIMEOUT_S",
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_SOURCE_BYTES",
    "DEFAULT_MAX_UNPACKED_BYTES",
    "PYTHON_PACKAGES",
    "build_source",
    "build_uid",
    "ensure_sdk_image",
]

#: Largest source archive, as uploaded.
DEFAULT_MAX_SOURCE_BYTES: Final = 32 * 1024**2
#: Most bytes a source archive may unpack to (declared and actually read).
DEFAULT_MAX_UNPACKED_BYTES: Final = 64 * 1024**2
#: Most entries (files and folders) in a source archive.
DEFAULT_MAX_FILES: Final = 2000
#: Time limit of a source build (extraction included).
DEFAULT_BUILD_TIMEOUT_S: Final = 120.0
#: The uids the compile step runs as: a range no bot (65534) nor system
#: account uses, below 2**21 (a plain tar header's uid field).
BUILD_UID_FIRST: Final = 1_000_000
BUILD_UID_COUNT: Final = 1_000_000
# The image Python source bots are built FROM, the base image with the SDK
# (``protocol/``, ``sample_bots/``, ``referee/game/``) compiled in ``/app``,
# is the instance's: Instance.sdk_tag (``referee-sdk-python:<id>``).
#: Where a bot's files go in its image.
BOT_DIR: Final = "/app/bot"
#: The distributions a Python source bot may import besides the standard
#: library, the SDK and its own files (what the base image holds).
PYTHON_PACKAGES: Final = (
    "aiohttp",
    "msgspec",
    "aiohappyeyeballs",
    "aiosignal",
    "attrs",
    "frozenlist",
    "idna",
    "multidict",
    "propcache",
    "typing-extensions",
    "yarl",
)
#: Entries skipped without a word: an OS's litter, caches, version control.
_LITTER_DIRS: Final = frozenset(
    {
        "__MACOSX",
        "__pycache__",
        ".git",
        ".hg",
        ".svn",
        ".mypy_cache",
        ".pytest_cache",
        ".venv",
        "venv",
        ".idea",
        ".vscode",
    }
)
_LITTER_FILES: Final = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})
_SDK_DOCKERFILE: Final = """\
# The image Python source bots are built FROM (made by referee.bots.images.builds).
ARG BASE
FROM ${BASE}
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 \\
    PYTHONUNBUFFERED=1 \\
    PYTHONPATH=/app \\
    BOT_UNIX=/run/bot/bot.sock
COPY protocol/ protocol/
COPY sample_bots/ sample_bots/
COPY referee/__init__.py referee/_compiled.py referee/
COPY referee/game/ referee/game/
RUN ["python", "-m", "compileall", "-q", "protocol", "sample_bots", "referee"]
"""


def build_uid(digest: str) -> int:
    """The uid a source build's compile step runs as, from the upload's
    sha256 (hex): the same upload gets the same uid, two uploads almost
    never share one, so the ``nproc`` ulimit counts this build's processes
    only."""
    return BUILD_UID_FIRST + int(digest[:12] or "0", 16) % BUILD_UID_COUNT


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
    Raises Refused for a dangerous one."""
    shown = raw.encode("unicode_escape").decode("ascii")[:200]
    if has_control(raw):
        raise Refused(f"the file name {shown!r} has control characters: rename it")
    name = raw.replace("\\", "/") if zip_name else raw
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Refused(
            f"the archive holds an absolute path, {shown!r}: archive relative paths "
            "(run zip or tar inside the bot's folder)"
        )
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(
            f"the archive holds a path that leaves its folder, {shown!r}: remove the entries with '..'"
        )
    if not parts:
        return None
    if any(len(p.encode()) > 255 for p in parts) or len(name) > 1024:
        raise Refused(f"the file name {shown!r} is too long")
    if (
        any(p in _LITTER_DIRS for p in parts[:-1])
        or parts[-1] in _LITTER_FILES
        or parts[-1] in _LITTER_DIRS
        or parts[-1].endswith((".pyc", ".pyo"))
    ):
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
            raise Refused(
                f"the archive holds more than {self.max_files} files and folders: "
                "leave out what the bot does not need"
            )

    def declare(self, size: int) -> None:
        if self.out.total + size > self.max_bytes:
            raise Refused(
                f"the archive unpacks to more than {mb(self.max_bytes)}: leave out what the bot does not need"
            )

    def directory(self, name: str) -> None:
        self._mkdirs(name)

    def _mkdirs(self, name: str) -> None:
        parts = name.split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d in self.out.files:
                raise Refused(f"{d!r} is both a file and a folder in the archive")
            if d not in self.out.dirs:
                self.out.dirs.add(d)
                (self.out.root / d).mkdir(mode=0o755, exist_ok=True)

    def file(self, name: str, source: IO[bytes], declared: int | None) -> None:
        if name in self.out.files or name in self.out.dirs:
            raise Refused(f"{name!r} appears twice in the archive")
        if "/" in name:
            self._mkdirs(name.rsplit("/", 1)[0])
        self.out.files.add(name)
        fd = os.open(self.out.root / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        written = 0
        with os.fdopen(fd, "wb") as f:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if declared is not None and written > declared:
                    raise Refused(
                        f"{name!r} unpacks to more than the size the archive declares: "
                        "a damaged or hostile archive"
                    )
                self.declare(len(chunk))
                self.out.total += len(chunk)
                if time.perf_counter() > self.deadline:
                    raise TookTooLong()
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
            raise Refused("the archive unpacks to more than the limit: leave out what the bot does not need")
        data = self.inner.read(min(len(view), self.left, CHUNK))
        self.left -= len(data)
        view[: len(data)] = data
        return len(data)


def _unpack_zip(path: Path, unpack: _Unpacker) -> None:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise Refused(f"the zip archive cannot be read ({e}): make it again") from None
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
                raise Refused(
                    f"the archive holds a symbolic link, {info.filename!r}: "
                    "put the file itself in the archive"
                )
            if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise Refused(f"{info.filename!r} is not a file nor a folder")
            if info.flag_bits & 0x1:
                raise Refused(f"{info.filename!r} is encrypted: zip without a password")
            if info.is_dir():
                unpack.directory(name)
                continue
            try:
                with zf.open(info) as src:
                    unpack.file(name, src, info.file_size)
            except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError, ValueError) as e:
                raise Refused(
                    f"{info.filename!r} cannot be unpacked ({e}): make the zip again, with plain deflate"
                ) from None


def _unpack_tar(path: Path, unpack: _Unpacker, *, gz: bool) -> None:
    with path.open("rb") as raw:
        inner: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        # Headers and padding on top of the files' own bytes.
        limit = unpack.max_bytes + (unpack.max_files + 4) * 3 * tarfile.BLOCKSIZE + 64 * 1024
        try:  # tarfile reads a pax or long-name header whole: first, every header in bounded memory
            archives.check_headers(
                raw,
                path.stat().st_size,
                gz=gz,
                limit=limit,
                refusal=f"the archive unpacks "
                f"to more than {mb(unpack.max_bytes)}: leave out what the bot does not need",
            )
        except archives.Refused as e:
            raise Refused(str(e)) from None
        raw.seek(0)
        capped = io.BufferedReader(_CappedReader(inner, limit), buffer_size=CHUNK)
        try:
            # its `with` is below: an archive that cannot be opened is refused apart
            tar = tarfile.open(fileobj=capped, mode="r|")  # noqa: SIM115
        except (tarfile.TarError, OSError, EOFError) as e:
            raise Refused(
                f"the archive cannot be read ({e}): make it again (tar -czf bot.tar.gz -C mybot .)"
            ) from None
        with tar:
            try:
                for info in tar:
                    unpack.count()
                    name = _source_name(info.name, zip_name=False)
                    if name is None:
                        unpack.out.skipped += 1
                        continue
                    if not (info.isreg() or info.isdir()):
                        kind = (
                            "a symbolic link"
                            if info.issym()
                            else "a hard link"
                            if info.islnk()
                            else "a fifo"
                            if info.isfifo()
                            else "a device"
                            if info.isdev()
                            else "a special entry"
                        )
                        raise Refused(
                            f"the archive holds {kind}, {info.name!r}: only files and "
                            "folders are allowed; put the file itself in the archive"
                        )
                    if info.isdir():
                        unpack.directory(name)
                        continue
                    unpack.declare(info.size)
                    src = tar.extractfile(info)
                    assert src is not None
                    unpack.file(name, src, info.size)
            except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
                raise Refused(f"the archive is damaged ({e}): make it again") from None


@dataclass
class _Bot:
    kind: str  # "python" | "node"
    root: str  # "" or "folder/"
    entry: str  # relative to root


_NO_BOT: Final = (
    "no bot.py (a Python bot) nor package.json or bot.js (a Node bot) at the top of the archive "
    "or in its single top folder: archive the bot's folder, e.g. `cd mybot && zip -r ../mybot.zip .`"
)


def _find_bot(out: _Extracted, log: BuildLog) -> _Bot:
    tops = {n.split("/", 1)[0] for n in out.files | out.dirs}
    root = ""
    markers = {"bot.py", "bot.js", "package.json"}
    if not tops & markers and len(tops) == 1 and next(iter(tops)) in out.dirs:
        root = next(iter(tops)) + "/"
    here = {n[len(root) :] for n in out.files if n.startswith(root)}
    if "Dockerfile" in here or "dockerfile" in here:
        log.line("note: your Dockerfile is ignored: the service builds every source bot with its own")
    python = "bot.py" in here
    node = "package.json" in here or "bot.js" in here
    if python and node:
        raise Refused(
            "the archive holds both bot.py (Python) and package.json or bot.js (Node): "
            "keep only one bot in it"
        )
    if python:
        _check_requirements(out, root, here, log)
        return _Bot("python", root, "bot.py")
    if not node:
        if "manifest.json" in here and any(n.endswith("layer.tar") or n.startswith("blobs/") for n in here):
            raise Refused("this is a docker save archive, not a source archive: submit it as an image")
        raise Refused(_NO_BOT)
    entry = "bot.js" if "bot.js" in here else "index.js"
    if "package.json" in here:
        package = out.root / (root + "package.json")
        if package.stat().st_size > 1024**2:
            raise Refused("package.json is larger than 1 MiB")
        try:
            meta = json.loads(package.read_bytes())
        except (ValueError, UnicodeDecodeError) as e:
            raise Refused(f"package.json is not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise Refused("package.json is not a JSON object")
        main = meta.get("main")
        if main is not None:
            clean = clean_member_path(str(main)) if isinstance(main, str) else None
            if clean is None:
                raise Refused(f'package.json\'s "main" is not a relative path: {main!r}')
            entry = clean
        deps = meta.get("dependencies") or {}
        if isinstance(deps, dict) and deps and not any(n.startswith("node_modules/") for n in here):
            raise Refused(
                f"package.json needs {', '.join(sorted(map(str, deps))[:5])} but the archive has "
                "no node_modules: the build has no network, so npm install cannot run; "
                "run npm install --omit=dev first and include node_modules"
            )
    if entry not in here:
        raise Refused(
            f"the Node bot's entry file {entry!r} is not in the archive: add it, or name "
            'the file in package.json\'s "main"'
        )
    return _Bot("node", root, entry)


_REQ_NAME: Final = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _check_requirements(out: _Extracted, root: str, here: set[str], log: BuildLog) -> None:
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
        raise Refused(
            f"requirements.txt asks for {', '.join(missing[:5])}: the build has no network, "
            "so nothing is installed; a bot may use only the standard library, aiohttp, "
            "msgspec, the SDK and pure-Python modules it brings in the archive"
        )
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
    raise Refused(
        f"not a .zip or .tar.gz archive (the file is {what}): "
        "make one with `zip -r bot.zip .` or `tar -czf bot.tar.gz .` in the bot's folder"
    )


def ensure_sdk_image(client: DockerClient | None = None, *, instance: Instance | None = None) -> str:
    """The image Python source bots are built FROM (the instance's
    ``referee-sdk-python:<id>``: the base image with the SDK), built FROM the
    base image's pinned id, or reused; its id. Blocking."""
    client = client_of(client)
    inst = instance or current()
    base_id = baseimage.build_base_image(client, instance=inst)
    return baseimage.build_image(
        client,
        inst.sdk_tag,
        _SDK_DOCKERFILE,
        dict(baseimage.sdk_files()),
        buildargs={"BASE": base_id},
        base_id=base_id,
        instance=inst,
    )


def _commands(bot: _Bot) -> tuple[list[str], list[str]]:
    """(the compile step's command, the bot's CMD)."""
    if bot.kind == "python":
        # -I: no cwd, script folder, PYTHON* variable nor user site on sys.path;
        # -S: no site (sitecustomize, usercustomize, .pth files)
        return ["/usr/local/bin/python", "-I", "-S", "-m", "compileall", "-q", BOT_DIR], ["python", bot.entry]
    return ["/usr/local/bin/node", "--check", f"{BOT_DIR}/{bot.entry}"], ["node", bot.entry]


def _environment(bot: _Bot) -> dict[str, str]:
    """What `bot`'s image sets on top of its base image's environment (the
    SDK image sets PYTHONUNBUFFERED, PYTHONPATH=/app and BOT_UNIX)."""
    if bot.kind == "python":
        return {"PYTHONDONTWRITEBYTECODE": "1"}
    return {"BOT_UNIX": "/run/bot/bot.sock", "NODE_ENV": "production"}


def _compile(
    client: DockerClient,
    base_id: str,
    files: IO[bytes],
    *,
    tag: str,
    bot: _Bot,
    uid: int,
    labels: Mapping[str, str],
    limits: BuildLimits,
    runtime: str | None,
    deadline: float,
    log: BuildLog,
    step_failed: str,
    instance: Instance,
) -> str:
    """The build: a container FROM `base_id`, `files` (a tar of the bot's
    folder at :data:`BOT_DIR`, owned by `uid`) put into it, `bot`'s check
    run in it under `runtime` (the bots' own: gVisor under ``--runtime
    runsc``; a build's ``RUN`` step would run under the daemon's default,
    runc, whatever the bots run under), as `uid` from ``/``, no network, no
    capability, under `limits`; then committed as `tag` with a bot image's
    config (its labels, environment, user, folder and CMD): one layer on
    `base_id`, no image in between (nothing left when it stops half-way
    but this container, labelled for the sweep). The committed image's id
    (blocking)."""
    docker_mod = docker_module()
    check, cmd = _commands(bot)
    log.line(
        f"the bot's files into {BOT_DIR}, owned by {uid}:{uid}, in a container FROM {base_id}; "
        f"the compile step there, as {uid}:{uid} from /: {json.dumps(check)}"
    )
    gvisor = is_gvisor(runtime, client)
    pids = limits.pids + (GVISOR_THREADS if gvisor else 0)
    ours = {
        MANAGED_LABEL: "1",  # found and removed by `referee cleanup` when the service is killed meanwhile
        "referee.pid": str(os.getpid()),
        "referee.host": socket.gethostname(),
        INSTANCE_LABEL: instance.id,
    }
    try:
        container = client.containers.create(
            base_id,
            command=check,
            environment=_environment(bot),  # kept by the commit, with the base image's
            name=f"{instance.container_prefix}build-{secrets.token_hex(4)}",
            user=f"{uid}:{uid}",
            working_dir="/",  # the compile step runs outside the team's folder
            labels=ours,
            network_mode="none",
            mem_limit=limits.memory + (GVISOR_MEMORY if gvisor else 0),
            memswap_limit=limits.memory + (GVISOR_MEMORY if gvisor else 0),
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=pids,
            ulimits=[
                docker_mod.types.Ulimit(name="nproc", soft=limits.pids, hard=limits.pids),
                docker_mod.types.Ulimit(
                    name="fsize", soft=limits.max_growth_bytes, hard=limits.max_growth_bytes
                ),
            ],
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            runtime=runtime,
            healthcheck={"test": ["NONE"]},
            log_config=docker_mod.types.LogConfig(
                type="json-file", config={"max-size": str(LOG_LIMIT), "max-file": "1"}
            ),
        )
    except docker_mod.errors.APIError as e:
        raise Refused(f"the Docker daemon refused the build: {daemon_message(e)}") from None
    try:
        try:
            container.put_archive("/", files)
            container.start()
        except docker_mod.errors.APIError as e:
            raise Refused(f"the Docker daemon refused the build: {daemon_message(e)}") from None
        try:
            status = container.wait(timeout=max(0.5, deadline - time.perf_counter()))
        except Exception:  # noqa: BLE001 - requests' timeout: still compiling at the deadline
            raise TookTooLong() from None
        output = ""
        with contextlib.suppress(docker_mod.errors.DockerException):
            output = bytes(container.logs(stdout=True, stderr=True)[:LOG_LIMIT]).decode(errors="replace")
            log.add(output)
        container.reload()
        state = container.attrs.get("State") or {}
        ran_under = (container.attrs.get("HostConfig") or {}).get("Runtime") or "the daemon's default"
        code = int(status.get("StatusCode", -1))
        log.line(f"the compile step ran under the runtime {ran_under} as {uid}:{uid}: exit code {code}")
        if state.get("OOMKilled") or code == 137:
            raise Refused(
                f"the build ran out of its {mb(limits.memory)} of memory (compiling the bot's files): "
                "a module that big cannot be compiled here; split it or make it smaller"
            )
        if code != 0:
            raise Refused(step_failure(step_failed, output))
        repository, _, version = tag.rpartition(":")
        try:
            image = container.commit(
                repository=repository,
                tag=version,
                conf={
                    "User": "65534:65534",
                    "WorkingDir": BOT_DIR,
                    "Cmd": cmd,
                    "Entrypoint": None,
                    "Healthcheck": {"Test": ["NONE"]},
                    # the container's own labels stay on the container (a commit would merge them in)
                    "Labels": {**labels, **dict.fromkeys(ours, ""), INSTANCE_LABEL: labels[INSTANCE_LABEL]},
                },
            )
        except docker_mod.errors.APIError as e:
            raise Refused(f"the Docker daemon refused the build: {daemon_message(e)}") from None
        return str(image.id)
    finally:
        with contextlib.suppress(docker_mod.errors.DockerException):
            container.remove(force=True)


def _files(extracted: _Extracted, bot: _Bot, uid: int, out: IO[bytes]) -> None:
    """The bot's folder (its top stripped) as a tar of :data:`BOT_DIR` from
    ``/``, every entry owned by `uid` (the daemon keeps a tar's owners)."""
    top = BOT_DIR.lstrip("/")
    with tarfile.open(fileobj=out, mode="w") as tar:

        def add(name: str, data: IO[bytes] | None, size: int, *, folder: bool = False) -> None:
            info = tarfile.TarInfo(f"{top}/{name}" if name else top)
            info.mtime = 0
            info.uid = info.gid = uid
            if folder:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            else:
                info.size = size
                info.mode = 0o644
            tar.addfile(info, data)

        add("", None, 0, folder=True)
        for d in sorted(extracted.dirs):
            if d.startswith(bot.root) and d + "/" != bot.root:
                add(d[len(bot.root) :], None, 0, folder=True)
        for name in sorted(extracted.files):
            if name.startswith(bot.root):
                path = extracted.root / name
                with path.open("rb") as f:
                    add(name[len(bot.root) :], f, path.stat().st_size)


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
    limits: ContainerLimits | None = None,
) -> BuildResult:
    """Build the bot source archive at `path` into the image `tag` (blocking).

    The kind (zip, tar.gz, tar) is read from the file's first bytes; the bot
    (Python or Node) from its files. `timeout_s` bounds the extraction and
    the build together; `max_bytes` the upload, `max_unpacked_bytes` and
    `max_files` what it unpacks to; `max_growth_bytes` what the build may
    add to its parent image (the bot's files and their compiled form).
    `workdir`: where the temporary build folder goes (default: the system's
    temp folder). `instance`: whose base images it is built FROM (default:
    the process's). `limits`: the competition's container limits, whose
    runtime the compile step runs under like its bots (the operator's
    ``--runtime`` over them: :func:`~referee.bots.sandbox.docker_daemon.effective_runtime`).
    """
    check_tag(tag)
    image_labels(labels, "python", "")  # ValueError now for a bad one
    t0 = time.perf_counter()
    log = BuildLog()
    file = Path(path)
    digest = ""
    kind = ""
    parent: str | None = None

    def result(image_id: str | None, reason: str | None) -> BuildResult:
        if reason is not None:
            log.line(f"REFUSED: {reason}")
        return BuildResult(
            ok=reason is None,
            image_id=image_id,
            tag=tag,
            kind=kind,
            log=log.text(),
            reason=reason,
            seconds=time.perf_counter() - t0,
            input_sha256=digest,
            parent_id=parent,
        )

    tmp = Path(tempfile.mkdtemp(prefix="referee-build-", dir=workdir))
    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise Refused(
                f"the source archive is {mb(size)}, more than the limit of {mb(max_bytes)}: "
                "leave out what the bot does not need"
            )
        archive = _detect(file)
        digest = file_sha256(file)
        log.line(f"source: {archive}, {mb(size)}, sha256 {digest}")
        client = client_of(client)
        t_team = time.perf_counter()
        deadline = t_team + timeout_s
        extracted = _Extracted(tmp / "src")
        extracted.root.mkdir()
        unpack = _Unpacker(extracted, max_files=max_files, max_bytes=max_unpacked_bytes, deadline=deadline)
        if archive == "zip":
            _unpack_zip(file, unpack)
        else:
            _unpack_tar(file, unpack, gz=archive == "tar.gz")
        log.line(
            f"unpacked {len(extracted.files)} files, {mb(extracted.total)}"
            + (f" ({extracted.skipped} caches and OS files left out)" if extracted.skipped else "")
        )
        bot = _find_bot(extracted, log)
        kind = bot.kind
        if extracted.total > max_growth_bytes:
            raise Refused(
                f"the bot's files are {mb(extracted.total)}, more than the {mb(max_growth_bytes)} "
                "a build may add to its image: leave out what the bot does not need (data, "
                "caches, unused node_modules)"
            )
        t_ours = time.perf_counter()  # the service's own base image: not on the team's clock
        if bot.kind == "python":
            parent = ensure_sdk_image(client, instance=instance)
        else:
            try:
                parent = baseimage.build_node_base_image(client, instance=instance)
            except FileNotFoundError:
                raise Refused(
                    "this server cannot build Node bots (no node here): submit a Python bot or an image"
                ) from None
        deadline += time.perf_counter() - t_ours
        log.line(f"a {bot.kind} bot: {bot.root}{bot.entry}")
        ours = image_labels(labels, bot.kind, digest)
        uid = build_uid(digest)
        check = (
            "Python could not compile the bot's files"
            if bot.kind == "python"
            else f"node --check found an error in {bot.entry}"
        )
        with tempfile.TemporaryFile(dir=tmp) as files:
            _files(extracted, bot, uid, files)
            files.seek(0)
            shutil.rmtree(extracted.root, ignore_errors=True)
            image_id = _compile(
                client,
                parent,
                files,
                tag=tag,
                bot=bot,
                uid=uid,
                labels=ours,
                limits=BuildLimits(max_growth_bytes=max_growth_bytes),
                runtime=effective_runtime(limits or ContainerLimits())[0],
                deadline=deadline,
                log=log,
                step_failed=check,
                instance=instance or current(),
            )
        _check_growth(client, tag, image_id, parent, files=extracted.total, cap=max_growth_bytes, log=log)
        log.line(f"built {tag}: {image_id} in {time.perf_counter() - t_team:.1f} s")
        return result(image_id, None)
    except Refused as e:
        return result(None, str(e))
    except TookTooLong:
        return result(
            None, f"the build took longer than {timeout_s:g} s: make the bot smaller (fewer or smaller files)"
        )
    except FileNotFoundError:
        return result(None, "the uploaded file is gone (internal error): upload it again")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def step_failure(check: str, output: str) -> str:
    """The refusal of a failed compile step `check` ("Python could not compile
    the bot's files"), one line: the first error in its `output` (file, line,
    message; :func:`~referee.bots.images.first_error.first_error`), else a
    pointer to the build log. It starts with `check`, the team's words
    (:func:`referee.service.health.refusal_is_service` reads nothing after it)."""
    found = first_error(output)
    if found is None:
        return f"{check}: the build log shows the error; fix it and upload again"
    if found.module is not None:
        return f"{check}: {found}: {missing_module_fix(found)}"
    return f"{check}: {found}; fix it and upload again"


def _check_growth(
    client: DockerClient, tag: str, image_id: str, parent: str, *, files: int, cap: int, log: BuildLog
) -> None:
    """Refuse (and remove) the image `image_id` when it adds more than `cap`
    to `parent`: the daemon's ``Size`` of each (all their layers)."""
    try:
        added = int(client.images.get(image_id).attrs["Size"]) - int(client.images.get(parent).attrs["Size"])
    except Exception as e:  # noqa: BLE001 - docker's errors: not the team's fault
        remove_image(tag, client, image_id=image_id)
        raise Refused(
            f"the server could not measure the built image ({daemon_message(e)}): upload it again later"
        ) from None
    if added > cap:
        remove_image(tag, client, image_id=image_id)
        raise Refused(
            f"the build adds {mb(added)} to the image (the bot's files are {mb(files)}, "
            f"the rest is their compiled form), more than the limit of {mb(cap)}: leave out "
            "what the bot does not need"
        )
    log.line(f"the build added {mb(added)} to the image (at most {mb(cap)})")
