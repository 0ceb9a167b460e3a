"""Error answers: :func:`fail` raises the HTTP error with its JSON body
(``{"error", "status", "field"?}``); the errors middleware turns it into an
HTML page outside ``/api/``.

The service's own refusals (:mod:`referee.service.errors`) carry no status:
:data:`STATUS` is the one place that says how HTTP answers each kind
(:func:`answer`, used by the errors middleware alone). :func:`fail` is for
what only the web has: a request's shape, its token, its form."""

from __future__ import annotations

import json
import math
from typing import NoReturn

import msgspec
from aiohttp import web

from ..service.errors import (
    Conflict,
    DiskFull,
    Forbidden,
    Invalid,
    NotFound,
    NotReady,
    RateLimited,
    ServiceError,
    TooLarge,
    Unauthorized,
)
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


#: The HTTP status answering each kind of the service's refusals (a kind
#: not named here answers as its nearest named base; a bare ServiceError: 400).
STATUS: dict[type[ServiceError], int] = {
    NotFound: 404,
    Invalid: 422,
    Unauthorized: 401,
    Forbidden: 403,
    Conflict: 409,
    RateLimited: 429,
    TooLarge: 413,
    DiskFull: 507,  # the server's disk is below its floor (issue 24)
    # the server's state, not the request: the same upload succeeds once the organiser installs Docker
    NotReady: 503,
}


def status_of(error: ServiceError | web.HTTPException) -> int:
    """The HTTP status that answers `error` (a refusal of the service, or one made by :func:`fail`)."""
    if isinstance(error, web.HTTPException):
        return error.status
    return next((STATUS[c] for c in type(error).__mro__ if c in STATUS), 400)


def answer(error: ServiceError) -> web.HTTPException:
    """The HTTP answer to a refusal of the service: its status, the JSON
    error body with its message and field, and ``Retry-After`` (whole
    seconds, at least 1) when it says when to ask again."""
    headers = None
    if error.retry_after is not None:
        headers = {"Retry-After": str(max(1, math.ceil(error.retry_after)))}
    return http_error(status_of(error), error.message, error.field, headers)


def field_of(error: ServiceError | web.HTTPException) -> str | None:
    """The field a refusal names (a form's input to show its message beside), or None."""
    if isinstance(error, ServiceError):
        return error.field
    try:
        field = json.loads(error.text or "").get("field")
    except (ValueError, AttributeError):
        return None
    return str(field) if field else None


def message_of(error: ServiceError | web.HTTPException) -> str:
    """The message of a refusal of the service, or of an error made by
    :func:`fail` (for a page that shows it inline)."""
    if isinstance(error, ServiceError):
        return error.message
    try:
        return str(json.loads(error.text or "")["error"])
    except (ValueError, KeyError, TypeError):
        return error.reason
