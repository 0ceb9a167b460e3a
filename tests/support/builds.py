"""Bot archives and images for the build and upload tests: a Python bot's
files zipped (or tarred), an image saved, image archives built layer by layer."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import lzma
import secrets
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

MiB = 1024**2

PY_BOT = '''\
"""A team's bot: the greedy sample's play, through the SDK."""
from protocol import APIVERSION, ActRequest, BotInfo
from sample_bots.sdk import run_bot
from sample_bots.strategy import lowest_play_index

from helper import NAME

INFO = BotInfo(apiversion=APIVERSION, name=NAME, author="team", version="1")


def decide(request: ActRequest) -> int:
    return lowest_play_index(request.legal)


if __name__ == "__main__":
    run_bot(decide, INFO)
'''


def make_zip(path: Path, files: dict[str, bytes | str], *, links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def make_tar(
    path: Path, files: dict[str, bytes | str], *, gz: bool = True, special: Iterable[tarfile.TarInfo] = ()
) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for name, data in files.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(raw))
        for info in special:
            tar.addfile(info)
    return path


def python_bot_files(name: str = "zipped-greedy") -> dict[str, bytes | str]:
    return {"bot.py": PY_BOT, "helper.py": f"NAME = {name!r}\n"}


def save_image(client: Any, image: str, path: Path) -> Path:
    with path.open("wb") as f:
        for chunk in client.images.get(image).save(named=True):
            f.write(chunk)
    return path


def layer_files(
    path: Path, files: dict[str, int], *, compress: str = "tar", before: Iterable[bytes] = ()
) -> Layer:
    """A layer of files of zeros ({name: size}), `before` written first."""

    def parts() -> Iterator[bytes]:
        yield from before
        for name, size in files.items():
            yield header(name, size)
            yield from zeros(size)
            yield pad(size)
        yield bytes(1024)

    return Layer(path, parts(), compress)


def image_archive(
    path: Path,
    layers: list[Layer],
    *,
    manifest_layers: list[int] | None = None,
    config: dict[str, Any] | None = None,
    first: Iterable[bytes] = (),
) -> tuple[Path, str]:
    """A docker save archive of `layers` (the manifest lists them in the
    order `manifest_layers` gives, default each once) and its image id.
    `first`: raw bytes written before its first member."""
    order = manifest_layers if manifest_layers is not None else list(range(len(layers)))
    cfg = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": ["/hello"], "Labels": {"test.nonce": secrets.token_hex(8)}, **(config or {})},
        "rootfs": {"type": "layers", "diff_ids": [layers[i].diff_id for i in order]},
    }
    cfg_bytes = json.dumps(cfg).encode()
    cfg_name = hashlib.sha256(cfg_bytes).hexdigest() + ".json"
    names = [f"{i:03d}/layer.tar" for i in range(len(layers))]
    manifest = [{"Config": cfg_name, "RepoTags": ["team:1"], "Layers": [names[i] for i in order]}]
    with path.open("wb") as out:
        for part in first:
            out.write(part)
        write_member(out, "manifest.json", json.dumps(manifest).encode())
        write_member(out, cfg_name, cfg_bytes)
        for name, layer in zip(names, layers):
            write_member(out, name, layer.path)
        out.write(bytes(1024))
    return path, "sha256:" + hashlib.sha256(cfg_bytes).hexdigest()


def header(
    name: str, size: int, type_: bytes = tarfile.REGTYPE, *, fmt: int = tarfile.PAX_FORMAT, linkname: str = ""
) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mode, info.mtime, info.linkname = size, type_, 0o644, 0, linkname
    return info.tobuf(format=fmt)  # type: ignore[arg-type]


def pad(size: int) -> bytes:
    return b"\0" * (-size % 512)


def zeros(size: int) -> Iterator[bytes]:
    chunk = bytes(MiB)
    while size > 0:
        yield chunk[: min(size, MiB)]
        size -= MiB


class Layer:
    """A layer's tar stream, written to `path` through `compress`, its
    diff id (the sha256 of the tar stream) computed on the way."""

    def __init__(self, path: Path, parts: Iterable[bytes], compress: str = "tar") -> None:
        self.path = path
        h = hashlib.sha256()
        make: dict[str, Callable[[], Any]] = {
            "gzip": lambda: zlib.compressobj(1, zlib.DEFLATED, 31),
            "bzip2": lambda: bz2.BZ2Compressor(1),
            "xz": lambda: lzma.LZMACompressor(preset=0),
        }
        comp = make[compress]() if compress in make else None
        with path.open("wb") as f:
            if compress == "zstd":
                f.write(b"\x28\xb5\x2f\xfd")  # the magic: the daemon would try to unpack the rest
            for part in parts:
                h.update(part)
                f.write(comp.compress(part) if comp is not None else part)
            if comp is not None:
                f.write(comp.flush())
        self.diff_id = "sha256:" + h.hexdigest()


def write_member(out: IO[bytes], name: str, data: bytes | Path) -> None:
    if isinstance(data, bytes):
        out.write(header(name, len(data)) + data + pad(len(data)))
        return
    size = data.stat().st_size
    out.write(header(name, size))
    with data.open("rb") as f:
        while chunk := f.read(MiB):
            out.write(chunk)
    out.write(pad(size))
