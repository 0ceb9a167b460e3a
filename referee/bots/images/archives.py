"""Bounded, streaming reading of tar archives a hostile team made.

Python's :mod:`tarfile` reads a pax or GNU long-name header whole into
memory (a 400 MiB pax header took the service to 579 MiB) and believes what
a header claims; this module reads tar headers one block at a time, in
constant memory, and counts what an archive unpacks to without unpacking it.

- :func:`entries` walks the headers of a tar stream (a region of a file, or
  a gzip stream decompressed on the fly) the way Go's ``archive/tar`` (the
  Docker daemon's reader) does: pax ``size`` overrides, GNU long names, the
  ``ustar`` prefix, base-256 sizes, header-only types (links, folders,
  devices) that carry no data whatever their size field says, and its limit
  of :data:`MAX_SPECIAL` (1 MiB, Go's own) on a pax or long-name header. A
  bigger one is refused before a byte of it is read.
- :func:`count_layers` counts the layers of a ``docker save`` archive before
  the daemon sees them: every byte a layer's tar stream holds (headers, data,
  padding and anything after the end marker; for a gzip layer every byte it
  decompresses to), summed over the layers in the manifest's order (a layer
  named twice is counted twice: the daemon stores it once per position), and
  refused as soon as the running total passes the cap. A layer's tar stream
  is at least what the daemon writes to disk, with one exception the Go
  reader has: GNU sparse files, whose holes it writes out as zeros (a 1 KiB
  entry may claim a terabyte). ``docker save`` never writes them (Go's tar
  writer cannot), so a layer holding one is refused.

  Compression: a layer is told apart by its first bytes, as the daemon does.
  Plain tar is counted by seeking from header to header (a 1 GiB layer in
  milliseconds); gzip (what ``docker save`` writes under the containerd image
  store) is decompressed while it is counted, in constant memory, every
  member of a multi-member stream; bzip2, xz and zstd are refused with the
  reason. zstd has no decompressor in Python's standard library, and the xz
  decoder's memory is what the stream asks for (up to GiBs): rather than a
  second, partial set of rules, those layers are refused (``docker save``
  of the classic image store writes plain layers; under containerd, gzip).

Nothing here holds more than :data:`MAX_SPECIAL` bytes of an archive at a
time, plus a read chunk; a refusal is a :class:`Refused` whose text says what
is wrong and what to do.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Final, Protocol

__all__ = [
    "BLOCK",
    "DEFAULT_MAX_IMAGE_UNPACKED",
    "MAX_LAYER_ENTRIES",
    "MAX_SPECIAL",
    "Counter",
    "Entry",
    "FileRegion",
    "Gunzip",
    "LayerCount",
    "OutOfTime",
    "Refused",
    "check_headers",
    "count_layers",
    "entries",
    "is_tar_header",
    "layer_kind",
]

#: A tar block.
BLOCK: Final = 512
#: Most bytes of a pax header or a GNU long name / long link (Go's
#: ``archive/tar`` refuses bigger ones too: ``maxSpecialFileSize``).
MAX_SPECIAL: Final = 1 << 20
#: The default cap on what the layers of one image unpack to, in all.
DEFAULT_MAX_IMAGE_UNPACKED: Final = 2 * 1024**3
#: Most entries (files, folders, links) in the layers of one image, in all:
#: each is an inode on the daemon's disk.
MAX_LAYER_ENTRIES: Final = 500_000

_CHUNK: Final = 1 << 20
#: Types whose size field Go ignores: no data follows (hard and symbolic
#: links, character and block devices, folders, fifos).
_HEADER_ONLY: Final = frozenset(b"123456")
_ZERO_BLOCK: Final = bytes(BLOCK)
_PAX_SIZE: Final = re.compile(rb"[+-]?[0-9]+")
_OCTAL: Final = re.compile(rb"[0-7]+")
_PAX_NO_NUL: Final = frozenset({b"path", b"linkpath", b"uname", b"gname"})


class Refused(Exception):
    """The archive is refused: str(self) is the reason (one line)."""


class OutOfTime(Exception):
    """The count ran past its deadline."""


def _mb(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n < 1024**3 else f"{n / 1024**3:.2f} GiB"


class _Damaged(Exception):
    """Not a tar stream Go's reader would take: str(self) says where."""


