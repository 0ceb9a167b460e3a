"""Uploads streamed to disk with a size cap (issue 14).

A team's ``docker save`` archive or source archive is written to its own
folder chunk by chunk as it arrives: never held in memory, refused with 413
as soon as the Content-Length says it is too big (before a byte is read) or
as soon as the bytes read pass the cap (the part written is deleted), so an
upload cannot fill the disk. Before a byte is read the team's one upload
slot is taken, and the disk's floor and the team's quota are checked again
as the bytes come (:mod:`referee.service.disk`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from aiohttp import BodyPartReader, StreamReader, web

from .errors import fail

CHUNK = 1 << 16


def too_large(limit: int, size: int | None = None) -> NoReturn:
    said = f"{size} bytes, " if size is not None else ""
    fail(413, f"the upload is too large: {said}at most {limit} bytes ({limit / 2**20:.0f} MiB)")


def check_length(request: web.Request, limit: int) -> None:
    """413 at once when the declared length is over `limit` (with some room for a form's other fields)."""
    if request.content_length is not None and request.content_length > limit + 64 * 1024:
        too_large(limit, request.content_length)


def new_upload_path(folder: Path, suffix: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / f"upload-{secrets.token_hex(8)}{suffix}"


#: Called with the bytes streamed so far, after each chunk (raises to refuse the upload).
Check = Callable[[int], None]


async def _copy(
    read: StreamReader | BodyPartReader, path: Path, limit: int, check: Check | None = None
) -> int:
    size = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            while True:
                chunk = await (
                    read.read_chunk(CHUNK) if isinstance(read, BodyPartReader) else read.read(CHUNK)
                )
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise _Over()
                if check is not None:
                    check(size)
                f.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return size


class _Over(Exception):
    pass


async def save_body(request: web.Request, path: Path, limit: int, check: Check | None = None) -> int:
    """The request's raw body into `path` (bytes written); 413 over `limit`, 422 when empty;
    `check` as it streams (:meth:`referee.service.disk.UploadGuard.check`)."""
    check_length(request, limit)
    try:
        size = await _copy(request.content, path, limit, check)
    except _Over:
        too_large(limit)
    if size == 0:
        path.unlink(missing_ok=True)
        fail(422, "the upload is empty: send the archive as the request body")
    return size


async def save_part(part: BodyPartReader, path: Path, limit: int, check: Check | None = None) -> int:
    """A form's file field into `path`; 413 over `limit`; `check` as it streams."""
    try:
        size = await _copy(part, path, limit, check)
    except _Over:
        too_large(limit)
    return size
