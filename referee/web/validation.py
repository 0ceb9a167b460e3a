"""Checking what a request brings: its JSON body (strictly, against a
:mod:`~referee.web.schemas` Struct), names, bot submissions, path numbers.
Every refusal is a :func:`~referee.web.errors.fail` naming the field."""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec
from aiohttp import web

from .errors import fail
from .runs import containers_enabled
from .schemas import BotSubmission
from .state import SETTINGS

_MSGSPEC_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")

T = TypeVar("T")


async def read_body(request: web.Request, typ: type[T]) -> T:
    """The request's JSON body decoded strictly as ``typ``: 413 over the
    size limit, 422 naming the field otherwise."""
    limit = request.app[SETTINGS].max_body
    if request.content_length is not None and request.content_length > limit:
        fail(413, f"the request body is too large: {request.content_length} bytes, at most {limit}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        fail(413, f"the request body is too large: at most {limit} bytes")
    if len(raw) > limit:
        fail(413, f"the request body is too large: {len(raw)} bytes, at most {limit}")
    if not raw.strip():
        fail(422, "the request body is empty: send a JSON object")
    try:
        return msgspec.json.decode(raw, type=typ)
    except msgspec.ValidationError as e:
        text = str(e)
        m = _MSGSPEC_PATH.search(text)
        path = m.group("path") if m else ""
        message = text[: m.start()] if m else text
        unknown = re.match(r"Object contains unknown field `([^`]+)`", message)
        missing = re.match(r"Object missing required field `([^`]+)`", message)
        field = path.lstrip(".") or None
        if unknown:
            allowed = ", ".join(f.encode_name for f in msgspec.structs.fields(typ))  # type: ignore[arg-type]
            fail(422, f"unknown field '{unknown.group(1)}' (expected one of: {allowed})", unknown.group(1))
        if missing:
            fail(422, f"'{missing.group(1)}' is required", missing.group(1))
        words = re.sub(r"`([^`]+)`", r"\1", message)
        fail(422, f"'{field}': {words}" if field else words, field)
    except msgspec.DecodeError as e:
        fail(422, f"the body is not valid JSON: {e}")


async def has_body(request: web.Request) -> bool:
    """The request brings a body (optional bodies: an empty POST is allowed)."""
    if request.content_length == 0:
        return False
    return request.can_read_body


def path_int(request: web.Request, key: str) -> int:
    """A number in the path (``{cid}``, ``{rid}``...): 404 when it is not one."""
    try:
        return int(request.match_info[key])
    except ValueError:
        raise web.HTTPNotFound() from None


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_name(value: str, field: str, max_len: int, *, slash: bool = False) -> str:
    if not value.strip():
        fail(422, f"'{field}' must not be empty", field)
    if value != value.strip():
        fail(422, f"'{field}' must not start or end with spaces", field)
    if len(value) > max_len:
        fail(422, f"'{field}' is too long: {len(value)} characters, at most {max_len}", field)
    if _CONTROL.search(value):
        fail(422, f"'{field}' must not contain control characters", field)
    if not slash and "/" in value:
        fail(422, f"'{field}' must not contain '/'", field)
    return value


_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(/[^\s]*)?$")
_IMAGE = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def check_submission(sub: BotSubmission) -> tuple[str, str | None, str | None]:
    """(kind, url, image) of a valid submission; 422 otherwise."""
    if (sub.url is None) == (sub.image is None):
        fail(422, "give exactly one of 'url' (a running bot) and 'image' (a container image)",
             "url" if sub.url is None else "image")
    if sub.secret is not None:
        if not sub.secret or len(sub.secret) > 200 or _CONTROL.search(sub.secret):
            fail(422, "'secret' must be 1 to 200 printable characters", "secret")
    if len(sub.note) > 500:
        fail(422, f"'note' is too long: {len(sub.note)} characters, at most 500", "note")
    if sub.url is not None:
        if len(sub.url) > 300 or not _URL.match(sub.url):
            fail(422, f"'url' must be http://host:port or https://host:port (got {sub.url[:300]!r})", "url")
        port = re.search(r":(\d+)(/|$)", sub.url.split("://", 1)[1])
        if port and not 0 < int(port.group(1)) < 65536:
            fail(422, f"'url' has an invalid port: {port.group(1)}", "url")
        return "url", sub.url.rstrip("/"), None
    assert sub.image is not None
    if not containers_enabled():
        fail(422, "image submissions are not enabled on this server (container bots are not available "
                  "here): submit the 'url' of a running bot instead", "image")
    if len(sub.image) > 255 or not _IMAGE.match(sub.image):
        fail(422, f"'image' must be a container image reference like 'name:tag' (got {sub.image[:255]!r})",
             "image")
    return "image", None, sub.image