# ------------------------------------------------------------------ sources


class Source(Protocol):
    """Bytes read forward: a region of a file, or a decompressed stream."""

    #: Bytes read or skipped so far.
    pos: int

    def read(self, n: int) -> bytes:
        """Up to `n` bytes (fewer only at the end)."""

    def skip(self, n: int) -> int:
        """Skip up to `n` bytes; how many were there."""


class FileRegion:
    """`length` bytes of the file `f` from `start`. It seeks before each read,
    so several regions (and other readers) may share the file."""

    def __init__(self, f: IO[bytes], start: int, length: int) -> None:
        self.f = f
        self.start = start
        self.length = length
        self.pos = 0

    def read(self, n: int) -> bytes:
        n = max(0, min(n, self.length - self.pos))
        if n == 0:
            return b""
        self.f.seek(self.start + self.pos)
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def skip(self, n: int) -> int:
        n = max(0, min(n, self.length - self.pos))
        self.pos += n
        return n


class Gunzip:
    """The gzip stream in `inner`, decompressed as it is read (every member
    of a multi-member stream, as Go's reader does), in constant memory; each
    byte it yields is first given to `count`, which may raise."""

    def __init__(self, inner: Source, count: Counter) -> None:
        self.inner = inner
        self.count = count
        self.pos = 0
        self._z = zlib.decompressobj(wbits=31)
        self._pending = b""  # compressed bytes not yet given to zlib
        self._done = False

    def _more(self, n: int) -> bytes:
        """Up to `n` decompressed bytes; b"" at the end of the stream."""
        while not self._done:
            if self._z.eof:
                rest = self._z.unused_data + self._pending
                self._pending = b""
                while len(rest) < 2 and (more := self.inner.read(_CHUNK)):
                    rest += more
                if not rest:
                    self._done = True
                    break
                if not rest.startswith(b"\x1f\x8b"):
                    raise _Damaged("data after the end of the gzip stream")
                self._z = zlib.decompressobj(wbits=31)
                self._pending = rest
            data = self._pending or self._z.unconsumed_tail
            if not data:
                data = self.inner.read(64 * 1024)
                if not data:
                    raise _Damaged("the gzip stream is cut short")
            self._pending = b""
            try:
                out = self._z.decompress(data, n)
            except zlib.error as e:
                raise _Damaged(f"the gzip stream is damaged ({e})") from None
            if out:
                self.count.add(len(out))
                self.pos += len(out)
                return out
        return b""

    def read(self, n: int) -> bytes:
        parts = []
        while n > 0 and (out := self._more(min(n, _CHUNK))):
            parts.append(out)
            n -= len(out)
        return b"".join(parts)

    def skip(self, n: int) -> int:
        done = 0
        while done < n and (out := self._more(min(n - done, _CHUNK))):
            done += len(out)
        return done


# ------------------------------------------------------------------ headers


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a tar stream, as Go's reader sees it."""

    #: The path (pax ``path``, GNU long name, ``ustar`` prefix applied).
    name: str
    #: The type flag, one byte (``b"0"`` for a regular file; ``b"\\0"`` read
    #: as ``b"0"``, or ``b"5"`` for a name ending in ``/``).
    type: bytes
    #: Bytes of data that follow its headers (0 for header-only types).
    size: int
    #: The link target (pax ``linkpath``, GNU long link).
    linkname: str
    #: Where its data starts in the stream.
    offset: int
    #: A GNU sparse file (old ``S`` type, or pax ``GNU.sparse.*`` records).
    sparse: bool = False

    def isreg(self) -> bool:
        return self.type in (b"0", b"7") and not self.sparse

    def issym(self) -> bool:
        return self.type == b"2"


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _cstr(field_: bytes) -> bytes:
    """A NUL-terminated field (Go's parseString)."""
    end = field_.find(b"\0")
    return field_ if end < 0 else field_[:end]


