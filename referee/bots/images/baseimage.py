"""Container images without a registry: a base image from this machine's Python.

Where ``FROM python:3.11-slim`` cannot be pulled (no registry, an offline CI
machine), :func:`build_base_image` makes an equivalent base image locally:
it copies the running interpreter, its standard library (without ``test/``,
``idlelib``, ``tkinter``, ...), the shared libraries ``ldd`` names, and the
site-packages a bot needs (aiohttp and msgspec with their dependencies) into
a tar archive, which the Docker daemon imports (``docker import``). No shell
runs inside it: it holds no ``/bin/sh``, only ``python``.

:func:`build_bot_image` then builds a sample bot's image FROM it with
``docker/bot-python.Dockerfile`` (the template given to bot authors) through
the Engine API's build endpoint (the legacy builder), with a build context
holding only what the bot needs: ``protocol/``, ``sample_bots/`` and
``referee/game/`` (the searcher uses the rules engine).

Every image carries the hash of its inputs as the label ``referee.inputs``
and the instance's label ``referee.instance`` (:mod:`referee.bots.sandbox.instance`):
the image this instance built as that tag, found **by the id it pinned**
(never by what the tag names now: another install on the daemon may have
re-tagged it, labels and all), is reused when its hash is the same, so
building again costs a hash of the inputs (~0.1 s). Images built FROM the
base image name it by that id. Tags carry the instance id:
``referee-base:<id>``, ``referee-node-base:<id>``, ``referee-bot-greedy:<id>``.

``python -m referee.bots.images.baseimage [--bot greedy ...]`` builds the base
image and the sample bots' images and prints their tags.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata as metadata
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from ..sandbox.instance import INSTANCE_LABEL, Instance, current

#: The docker package ships no type information: its objects are Any here.
DockerClient = Any

__all__ = [
    "SAMPLE_BOTS",
    "build_base_image",
    "build_bot_image",
    "build_image",
    "build_node_base_image",
    "build_program_image",
    "bot_image_tag",
    "ensure_sample_images",
]

# The tags of the locally made base images are the instance's:
# Instance.base_tag (``referee-base:<id>``) and Instance.node_base_tag.
#: The Python sample bots (modules of ``sample_bots``).
SAMPLE_BOTS: Final = ("greedy", "random", "tactician", "searcher")

#: Bump when the recipe changes: every image is then built again.
RECIPE: Final = "4"

ROOT: Final = Path(__file__).resolve().parents[3]
DOCKER_DIR: Final = ROOT / "docker"

#: Distributions copied into the base image, with their dependencies.
PACKAGES: Final = ("aiohttp", "msgspec")

#: Parts of the standard library a bot never needs (and ~180 MB of them).
_STDLIB_SKIP: Final = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "dist-packages",
    "__phello__",
    "pydoc_data",
}
_DYNLOAD_SKIP: Final = re.compile(r"^(_tkinter|_test|xxlimited|_ctypes_test|_xxtestfuzz)")

LABEL: Final = "referee.inputs"

Log = Callable[[str], None]


def _docker_module() -> Any:
    from ..sandbox.docker_daemon import docker_module as load

    return load()


def _client(client: DockerClient | None) -> DockerClient:
    """`client`, else the process's checked one (DockerUnavailable says what to do)."""
    if client is not None:
        return client
    from ..sandbox.docker_daemon import docker_client

    return docker_client()


# --------------------------------------------------------- the file list


