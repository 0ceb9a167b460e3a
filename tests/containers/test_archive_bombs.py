"""Hostile ``docker save`` archives and VOLUME images (issue 24, items 2 and 3).

Every archive is made here, streamed to a file (the big ones never sit in
memory): layers of zeros that gzip to nothing, many layers, a layer named
many times, pax and GNU long-name headers of hundreds of MiB, a sparse file
claiming more than it holds, bzip2/xz/zstd layers. Each is refused with the
reason **before the daemon sees it**: the image its config names (its id is
the config's sha256) is never made. The memory the service grows by is
measured in a subprocess (``ru_maxrss`` before and after the call).

The counter's own tests (``test_counter_*``) need no daemon.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.images import archives
from referee.bots.images import builds as B
from referee.bots.images.builds import BuildResult, remove_image
from referee.bots.images.image_archive import load_image_archive
from tests.support.builds import Layer, MiB, header, image_archive, layer_files, pad, zeros
from tests.support.containers import FIGURES, image_exists, remove_prefixed_images

#: The checkout whose referee is tested (the subprocesses import the same).
ROOT = Path(B.__file__).resolve().parents[2]
PREFIX = "referee-test-bombs"
#: The cap the daemon tests use (the default, 2 GiB, is tested on the counter alone).
CAP = 64 * MiB
#: Most the service may grow by while it checks an archive (the issue: "a few tens of MiB").
MEMORY_BOUND = 40 * MiB


def tag(name: str) -> str:
    return f"{PREFIX}-{name}:1"


# ------------------------------------------------------------- tar writing


def raw_header(name: str, size: int, type_: bytes) -> bytes:
    """A ustar header block of `type_` with a `size` no library would write for it."""
    block = bytearray(header("x", 0, fmt=tarfile.USTAR_FORMAT))
    block[0:100] = name.encode().ljust(100, b"\0")
    block[124:136] = (b"%011o\0" % size) if size < 8**11 else (b"\x80" + size.to_bytes(11, "big"))
    block[156:157] = type_
    return checksummed(block)


def checksummed(block: bytearray) -> bytes:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def special(type_: bytes, size: int) -> Iterator[bytes]:
    """A pax ('x') or GNU long-name ('L') header of `size` bytes, streamed."""
    yield raw_header("././@Meta", size, type_)
    if type_ == b"x":  # one record, "SIZE comment=...\n" (its length counts itself)
        prefix = f"{size} comment=".encode()
        yield prefix
        yield from (b"a" * len(c) for c in zeros(size - len(prefix) - 1))
        yield b"\n"
    else:
        yield from (b"n" * len(c) for c in zeros(size))
    yield pad(size)


def sparse_header(name: str, realsize: int, stored: int) -> bytes:
    """An old GNU sparse ('S') header: `stored` bytes of data at the end of a
    file of `realsize` (the rest a hole the reader fills with zeros)."""
    block = bytearray(header(name, stored, fmt=tarfile.GNU_FORMAT))
    block[156:157] = b"S"
    block[386:398] = b"%011o\0" % (realsize - stored)
    block[398:410] = b"%011o\0" % stored
    block[482] = 0
    block[483:495] = b"%011o\0" % realsize
    return checksummed(block)


# ------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    yield docker_client
    remove_prefixed_images(docker_client, PREFIX)


def refused_before_the_daemon(client: Any, r: BuildResult, image_id: str, *needles: str) -> str:
    """`r` refused for a reason holding every needle, and the daemon never
    made the image (nor anything of it: it never got the archive)."""
    assert not r.ok and r.image_id is None and r.reason is not None, r.log
    assert "\n" not in r.reason, r.reason
    for needle in needles:
        assert needle in r.reason, r.reason
    assert "Docker daemon" not in r.reason and "Loaded image" not in r.log, r.log
    assert not image_exists(client, image_id), "the daemon loaded the image"
    return r.reason


def load(path: Path, name: str, client: Any, cap: int = CAP) -> BuildResult:
    return load_image_archive(path, tag=tag(name), client=client, max_unpacked=cap)


# ------------------------------------------------------- decompression bombs


def test_a_small_gzip_layer_loads_and_is_counted(client: Any, tmp_path: Path) -> None:
    """gzip layers (docker save under the containerd image store) still load."""
    layer = layer_files(tmp_path / "l", {"hello.txt": 1000, "big": 3 * MiB}, compress="gzip")
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    r = load(archive, "gzip-ok", client)
    assert r.ok, r.log
    assert r.parent_id == image_id
    assert "gzip" in r.log and "unpacked in all" in r.log


def test_a_gzip_bomb_layer_is_refused(client: Any, tmp_path: Path) -> None:
    """80 MiB of zeros in a gzip layer of ~80 KiB, under a cap of 64 MiB."""
    layer = layer_files(tmp_path / "l", {"zeros": 80 * MiB}, compress="gzip")
    assert layer.path.stat().st_size < MiB
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    r = load(archive, "gzbomb", client)
    refused_before_the_daemon(
        client, r, image_id, "unpacks to more than 64.0 MiB", "layer 1", "make the image smaller"
    )


def test_a_gzip_bomb_of_many_small_files_is_refused(client: Any, tmp_path: Path) -> None:
    """No file over the cap: the running total passes it."""
    layer = layer_files(tmp_path / "l", {f"f{i}": 4 * MiB for i in range(20)}, compress="gzip")
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    refused_before_the_daemon(
        client, load(archive, "gzmany", client), image_id, "unpacks to more than 64.0 MiB"
    )


def test_layers_under_the_cap_each_are_refused_together(client: Any, tmp_path: Path) -> None:
    layers = [layer_files(tmp_path / f"l{i}", {f"zeros{i}": 20 * MiB}, compress="gzip") for i in range(4)]
    archive, image_id = image_archive(tmp_path / "a.tar", layers)
    r = load(archive, "manylayers", client)
    refused_before_the_daemon(
        client, r, image_id, "unpacks to more than 64.0 MiB", "all its layers together", "layer 4"
    )


def test_one_layer_named_many_times_counts_each_time(client: Any, tmp_path: Path) -> None:
    """The daemon stores a layer once per place in the chain: 4 x 20 MiB."""
    layer = layer_files(tmp_path / "l", {"zeros": 20 * MiB}, compress="gzip")
    archive, image_id = image_archive(tmp_path / "a.tar", [layer], manifest_layers=[0, 0, 0, 0])
    r = load(archive, "samelayer", client)
    refused_before_the_daemon(client, r, image_id, "unpacks to more than 64.0 MiB", "layer 4")


def test_a_plain_layer_over_the_cap_is_refused(client: Any, tmp_path: Path) -> None:
    layer = layer_files(tmp_path / "l", {"zeros": 70 * MiB})
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    refused_before_the_daemon(
        client, load(archive, "plainbig", client), image_id, "unpacks to more than 64.0 MiB"
    )


def test_a_sparse_file_claiming_more_than_it_holds_is_refused(client: Any, tmp_path: Path) -> None:
    """1 KiB in the archive, 80 MiB on the disk (Go's reader writes the hole)."""

    def parts() -> Iterator[bytes]:
        yield sparse_header("hole", 80 * MiB, 512)
        yield b"x" * 512
        yield bytes(1024)

    with tarfile.open(fileobj=io.BytesIO(b"".join(parts()))) as t:  # a real sparse entry
        assert t.getmember("hole").size == 80 * MiB and t.getmember("hole").issparse()
    archive, image_id = image_archive(tmp_path / "a.tar", [Layer(tmp_path / "l", parts())])
    refused_before_the_daemon(client, load(archive, "sparse", client), image_id, "sparse file", "'hole'")


@pytest.mark.parametrize("kind", ["bzip2", "xz", "zstd"])
def test_layers_compressed_otherwise_are_refused(client: Any, tmp_path: Path, kind: str) -> None:
    layer = layer_files(tmp_path / "l", {"hello": 1000}, compress=kind)
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    refused_before_the_daemon(client, load(archive, kind, client), image_id, f"layer 1 is {kind}-compressed")


@pytest.mark.parametrize("type_", [b"x", b"L"])
def test_a_huge_header_inside_a_gzip_layer_is_refused(client: Any, tmp_path: Path, type_: bytes) -> None:
    """A 64 MiB pax / long-name header, gzipped to ~64 KiB, read by nobody."""
    layer = layer_files(tmp_path / "l", {"hello": 10}, compress="gzip", before=special(type_, 64 * MiB))
    archive, image_id = image_archive(tmp_path / "a.tar", [layer])
    what = "a pax header" if type_ == b"x" else "a GNU long name"
    refused_before_the_daemon(
        client,
        load(archive, "hdr", client, cap=archives.DEFAULT_MAX_IMAGE_UNPACKED),
        image_id,
        f"{what} in layer 1 is 64.0 MiB, more than 1.0 MiB",
    )


def test_a_link_with_a_huge_size_field_adds_nothing(client: Any, tmp_path: Path) -> None:
    """Go's reader ignores the size of a hard link: so does the count (no
    data follows it), and the image loads."""

    def parts() -> Iterator[bytes]:
        yield header("a", 5) + b"hello" + pad(5)
        block = bytearray(header("b", 0, tarfile.LNKTYPE, linkname="a", fmt=tarfile.USTAR_FORMAT))
        block[124:136] = b"\x80" + (100 * 1024**3).to_bytes(11, "big")  # base-256
        yield checksummed(block)
        yield bytes(1024)

    archive, image_id = image_archive(tmp_path / "a.tar", [Layer(tmp_path / "l", parts())])
    r = load(archive, "hardlink", client)
    assert r.ok, r.log


# ------------------------------------------------------------ tar headers


def _measure(archive: Path, name: str, cap: int = CAP, *, source: bool = False) -> dict[str, Any]:
    """load_image_archive in a fresh process: its result and how much its
    peak memory grew during the call."""
    script = (
        "import json, resource, sys\n"
        "from referee.bots.images.image_archive import load_image_archive\n"
        "from referee.bots.images.source_build import build_source\n"
        "from referee.bots.sandbox.docker_daemon import docker_client\n"
        "client = docker_client(); client.version()\n"
        "def status(key):\n"
        "    line = next(l for l in open('/proc/self/status') if l.startswith(key + ':'))\n"
        "    return int(line.split()[1]) * 1024\n"
        "open('/proc/self/clear_refs', 'w').write('5')  # the peak (VmHWM) starts again from now\n"
        "rss = status('VmRSS')\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "if sys.argv[4] == 'source':\n"
        "    r = build_source(sys.argv[1], tag=sys.argv[2], client=client)\n"
        "else:\n"
        "    r = load_image_archive(sys.argv[1], tag=sys.argv[2], client=client,\n"
        "                           max_unpacked=int(sys.argv[3]))\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'ok': r.ok, 'reason': r.reason, 'log': r.log, 'image_id': r.image_id,\n"
        "                  'seconds': r.seconds, 'rss_before': rss, 'peak': status('VmHWM'),\n"
        "                  'growth': status('VmHWM') - rss, 'maxrss_growth': after - before}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script, str(archive), tag(name), str(cap), "source" if source else "image"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def _memory(m: dict[str, Any]) -> str:
    return (
        f"peak memory {m['growth'] / MiB:.1f} MiB over the RSS before the call ({m['rss_before'] / MiB:.0f} "
        f"MiB; ru_maxrss grew by {m['maxrss_growth'] / MiB:.1f} MiB)"
    )


@pytest.mark.parametrize("type_", [b"x", b"L"])
def test_a_400_mib_header_in_the_archive_costs_no_memory(client: Any, tmp_path: Path, type_: bytes) -> None:
    """Today: a 400 MiB pax header took the web process to 579 MiB."""
    layer = layer_files(tmp_path / "l", {"hello": 10})
    archive, image_id = image_archive(tmp_path / "a.tar", [layer], first=special(type_, 400 * MiB))
    assert archive.stat().st_size > 400 * MiB
    try:
        m = _measure(archive, "bighdr")
    finally:
        archive.unlink()
    what = "pax header" if type_ == b"x" else "long name"
    FIGURES[f"400 MiB {what} refused"] = f"{m['seconds']:.1f} s, {_memory(m)}"
    assert not m["ok"] and "in the archive is 400.0 MiB, more than 1.0 MiB" in m["reason"], m["log"]
    assert not image_exists(client, image_id)
    assert m["growth"] < MEMORY_BOUND and m["maxrss_growth"] < MEMORY_BOUND, _memory(m)


def test_a_source_tar_gz_with_a_huge_pax_header_costs_no_memory(client: Any, tmp_path: Path) -> None:
    """The source path too: tarfile read a 60 MiB pax header (from 60 KiB of
    .tar.gz) whole, and the service grew by ~180 MiB."""
    path = tmp_path / "src.tgz"
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    with path.open("wb") as f:
        for part in special(b"x", 60 * MiB):
            f.write(comp.compress(part))
        f.write(comp.compress(header("bot.py", 5) + b"x = 1" + pad(5) + bytes(1024)) + comp.flush())
    assert path.stat().st_size < MiB
    m = _measure(path, "srchdr", source=True)
    FIGURES["source .tar.gz with a 60 MiB pax header refused"] = f"{m['seconds']:.1f} s, {_memory(m)}"
    assert not m["ok"] and "a pax header in the archive is 60.0 MiB, more than 1.0 MiB" in m["reason"], m[
        "log"
    ]
    assert "tar -czf" in m["reason"]
    assert m["growth"] < MEMORY_BOUND and m["maxrss_growth"] < MEMORY_BOUND, _memory(m)


@pytest.mark.slow
def test_a_1_gib_upload_loads_in_bounded_memory(client: Any, tmp_path: Path) -> None:
    """A 1 GiB-class upload (a plain layer of 1000 MiB and a gzip one that
    unpacks to 512 MiB): checked, streamed to the daemon and loaded, while
    the service grows by a few MiB."""
    plain = layer_files(tmp_path / "p", {"big": 1000 * MiB})
    gz = layer_files(tmp_path / "g", {f"f{i}": 64 * MiB for i in range(8)}, compress="gzip")
    archive, image_id = image_archive(tmp_path / "a.tar", [plain, gz])
    plain.path.unlink()
    m = _measure(archive, "onegib", cap=archives.DEFAULT_MAX_IMAGE_UNPACKED)
    FIGURES["1 GiB upload loaded"] = f"{m['seconds']:.1f} s, {_memory(m)}"
    assert m["ok"], m["log"]
    counted = [line for line in m["log"].splitlines() if "unpacked in all" in line or "checked in" in line]
    FIGURES["1 GiB upload checked"] = "; ".join(line.split(";")[-1].strip() for line in counted)
    assert m["growth"] < MEMORY_BOUND and m["maxrss_growth"] < MEMORY_BOUND, _memory(m)
    remove_image(tag("onegib"), client, image_id=m["image_id"])


# ------------------------------------------------------------ the counter


def _count(path: Path, cap: int) -> Any:
    from referee.bots.images import archives as A

    size = path.stat().st_size
    with path.open("rb") as f:
        return A.count_layers(f, [("layer 1", A.Entry("l", b"0", size, "", 0))], cap)


def test_counter_refuses_a_gzip_bomb_at_the_default_cap(tmp_path: Path) -> None:
    """One file of 2 GiB + 1 in ~2 MiB of gzip: refused at its header,
    before a byte of it is decompressed."""
    from referee.bots.images import archives as A

    size = A.DEFAULT_MAX_IMAGE_UNPACKED + 1
    layer = Layer(tmp_path / "l", iter([header("zeros", size), bytes(MiB)]), "gzip")  # cut short: never read
    t0 = time.perf_counter()
    with pytest.raises(A.Refused, match=r"unpacks to more than 2\.00 GiB"):
        _count(layer.path, A.DEFAULT_MAX_IMAGE_UNPACKED)
    assert time.perf_counter() - t0 < 1


def test_counter_streams_a_gzip_layer_at_the_default_cap(tmp_path: Path) -> None:
    """Files of 256 MiB, 2 GiB and more in all: every byte decompressed and
    counted until the total passes the cap (the figure: the rate)."""
    from referee.bots.images import archives as A

    layer = layer_files(tmp_path / "l", {f"f{i}": 256 * MiB for i in range(9)}, compress="gzip")
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(A.Refused, match=r"unpacks to more than 2\.00 GiB"):
        _count(layer.path, A.DEFAULT_MAX_IMAGE_UNPACKED)
    seconds = time.perf_counter() - t0
    FIGURES["gzip layer counted"] = f"{A.DEFAULT_MAX_IMAGE_UNPACKED / MiB / seconds:.0f} MiB/s unpacked"
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < MEMORY_BOUND


def test_counter_counts_what_a_layer_unpacks_to(tmp_path: Path) -> None:
    from referee.bots.images import archives as A

    for kind in ("tar", "gzip"):
        layer = layer_files(tmp_path / f"l{kind}", {"a": 1000, "b": 3 * MiB}, compress=kind)
        stream = 512 + 1024 + 512 + 3 * MiB + 1024
        (count,) = _count(layer.path, CAP)
        assert (count.kind, count.unpacked, count.files) == (kind, stream, 2)
        with pytest.raises(A.Refused, match="unpacks to more than"):
            _count(layer.path, stream - 1)


def test_counter_refuses_a_pax_sparse_file_and_a_terabyte_claim(tmp_path: Path) -> None:
    from referee.bots.images import archives as A

    pax_sparse = tarfile.TarInfo("f")
    pax_sparse.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.realsize": str(1024**4),
        "GNU.sparse.name": "f",
    }
    pax_sparse.size = 1024
    for i, first in enumerate([pax_sparse.tobuf(tarfile.PAX_FORMAT), sparse_header("hole", 1024**4, 512)]):
        layer = Layer(tmp_path / f"l{i}", iter([first, bytes(1024), bytes(1024)]), "gzip")
        with pytest.raises(A.Refused, match="sparse file"):
            _count(layer.path, A.DEFAULT_MAX_IMAGE_UNPACKED)


def test_counter_refuses_too_many_entries(tmp_path: Path) -> None:
    from referee.bots.images import archives as A

    layer = Layer(tmp_path / "l", (header(f"d{i}/", 0, tarfile.DIRTYPE) for i in range(1001)), "gzip")
    size = layer.path.stat().st_size
    with layer.path.open("rb") as f, pytest.raises(A.Refused, match="more than 1,000 files"):
        A.count_layers(f, [("layer 1", A.Entry("l", b"0", size, "", 0))], CAP, max_entries=1000)


def test_counter_reads_what_go_reads(tmp_path: Path) -> None:
    """The reader agrees with Go's on what it may not misread: long names,
    the ustar prefix, pax sizes, base-256 sizes, data after the end marker
    (counted), damaged streams (refused)."""
    from referee.bots.images import archives as A

    long = "d/" + "x" * 120 + "/" + "y" * 90
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in ((long, b"abc"), ("p", b"z" * 5000)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    gnu = buf.getvalue()
    pax = io.BytesIO()
    with tarfile.open(fileobj=pax, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo(long)
        info.size = 9 * 1024**3  # over ustar's 8 GiB: a pax size record
        t.addfile(info)  # header only: no data follows in this stream
    big = raw_header("b256", 9 * 1024**3, b"0")

    def names(raw: bytes) -> list[tuple[str, int]]:
        return [(e.name, e.size) for e in A.entries(A.FileRegion(io.BytesIO(raw), 0, len(raw)))]

    def first(raw: bytes) -> tuple[str, int]:  # its data is not there
        e = next(A.entries(A.FileRegion(io.BytesIO(raw), 0, len(raw))))
        return e.name, e.size

    assert names(gnu) == [(long, 3), ("p", 5000)]
    assert first(pax.getvalue()[:1536]) == (long, 9 * 1024**3)
    assert first(big) == ("b256", 9 * 1024**3)
    with pytest.raises(A.Refused, match="cut short"):
        list(A.entries(A.FileRegion(io.BytesIO(big + bytes(512)), 0, 1024)))
    bad = bytearray(gnu)
    bad[600] ^= 1  # a header's checksum
    with pytest.raises(A.Refused, match="checksum"):
        names(bytes(bad[:512]) + bytes(bad))
    trailing = Layer(tmp_path / "t", iter([gnu, b"junk" * 100_000]), "gzip")
    (count,) = _count(trailing.path, CAP)
    assert count.unpacked == len(gnu) + 400_000
    with pytest.raises(A.Refused, match="data after the end of the gzip stream"):
        path = tmp_path / "g"
        path.write_bytes(trailing.path.read_bytes() + b"garbage")
        _count(path, CAP)


# ------------------------------------------------------------ VOLUME images


def test_an_uploaded_image_with_a_volume_is_refused(client: Any, tmp_path: Path) -> None:
    layer = layer_files(tmp_path / "l", {"hello": 10})
    archive, image_id = image_archive(tmp_path / "a.tar", [layer], config={"Volumes": {"/data": {}}})
    reason = refused_before_the_daemon(
        client, load(archive, "volume", client), image_id, "VOLUME '/data'", "remove the VOLUME line", "/tmp"
    )
    assert "server's disk" in reason


VOLFILL = '''\
"""Writes $FILL_MB MiB into /data, says how it went, then plays like greedy."""
import json, os, runpy
written, error = 0, None
try:
    with open("/data/fill", "wb") as f:
        for _ in range(int(os.environ.get("FILL_MB", "40"))):
            f.write(b"\\1" * (1 << 20))
            f.flush()
            written += 1 << 20
except OSError as e:
    error = e.strerror
mounts = [line.split()[:3] for line in open("/proc/mounts") if line.split()[1] == "/data"]
print("VOLFILL " + json.dumps({"written": written, "error": error, "mounts": mounts}), flush=True)
runpy.run_module(os.environ["BOT_MODULE"], run_name="__main__", alter_sys=True)
'''


@pytest.mark.runtime_sensitive  # a container of the session's runtime: see .ci/run's runsc pass
async def test_an_admin_image_with_a_volume_gets_a_capped_tmpfs_there(
    client: Any, images: dict[str, str], tmp_path: Path, out: Path
) -> None:
    """An image the service runs without an upload (an admin names it, a
    house bot): its VOLUME is a tmpfs of the /tmp cap, not host disk."""
    from referee.bots.images.baseimage import build_image
    from referee.bots.sandbox.container import ContainerBot
    from referee.bots.sandbox.container_limits import ContainerLimits
    from tests.support.containers import wait_for_line

    (tmp_path / "volfill.py").write_text(VOLFILL)
    greedy_id = str(client.images.get(images["greedy"]).id)
    image = tag("volume-admin")
    dockerfile = (
        "ARG BASE\nFROM ${BASE}\nUSER 0\n"
        """RUN ["python", "-c", "import os; os.makedirs('/data'); os.chmod('/data', 0o1777)"]\n"""
        "VOLUME /data\nCOPY volfill.py /app/volfill.py\n"
        'CMD ["python", "/app/volfill.py"]\n'
    )
    build_image(
        client,
        image,
        dockerfile,
        {"volfill.py": tmp_path / "volfill.py"},
        buildargs={"BASE": images["greedy"]},
        base_id=greedy_id,
    )
    assert "/data" in (client.images.get(image).attrs["Config"].get("Volumes") or {})
    async with ContainerBot(image, out_dir=out, name="vol", limits=ContainerLimits(tmpfs="16m")) as bot:
        assert (await bot.handshake()).name
        line = await wait_for_line(bot.log_path, "VOLFILL ")
        (found,) = client.containers.list(filters={"label": f"referee.out={out.resolve()}"})
        mounts = found.attrs["Mounts"]
    fill = json.loads(line.split(" ", 1)[1])
    FIGURES["VOLUME /data under the service"] = f"{fill}"
    assert fill["error"] == "No space left on device" and fill["written"] <= 16 * MiB, fill
    assert fill["mounts"] and fill["mounts"][0][2] == "tmpfs", fill
    assert not [m for m in mounts if m.get("Type") == "volume"], (
        mounts
    )  # nothing under /var/lib/docker/volumes


# ------------------------------------------------------------ the setting


def test_serve_takes_max_image_unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``referee serve --max-image-unpacked SIZE`` (default 2g) reaches the
    admission pipeline's setting."""
    from click.testing import CliRunner

    from referee.cli.serve import serve
    from referee.web import app as app_module
    from referee.web import server

    made: list[Any] = []
    monkeypatch.setattr(server, "run", lambda app, **kw: None)
    monkeypatch.setattr(app_module, "make_app", lambda db, settings: made.append(settings))
    db = str(tmp_path / "s.db")
    assert CliRunner().invoke(serve, ["--db", db, "--port", "0"]).exit_code == 0
    assert (
        CliRunner().invoke(serve, ["--db", db, "--port", "0", "--max-image-unpacked", "512m"]).exit_code == 0
    )
    assert [s.max_image_unpacked for s in made] == [2 * 1024**3, 512 * MiB]
    r = CliRunner().invoke(serve, ["--db", db, "--port", "0", "--max-image-unpacked", "lots"])
    assert r.exit_code == 2 and "--max-image-unpacked" in r.output