def _octal(field_: bytes) -> int:
    """Go's parseOctal: NULs and spaces trimmed, up to the first NUL, octal digits."""
    raw = field_.strip(b" \0")
    if not raw:
        return 0
    raw = _cstr(raw)
    if not _OCTAL.fullmatch(raw):
        raise _Damaged("a header has a number that is not octal")
    return int(raw, 8)


def _numeric(field_: bytes) -> int:
    """Go's parseNumeric: base-256 when the first byte's high bit is set, else octal."""
    if field_ and field_[0] & 0x80:
        negative = bool(field_[0] & 0x40)
        value = int.from_bytes(bytes([field_[0] & 0x7F]) + field_[1:], "big")
        if negative:
            raise _Damaged("a header has a negative size")
        if value >> 63:
            raise _Damaged("a header has a size that does not fit 64 bits")
        return value
    return _octal(field_)


def _checksum_ok(block: bytes) -> bool:
    try:
        stored = _octal(block[148:156])
    except _Damaged:
        return False
    blanked = block[:148] + b" " * 8 + block[156:]
    unsigned = sum(blanked)
    signed = sum(b - 256 if b > 127 else b for b in blanked)
    return stored in (unsigned, signed)


def is_tar_header(block: bytes) -> bool:
    """Whether `block` (512 bytes) is a tar header (its checksum holds)."""
    return len(block) == BLOCK and block != _ZERO_BLOCK and _checksum_ok(block)


def _parse_pax(data: bytes) -> dict[bytes, bytes]:
    """The records of a pax header (Go's parsePAX: ``LEN KEY=VALUE\\n``)."""
    records: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0 or not data[pos:space].isdigit():
            raise _Damaged("a pax header is malformed")
        length = int(data[pos:space])
        end = pos + length
        if length < 5 or end > len(data) or end <= space + 1 or data[end - 1 : end] != b"\n":
            raise _Damaged("a pax header is malformed")
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if not eq or not key or b"\0" in (value if key in _PAX_NO_NUL else key):
            raise _Damaged("a pax header is malformed")
        records[key] = value  # GNU.sparse.offset / numbytes repeat: any one marks it sparse
        pos = end
    return records


_SAVE: Final = "upload the file docker save writes, unchanged"


def _special(src: Source, size: int, what: str, fix: str) -> bytes:
    if size > MAX_SPECIAL:
        raise Refused(
            f"{what} is {_mb(size)}, more than {_mb(MAX_SPECIAL)}: no tool writes such a header; {fix}"
        )
    data = src.read(size)
    if len(data) != size:
        raise _Damaged("the archive is cut short")
    _pad(src, size)
    return data


def _pad(src: Source, size: int) -> None:
    if (left := -size % BLOCK) and src.skip(left) not in (0, left):
        raise _Damaged("the archive is cut short")


def entries(src: Source, where: str = "the archive", fix: str = _SAVE) -> Iterator[Entry]:
    """The entries of the tar stream `src`, its data skipped (by seeking when
    `src` is a file region). Meta headers are bounded by :data:`MAX_SPECIAL`.
    Raises :class:`Refused` for a damaged stream or a header over the bound;
    `where` names the stream in the reason, `fix` says what to do."""
    try:
        yield from _entries(src, where, fix)
    except _Damaged as e:
        raise Refused(f"{where} is not a tar archive Docker can read ({e}): {fix}") from None


