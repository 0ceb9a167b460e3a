"""Checking what a request brings: its JSON body (strictly, against a
:mod:`~referee.web.schemas` Struct), names, bot submissions, path numbers.
A request's own shape (its size, its JSON, its path) is refused with
:func:`~referee.web.errors.fail`; the values' rules (names, a submission's
fields) with :class:`~referee.service.errors.Invalid` or ``Forbidden``,
naming the field."""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec
from aiohttp import web

from ..bots.netpolicy import MalformedURL, check_url
from ..service.errors import Forbidden, Invalid
from ..service.rules import CONTROL as _CONTROL
from ..service.runs import containers_enabled
from .app_state import ROOM
from .errors import fail
from .schemas import BotSubmission

_MSGSPEC_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")

T = TypeVar("T")


async def read_body(request: web.Request, typ: type[T]) -> T:
    """The request's JSON body decoded strictly as ``typ``: 413 over the
    size limit, 422 naming the field otherwise."""
    limit = request.app[ROOM].settings.max_body
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
    except RecursionError:
        fail(422, "the body is nested too deeply (JSON arrays or objects ~1000 levels deep)")
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


#: The largest row id SQLite stores (its integers are signed 64-bit).
MAX_ID = 2**63 - 1

_ID = re.compile(r"[0-9]{1,40}")


def parse_id(text: str | None) -> int | None:
    """An id as a request writes it (a path part, ``?run=``): ASCII digits
    that make a number SQLite can hold; None for anything else (``"+1"``,
    ``"1_0"``, ``"٣"``, 20 nines). A bigger number is no row anywhere, and
    would raise ``OverflowError`` in the SQLite driver."""
    if text is None or not _ID.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_ID else None


def path_int(request: web.Request, key: str) -> int:
    """A number in the path (``{cid}``, ``{rid}``...): 404 when it is not one."""
    value = parse_id(request.match_info[key])
    if value is None:  # no row has it
        raise web.HTTPNotFound()
    return value


def query_id(request: web.Request, key: str) -> int | None:
    """An id in the query (``?run=R``): None when absent, 404 naming it
    when it is not an id (no row has it)."""
    text = request.query.get(key)
    if text is None:
        return None
    value = parse_id(text)
    if value is None:
        shown = text if len(text) <= 24 else text[:21] + "..."
        fail(404, f"no {key} {shown!r}: {key} ids are whole numbers below 2**63")
    return value


_IMAGE = re.compile(
    r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
)


def check_extras(secret: str | None, note: str) -> None:
    """A submission's secret and note."""
    if secret is not None:
        if not secret or len(secret) > 200 or _CONTROL.search(secret):
            raise Invalid("'secret' must be 1 to 200 printable characters", field="secret")
    if len(note) > 500:
        raise Invalid(f"'note' is too long: {len(note)} characters, at most 500", field="note")
    if _CONTROL.search(note.replace("\n", " ")):
        raise Invalid("'note' must not contain control characters", field="note")


def check_url_field(url: str) -> str:
    """A team's URL, as the transport will use it; :class:`Invalid` saying what is wrong
    (userinfo, a query, a fragment, a scheme other than http(s), ...)."""
    try:
        return check_url(url).url
    except MalformedURL as e:
        raise Invalid(f"'url': {e}", field="url") from None


def check_submission(sub: BotSubmission, *, admin: bool = False) -> tuple[str, str | None, str | None]:
    """(kind, url, image) of a valid submission; :class:`Invalid` otherwise.
    Naming an image on the server is the admin's right alone (:class:`Forbidden` for a team)."""
    if (sub.url is None) == (sub.image is None):
        raise Invalid(
            "give exactly one of 'url' (a running bot) and 'image' (a container image)",
            field="url" if sub.url is None else "image",
        )
    check_extras(sub.secret, sub.note)
    if sub.url is not None:
        return "url", check_url_field(sub.url), None
    assert sub.image is not None
    if not admin:
        raise Forbidden(
            "a team can run only images it uploaded: send the output of 'docker save' to "
            "POST .../uploads?kind=archive (or your source to ?kind=source)",
            field="image",
        )
    if not containers_enabled():
        raise Invalid(
            "image submissions are not enabled on this server (container bots are not available "
            "here): submit the 'url' of a running bot instead",
            field="image",
        )
    if len(sub.image) > 255 or not _IMAGE.match(sub.image):
        raise Invalid(
            f"'image' must be a container image reference like 'name:tag' (got {sub.image[:255]!r})",
            field="image",
        )
    return "image", None, sub.image
