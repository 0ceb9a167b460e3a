"""Error answers: :func:`fail` raises the HTTP error with its JSON body
(``{"error", "status", "field"?}``); the errors middleware turns it into an
HTML page outside ``/api/``."""

from __future__ import annotations

import json
from typing import NoReturn

import msgspec
from aiohttp import web

from .schemas import ErrorBody

_CLASSES: dict[int, type[web.HTTPException]] = {
    400: web.HTTPBadRequest,
    401: web.HTTPUnauthorized,
    403: web.HTTPForbidden,
    404: web.HTTPNotFound,
    409: web.HTTPConflict,
    413: web.HTTPRequestEntityTooLarge,
    422: web.HTTPUnprocessableEntity,
    429: web.HTTPTooManyRequests,
    500: web.HTTPInternalServerError,
    503: web.HTTPServiceUnavailable,
}
_CLASSES[507] = web.HTTPInsufficientStorage  # the server's disk is below its floor (issue 24)


def fail(
    status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> NoReturn:
    raise http_error(status, message, field, headers)


def http_error(
    status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> web.HTTPException:
    """The exception answering ``status`` with the JSON error body."""
    text = json.dumps(msgspec.to_builtins(ErrorBody(error=message, status=status, field=field)))
    cls = _CLASSES.get(status, web.HTTPBadRequest)
    if cls is web.HTTPRequestEntityTooLarge:
        return web.HTTPRequestEntityTooLarge(
            max_size=0, actual_size=0, text=text, content_type="application/json", headers=headers
        )
    return cls(text=text, content_type="application/json", headers=headers)


def message_of(error: web.HTTPException) -> str:
    """The message of an error made by :func:`fail` (for a page that shows it inline)."""
    try:
        return str(json.loads(error.text or "")["error"])
    except (ValueError, KeyError, TypeError):
        return error.reason