def _entries(src: Source, where: str, fix: str) -> Iterator[Entry]:
    pax: dict[bytes, bytes] = {}
    long_name: bytes | None = None
    long_link: bytes | None = None
    while True:
        block = src.read(BLOCK)
        if not block:
            return  # the end, without end marker: Go takes it too
        if len(block) < BLOCK:
            raise _Damaged("the archive is cut short")
        if block == _ZERO_BLOCK:
            second = src.read(BLOCK)
            if second and second != _ZERO_BLOCK:
                raise _Damaged("a zero block is followed by data")
            return
        if not _checksum_ok(block):
            raise _Damaged("a header's checksum is wrong")
        type_ = block[156:157]
        size = _numeric(block[124:136])
        magic = block[257:263]
        name = _cstr(block[0:100])
        if magic == b"ustar\0" and (prefix := _cstr(block[345:500])):
            name = prefix + b"/" + name
        data_size = 0 if type_[0] in _HEADER_ONLY else size
        if type_ in (b"x", b"g"):
            records = _parse_pax(_special(src, data_size, f"a pax header in {where}", fix))
            if type_ == b"x":
                pax = records
                continue
            offset = src.pos
            pax, long_name, long_link = {}, None, None
            yield Entry(name=_text(name), type=type_, size=0, linkname="", offset=offset)
            continue
        if type_ in (b"L", b"K"):
            text = _cstr(_special(src, data_size, f"a GNU long name in {where}", fix))
            if type_ == b"L":
                long_name = text
            else:
                long_link = text
            continue
        link = _cstr(block[157:257])
        sparse = type_ == b"S" or any(k.startswith(b"GNU.sparse.") for k in pax)
        if b"path" in pax:
            name = pax[b"path"]
        if b"linkpath" in pax:
            link = pax[b"linkpath"]
        if b"size" in pax:
            if not _PAX_SIZE.fullmatch(pax[b"size"]):
                raise _Damaged("a pax size is not a number")
            size = int(pax[b"size"])
            if size < 0 or size >> 63:
                raise _Damaged("a pax size is out of range")
        if long_name is not None:
            name = long_name
        if long_link is not None:
            link = long_link
        if type_ == b"\0":
            type_ = b"5" if name.endswith(b"/") else b"0"
        data_size = 0 if type_[0] in _HEADER_ONLY else size
        pax, long_name, long_link = {}, None, None
        offset = src.pos
        yield Entry(
            name=_text(name), type=type_, size=data_size, linkname=_text(link), offset=offset, sparse=sparse
        )
        if sparse:
            return  # its data is a sparse map, then the file's: not walked past (refused above)
        left = offset + data_size - src.pos
        if left < 0:
            raise _Damaged("the archive was read past an entry")  # a consumer read from src
        if src.skip(left) != left:
            raise _Damaged("the archive is cut short")
        _pad(src, data_size)


# ------------------------------------------------------------------- layers


class Counter:
    """The running total of the unpacked bytes (and entries) of an image's
    layers; :class:`Refused` as soon as it passes the cap."""

    def __init__(
        self,
        cap: int,
        max_entries: int = MAX_LAYER_ENTRIES,
        deadline: float | None = None,
        *,
        refusal: str | None = None,
    ) -> None:
        self.cap = cap
        #: The reason when the cap is passed (default: an image's).
        self.refusal = refusal
        self.max_entries = max_entries
        #: A ``time.monotonic()`` after which counting stops (:class:`OutOfTime`).
        self.deadline = deadline
        self.total = 0
        self.files = 0
        #: The layer being counted, for the reason.
        self.where = "layer 1"

    def add(self, n: int) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime()
        self.total += n
        if self.total > self.cap:
            if self.refusal is not None:
                raise Refused(self.refusal)
            raise Refused(
                f"the image unpacks to more than {_mb(self.cap)}, the limit for all its layers "
                f"together (passed in {self.where}): make the image smaller (a slim base, "
                "no build tools or caches)"
            )

    def ahead(self, n: int) -> None:
        """Refuse now when `n` more bytes would pass the cap."""
        if self.total + n > self.cap:
            self.add(n)

    def entry(self, n: int = 1) -> None:
        if self.deadline is not None and self.files % 4096 == 0 and time.monotonic() > self.deadline:
            raise OutOfTime()
        self.files += n
        if self.files > self.max_entries:
            raise Refused(
                f"the image's layers hold more than {self.max_entries:,} files and folders: "
                "make the image smaller (a slim base, no build tools or caches)"
            )


