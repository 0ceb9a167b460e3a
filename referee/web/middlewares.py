"""What wraps every answer: errors as JSON under ``/api/`` and as a page
elsewhere, and the security headers (a strict Content-Security-Policy: no
inline script or style, nothing from another origin, no framing)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..service.errors import ServiceError
from . import pages
from .errors import answer, http_error

log = logging.getLogger("referee.web")

#: Scripts and styles from this server only (never inline), no other origin,
#: no framing, no <base>, forms posted here only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": CSP,
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def secure(response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """The security headers on every answer, the errors aiohttp makes itself too."""
    secure(response)


def _error_page(request: web.Request, status: int, message: str) -> str:
    return pages.render_string(
        request,
        "error.html",
        {"status": status, "message": message, "admin": request.path.startswith("/admin")},
    )


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """JSON errors under /api/, HTML ones elsewhere; security headers on all.
    The one place where a refusal of the service (:class:`ServiceError`)
    becomes its HTTP answer (:func:`~referee.web.errors.answer`)."""
    api = request.path.startswith("/api/")
    try:
        try:
            response = await handler(request)
        except ServiceError as e:
            raise answer(e) from None
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = e.reason if e.status != 413 else "the request body is too large"
        if e.content_type == "application/json" and e.text:
            with contextlib.suppress(ValueError, TypeError):
                message = str(json.loads(e.text)["error"])
            if api:
                raise
        if api:
            raise http_error(e.status, message) from None
        e.text = _error_page(request, e.status, message)
        e.content_type = "text/html"
        raise
    except Exception as e:  # noqa: BLE001
        if isinstance(e, ConnectionResetError) and (
            request.transport is None or request.transport.is_closing()
        ):
            raise  # the client is gone (or was cut off, referee.web.server): no one to answer, nothing to log
        log.exception("unhandled error on %s", request.path)
        if api:
            raise http_error(500, f"internal error: {type(e).__name__}") from None
        raise web.HTTPInternalServerError(
            text=_error_page(request, 500, "internal error"), content_type="text/html"
        ) from None
    secure(response)
    return response