def _stdlib_files(stdlib: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(stdlib):
        here = Path(dirpath)
        if here == stdlib:
            dirnames[:] = [d for d in dirnames if d not in _STDLIB_SKIP and not d.startswith("config-")]
        else:
            dirnames[:] = [d for d in dirnames if d not in ("test", "tests")]
        for f in filenames:
            if here.name == "lib-dynload" and _DYNLOAD_SKIP.match(f):
                continue
            yield here / f


def _requirements(name: str) -> list[str]:
    """The names of the distributions `name` needs on this interpreter."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pytest brings packaging
        Requirement = None  # type: ignore[assignment,misc]  # noqa: N806
    out = []
    for text in metadata.requires(name) or []:
        if Requirement is not None:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            out.append(req.name)
        elif "extra ==" not in text:  # pragma: no cover
            out.append(re.split(r"[\s;<>=!~\[(]", text, maxsplit=1)[0])
    return out


def _package_files(roots: Iterable[str]) -> dict[str, Path]:
    """site-packages files of `roots` and their dependencies: {relative path: file}."""
    files: dict[str, Path] = {}
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel:
                continue
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                files[rel] = path
                if path.suffix == ".py":  # its compiled form, so imports need not compile
                    pyc = Path(importlib.util.cache_from_source(str(path)))
                    if pyc.is_file():
                        files[str(Path(rel).parent / "__pycache__" / pyc.name)] = pyc
        todo += _requirements(name)
    return files


#: The dynamic loader's usual places (what ``ldd`` itself runs with ``--list``).
_LOADERS: Final = (
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-linux-armhf.so.3",
    "/lib/ld-linux.so.2",
    "/lib/ld64.so.2",
    "/lib/ld64.so.1",
)


def _loader_lists(files: list[str]) -> str:
    """What ``ldd`` would print for `files`, from the dynamic loader's ``--list``
    (one run a file): for a machine without ``ldd``, such as the service's own
    container made FROM the project's base image, which has no shell for
    ``ldd``'s script. Empty when no loader is found."""
    loader = next((p for p in _LOADERS if os.path.exists(p)), None)
    if loader is None:
        return ""
    out = []
    for f in files:
        try:
            done = subprocess.run([loader, "--list", f], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        out.append(done.stdout)
    return "".join(out)


def _needed_libs(binaries: Iterable[Path]) -> set[Path]:
    """The shared libraries ``ldd`` names for `binaries` (absolute paths);
    without ``ldd``, what the dynamic loader lists."""
    libs: set[Path] = set()
    files = [str(b) for b in binaries]
    if not files:
        return libs
    try:  # one ldd for all of them
        out = subprocess.run(["ldd", *files], capture_output=True, text=True, timeout=60).stdout
    except FileNotFoundError:
        out = _loader_lists(files)
    except (OSError, subprocess.TimeoutExpired):
        return libs
    for line in out.splitlines():  # "libz.so.1 => /lib/.../libz.so.1 (0x...)", "/lib64/ld-... (0x...)"
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.add(Path(m.group(1)))
    return libs


_PASSWD: Final = (
    b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
)
_GROUP: Final = b"root:x:0:\nnogroup:x:65534:\n"


def python_root(
    extra_packages: Iterable[str] = (),
    *,
    libraries: bool = True,
) -> tuple[dict[str, Path | bytes], list[str]]:
    """What the Python base image holds: {path in the image: host file or bytes},
    and the image's settings (``docker import --change`` lines). `libraries`:
    add the shared libraries (False: only what decides them, for the hash)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    exe = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    entries: dict[str, Path | bytes] = {}
    entries[f"usr/local/bin/python{version}"] = exe
    for f in _stdlib_files(stdlib):
        entries[f"usr/local/lib/python{version}/{f.relative_to(stdlib)}"] = f
    for rel, f in _package_files((*PACKAGES, *extra_packages)).items():
        entries[f"usr/local/lib/python{version}/site-packages/{rel}"] = f
    if libraries:
        add_libraries(entries)
    entries["etc/passwd"] = _PASSWD
    entries["etc/group"] = _GROUP
    changes = [
        "ENV PATH=/usr/local/bin:/usr/bin:/bin",
        "ENV LD_LIBRARY_PATH=/usr/local/lib",
        "ENV LANG=C.UTF-8",
        "ENV PYTHONUNBUFFERED=1",
        "WORKDIR /app",
        'CMD ["python3"]',
    ]
    return entries, changes


def add_libraries(entries: dict[str, Path | bytes]) -> None:
    """Add the shared libraries the interpreter and the extension modules in
    `entries` need (what ``python_root(libraries=True)`` adds)."""
    exe = Path(sys.executable).resolve()
    elves = [p for p in entries.values() if isinstance(p, Path) and (p.suffix == ".so" or p == exe)]
    for lib in _needed_libs(elves):
        real = lib.resolve()
        if str(lib).startswith(sys.base_prefix) or "libpython" in lib.name:
            entries[f"usr/local/lib/{lib.name}"] = real
        else:
            entries[str(lib).lstrip("/")] = real


def _fingerprint(
    entries: Mapping[str, Path | bytes], extra: Iterable[str] = (), *, contents: bool = False
) -> str:
    """A hash of an image's inputs: the recipe, `extra`, and each entry's
    name and bytes — or, for files, their size and mtime (cheap, for the big
    base image) unless `contents` (small build contexts: hash the bytes)."""
    h = hashlib.sha256(RECIPE.encode())
    for part in extra:
        h.update(part.encode() + b"\0")
    for name in sorted(entries):
        src = entries[name]
        h.update(name.encode() + b"\0")
        if isinstance(src, bytes):
            h.update(hashlib.sha256(src).digest())
        elif contents:
            h.update(hashlib.sha256(src.read_bytes()).digest())
        else:
            st = src.stat()
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def _write_tar(
    entries: Mapping[str, Path | bytes],
    out: io.BufferedIOBase | Any,
    symlinks: Mapping[str, str] = {},
    dirs: Iterable[str] = (),
) -> None:
    with tarfile.open(fileobj=out, mode="w") as tar:
        made: set[str] = set()

        def add_dir(path: str) -> None:
            parts = path.split("/")
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d and d not in made:
                    made.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o1777 if d == "tmp" else 0o755
                    info.mtime = 0
                    tar.addfile(info)

        for d in dirs:
            add_dir(d)
        for name in sorted(entries):
            parent = name.rsplit("/", 1)[0] if "/" in name else ""
            if parent:
                add_dir(parent)
            src = entries[name]
            if isinstance(src, bytes):
                info = tarfile.TarInfo(name)
                info.size = len(src)
                info.mode = 0o644
                info.mtime = 0
                tar.addfile(info, io.BytesIO(src))
            else:
                st = src.stat()
                info = tarfile.TarInfo(name)
                info.size = st.st_size
                info.mode = 0o755 if (st.st_mode & 0o111) else 0o644
                info.mtime = int(st.st_mtime)
                with src.open("rb") as f:
                    tar.addfile(info, f)
        for name, target in symlinks.items():
            parent = name.rsplit("/", 1)[0]
            add_dir(parent)
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)


def _existing(client: DockerClient, tag: str, inputs: str, inst: Instance) -> str | None:
    """The image `inst` built as `tag` from `inputs`, by the id it pinned,
    `tag` pointed at it again; None when there is none. What `tag` names
    now is never looked at: another install may have re-tagged it to an
    image of its own with the same labels."""
    docker_mod = _docker_module()

    pinned = inst.pinned(tag)
    if pinned is None:
        return None
    try:
        image = client.images.get(pinned)
    except docker_mod.errors.ImageNotFound:
        return None
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    if labels.get(LABEL) != inputs or labels.get(INSTANCE_LABEL) != inst.id:
        return None
    inst.ensure_tagged(client, str(image.id), tag)
    return str(image.id)


def _imported_id(response: Any) -> str | None:
    """The image id in the daemon's answer to an import (JSON lines, the last ``{"status": "sha256:..."}``)."""
    for line in reversed(str(response or "").splitlines()):
        with contextlib.suppress(ValueError, AttributeError):
            status = json.loads(line).get("status", "")
            if isinstance(status, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", status):
                return status
    return None


def _import(
    client: DockerClient,
    tag: str,
    entries: Mapping[str, Path | bytes],
    changes: list[str],
    symlinks: Mapping[str, str],
    log: Log,
    inst: Instance,
) -> str:
    repository, _, version = tag.partition(":")
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile(suffix=".tar") as tmp:
        _write_tar(entries, tmp, symlinks, dirs=("tmp", "run", "app", "root"))
        tmp.flush()
        size = tmp.tell()
        answer = client.api.import_image_from_file(
            tmp.name,
            repository=repository,
            tag=version or "latest",
            changes=[*changes, f"LABEL {INSTANCE_LABEL}={inst.id}"],
        )
    image_id = _imported_id(answer) or str(client.images.get(tag).id)
    inst.pin(tag, image_id)
    log(f"imported {tag} ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    return image_id


def build_base_image(
    client: DockerClient | None = None,
    *,
    tag: str | None = None,
    force: bool = False,
    log: Log | None = None,
    instance: Instance | None = None,
    extra_packages: Iterable[str] = (),
    extra_changes: Iterable[str] = (),
) -> str:
    """The Python base image (`tag`, default the instance's
    ``referee-base:<id>``), made from this interpreter; its id.

    `extra_packages`: more distributions of this interpreter's site-packages
    in it, with their dependencies (the referee's own, for an image of the
    service built with no registry: ``tests/containers/test_compose.py``);
    `extra_changes`: more settings (``ENV ...`` lines). Reused when the image
    the instance pinned for that tag holds the same inputs (``force`` builds
    it anyway).
    """
    client = _client(client)
    inst = instance or current()
    tag = tag or inst.base_tag
    log = log or (lambda msg: None)
    entries, changes = python_root(extra_packages, libraries=False)
    changes += list(extra_changes)
    inputs = _fingerprint(entries, [sys.version, *changes])
    if not force and (found := _existing(client, tag, inputs, inst)):
        return found
    add_libraries(entries)  # the stdlib and packages are not walked again
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    symlinks = {"usr/local/bin/python3": f"python{version}", "usr/local/bin/python": f"python{version}"}
    return _import(client, tag, entries, [*changes, f"LABEL {LABEL}={inputs}"], symlinks, log, inst)


def build_node_base_image(
    client: DockerClient | None = None,
    *,
    tag: str | None = None,
    node: str | None = None,
    force: bool = False,
    log: Log | None = None,
    instance: Instance | None = None,
) -> str:
    """A Node.js base image made from this machine's ``node`` (like ``node:20-slim``
    for the sample Node bot); its id. Raises FileNotFoundError without node.

    It holds the ``node`` binary and its shared libraries only: no npm, npx
    nor corepack, so nothing in it runs a ``package.json`` script, and its
    ``PATH`` has no ``node_modules/.bin`` (a team's source build checks its
    files with ``/usr/local/bin/node --check``: see :mod:`referee.bots.images.source_build`)."""
    import shutil

    client = _client(client)
    inst = instance or current()
    tag = tag or inst.node_base_tag
    log = log or (lambda msg: None)
    found_node = node or shutil.which("node")
    if not found_node:
        raise FileNotFoundError("node is not installed on this machine")
    changes = ["ENV PATH=/usr/local/bin:/usr/bin:/bin", "WORKDIR /app", 'CMD ["node"]']
    return build_program_image(
        client,
        tag,
        {"usr/local/bin/node": Path(found_node)},
        changes,
        force=force,
        log=log,
        instance=inst,
    )


def build_program_image(
    client: DockerClient | None,
    tag: str,
    programs: Mapping[str, Path],
    changes: Iterable[str],
    *,
    force: bool = False,
    log: Log | None = None,
    instance: Instance | None = None,
) -> str:
    """An image of `programs` ({path in the image: a binary of this machine})
    and the shared libraries they need, with a minimal ``/etc/passwd``: no
    shell, nothing else; `changes`: its settings (``ENV``, ``CMD`` lines). Its
    id. The Node base image is one (:func:`build_node_base_image`); the compose
    tests make Caddy's so (``tests/containers/test_compose.py``). Reused when
    the image the instance pinned for `tag` holds the same inputs."""
    client = _client(client)
    inst = instance or current()
    log = log or (lambda msg: None)
    entries: dict[str, Path | bytes] = {dest: Path(src).resolve() for dest, src in programs.items()}
    for lib in _needed_libs(p for p in entries.values() if isinstance(p, Path)):
        entries[str(lib).lstrip("/")] = lib.resolve()
    entries["etc/passwd"] = _PASSWD
    entries["etc/group"] = _GROUP
    settings = list(changes)
    inputs = _fingerprint(entries, settings)
    if not force and (existing := _existing(client, tag, inputs, inst)):
        return existing
    return _import(client, tag, entries, [*settings, f"LABEL {LABEL}={inputs}"], {}, log, inst)


# ------------------------------------------------------------ docker build


def build_image(
    client: DockerClient | None,
    tag: str,
    dockerfile: str,
    files: Mapping[str, Path | bytes],
    *,
    buildargs: Mapping[str, str] | None = None,
    base_id: str = "",
    force: bool = False,
    log: Log | None = None,
    instance: Instance | None = None,
) -> str:
    """Build `tag` from the text `dockerfile` and a context holding only
    `files` ({path in the context: host file or bytes}); its id.

    The Engine API's build endpoint (the legacy builder, no BuildKit). Reused
    when the image the instance pinned for that tag was built from the same
    inputs (`base_id`: the id of the image it is built FROM, part of the
    inputs; pass it as the ``BASE`` build argument too, so the build uses
    that image whatever its tag names by then).
    """
    client = _client(client)
    inst = instance or current()
    log = log or (lambda msg: None)
    entries = dict(files)
    entries["Dockerfile"] = dockerfile.encode()
    inputs = _fingerprint(
        entries, [base_id, *sorted(f"{k}={v}" for k, v in (buildargs or {}).items())], contents=True
    )
    if not force and (found := _existing(client, tag, inputs, inst)):
        return found
    t0 = time.perf_counter()
    context = io.BytesIO()
    _write_tar(entries, context)
    context.seek(0)
    docker_mod = _docker_module()

    try:
        image, _ = client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            buildargs=dict(buildargs or {}),
            labels={LABEL: inputs, **inst.label},
            pull=False,
        )
    except docker_mod.errors.BuildError as e:
        lines = "".join(str(x.get("stream", x.get("error", ""))) for x in e.build_log)
        raise RuntimeError(f"building {tag} failed: {e.msg}\n{lines[-2000:]}") from None
    inst.pin(tag, str(image.id))
    log(f"built {tag} in {time.perf_counter() - t0:.1f} s")
    return str(image.id)


def _tree(folder: Path, prefix: str) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "node_modules"))
        for f in sorted(filenames):
            if f.endswith((".pyc", ".pyo")):
                continue
            p = Path(dirpath) / f
            out[f"{prefix}/{p.relative_to(folder)}"] = p
    return out


def sdk_files() -> dict[str, Path]:
    """The build context of a Python sample bot: protocol/, sample_bots/ and
    referee/game/, with referee/__init__.py and the module it imports first,
    referee/_compiled.py (standard library only: with no extension beside it,
    it says the engine runs from its source)."""
    files = {
        **_tree(ROOT / "protocol", "protocol"),
        **_tree(ROOT / "sample_bots", "sample_bots"),
        **_tree(ROOT / "referee" / "game", "referee/game"),
    }
    files = {k: v for k, v in files.items() if not k.startswith(("sample_bots/node/", "sample_bots/go/"))}
    files["referee/__init__.py"] = ROOT / "referee" / "__init__.py"
    files["referee/_compiled.py"] = ROOT / "referee" / "_compiled.py"
    return files


def bot_image_tag(bot: str, instance: Instance | None = None) -> str:
    """The tag of a sample bot's locally built image: ``referee-bot-greedy:<instance id>``."""
    return (instance or current()).bot_tag(bot)


def build_bot_image(
    bot: str,
    client: DockerClient | None = None,
    *,
    base: str | None = None,
    force: bool = False,
    log: Log | None = None,
    instance: Instance | None = None,
) -> str:
    """The image of sample bot `bot` (``greedy``, ``random``, ``tactician``,
    ``searcher`` or ``node``), built FROM the instance's base image (made first
    when missing; `base`: another image, by tag or id) with
    ``docker/bot-python.Dockerfile`` (``docker/bot-node.Dockerfile`` for
    ``node``), the base named by id; its tag."""
    client = _client(client)
    inst = instance or current()
    tag = inst.bot_tag(bot)
    if bot == "node":
        base_id = (
            build_node_base_image(client, log=log, instance=inst)
            if base is None
            else str(client.images.get(base).id)
        )
        files: dict[str, Path | bytes] = {"sample_bots/node/bot.js": ROOT / "sample_bots" / "node" / "bot.js"}
        build_image(
            client,
            tag,
            (DOCKER_DIR / "bot-node.Dockerfile").read_text(),
            files,
            buildargs={"BASE": base_id},
            base_id=base_id,
            force=force,
            log=log,
            instance=inst,
        )
        return tag
    base_id = (
        build_base_image(client, log=log, instance=inst) if base is None else str(client.images.get(base).id)
    )
    files = {
        **sdk_files(),
        **_tree(ROOT / "starter_kits" / "python", "starter_kits/python"),
    }  # the template's bot/
    build_image(
        client,
        tag,
        (DOCKER_DIR / "bot-python.Dockerfile").read_text(),
        files,
        buildargs={"BASE": base_id, "BOT": bot},
        base_id=base_id,
        force=force,
        log=log,
        instance=inst,
    )
    return tag


def ensure_sample_images(
    bots: Iterable[str] = SAMPLE_BOTS,
    client: DockerClient | None = None,
    *,
    log: Log | None = None,
    instance: Instance | None = None,
) -> dict[str, str]:
    """Build (or reuse) the base image and the images of `bots`: {bot: tag}."""
    client = _client(client)
    return {bot: build_bot_image(bot, client, log=log, instance=instance) for bot in bots}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m referee.bots.images.baseimage",
        description="Build the local base image (no registry needed) and the sample bots' images.",
    )
    parser.add_argument(
        "--bot",
        action="append",
        choices=[*SAMPLE_BOTS, "node"],
        help="a sample bot to build (repeatable; default: every Python sample bot)",
    )
    parser.add_argument("--base-only", action="store_true", help="build only the base image")
    parser.add_argument("--force", action="store_true", help="build even when an up-to-date image exists")
    parser.add_argument(
        "--print-base",
        choices=["python", "node"],
        help="build (or reuse) only that base image and print its tag alone, for "
        "`docker build --build-arg BASE=$(...)`; progress goes to stderr",
    )
    args = parser.parse_args(argv)
    client = _client(None)
    if args.print_base:

        def progress(line: str) -> None:
            print(line, file=sys.stderr)

        build = build_base_image if args.print_base == "python" else build_node_base_image
        build(client, force=args.force, log=progress)
        print(current().base_tag if args.print_base == "python" else current().node_base_tag)
        return 0
    build_base_image(client, force=args.force, log=print)
    print(current().base_tag)
    if not args.base_only:
        for bot in args.bot or SAMPLE_BOTS:
            print(build_bot_image(bot, client, force=args.force, log=print))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