_MAGIC: Final = (
    (b"\x1f\x8b\x08", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)


def layer_kind(head: bytes) -> str:
    """``tar``, ``gzip``, ``bzip2``, ``xz`` or ``zstd`` from a layer's first
    bytes (the Docker daemon's ``DetectCompression``; a zstd skippable frame
    counts as zstd)."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18":
        return "zstd"
    return "tar"


@dataclass(slots=True)
class LayerCount:
    """What one layer (as stored in the archive) unpacks to."""

    kind: str
    #: Bytes in the archive.
    stored: int
    #: Bytes of its tar stream (decompressed).
    unpacked: int
    #: Its entries.
    files: int


def _count_one(f: IO[bytes], entry: Entry, counter: Counter, what: str) -> LayerCount:
    region = FileRegion(f, entry.offset, entry.size)
    kind = layer_kind(region.read(6))
    region.pos = 0
    if kind not in ("tar", "gzip"):
        raise Refused(
            f"{what} is {kind}-compressed, which the server does not unpack to count: save "
            "the image with docker save (plain or gzip layers), or rebuild it without "
            f"{kind} compression"
        )
    before_total, before_files = counter.total, counter.files
    counter.where = what
    src: Source
    if kind == "tar":
        counter.add(entry.size)  # the whole stream: headers, data, padding, what follows the end
        src = region
    else:
        src = Gunzip(region, counter)
    for item in entries(src, what):
        counter.entry()
        if item.sparse:
            raise Refused(
                f"{what} holds a sparse file ({item.name[:200]!r}), which would unpack to "
                "whatever size it claims: docker save never writes those; save the image "
                "with docker save"
            )
        if kind == "gzip":
            counter.ahead(item.size)
    if kind == "gzip":
        try:
            while src.skip(_CHUNK):  # what follows the end marker is stored too (and hashed)
                pass
        except _Damaged as e:
            raise Refused(
                f"{what} is not a gzip stream Docker can read ({e}): upload the file "
                "docker save writes, unchanged"
            ) from None
    return LayerCount(
        kind=kind,
        stored=entry.size,
        unpacked=counter.total - before_total,
        files=counter.files - before_files,
    )


def check_headers(f: IO[bytes], size: int, *, gz: bool, limit: int, refusal: str) -> None:
    """Walk the headers of the tar archive in `f` (`size` bytes; gzip'd when
    `gz`) in bounded memory, up to its end marker, before :mod:`tarfile`
    reads it: :class:`Refused` for a pax or GNU long-name header over
    :data:`MAX_SPECIAL` (tarfile would read it whole), a sparse file, a
    damaged stream, or one that decompresses past `limit` (then `refusal` is
    the reason)."""
    counter = Counter(limit, max_entries=1 << 62, refusal=refusal)
    region = FileRegion(f, 0, size)
    src: Source = Gunzip(region, counter) if gz else region
    for item in entries(src, fix="make the archive again (tar -czf bot.tar.gz -C mybot .)"):
        if item.sparse:
            raise Refused(
                f"the archive holds a sparse file ({item.name[:200]!r}): make it again without "
                "--sparse (tar -czf bot.tar.gz -C mybot .)"
            )
        if gz:
            counter.ahead(item.size)


def count_layers(
    f: IO[bytes],
    layers: Sequence[tuple[str, Entry]],
    cap: int = DEFAULT_MAX_IMAGE_UNPACKED,
    *,
    max_entries: int = MAX_LAYER_ENTRIES,
    deadline: float | None = None,
) -> list[LayerCount]:
    """Count what the `layers` of an image (``(what, entry)`` of the archive
    file `f`, in the manifest's order, repeats included) unpack to, in all;
    :class:`Refused` as soon as the total passes `cap` (or the entries
    `max_entries`), or for a layer that cannot be counted (compressed other
    than gzip, a sparse file, damaged). A repeated layer is read once and
    counted each time. Past `deadline` (``time.monotonic()``): :class:`OutOfTime`."""
    counter = Counter(cap, max_entries, deadline)
    seen: dict[int, LayerCount] = {}
    out = []
    for what, entry in layers:
        if (known := seen.get(entry.offset)) is not None:
            counter.where = what
            counter.add(known.unpacked)
            counter.entry(known.files)
            out.append(known)
            continue
        count = _count_one(f, entry, counter, what)
        seen[entry.offset] = count
        out.append(count)
    return out
