"""The service's refusals carry no HTTP status; the web answers each kind in one place (issue 33).

Each kind of :class:`~referee.service.errors.ServiceError`, raised by a
handler of a real aiohttp server on loopback behind the real errors
middleware, is answered exactly as :func:`~referee.web.errors.fail` answered
its status before: the same status, JSON body under ``/api/``, HTML page
elsewhere, ``Retry-After``. And the code's shape: no error class of the
service or of the web's domain modules holds a status, and no status is
read off an error object outside the one mapping.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from referee.service import errors as service_errors
from referee.service.errors import (
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
from referee.web import pages
from referee.web.errors import fail
from referee.web.middlewares import errors_middleware, on_response_prepare

ROOT = Path(__file__).resolve().parents[2]
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[[web.Application], Awaitable[Client]]

#: The statuses the web answered these refusals with before they had kinds
#: (``fail(404, ...)``, ``StartError(409, ...)``, storage's 507 and 413...).
TODAY: dict[type[ServiceError], int] = {
    NotFound: 404,
    Invalid: 422,
    Forbidden: 403,
    Conflict: 409,
    RateLimited: 429,
    TooLarge: 413,
    DiskFull: 507,
    NotReady: 503,
    Unauthorized: 401,
}

MESSAGE = "competition 3 is frozen: only an open competition freezes"


def _kinds() -> list[type[ServiceError]]:
    found: list[type[ServiceError]] = []
    todo = [ServiceError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__ == service_errors.__name__:
                found.append(sub)
                todo.append(sub)
    return found


def test_every_kind_of_refusal_has_the_status_it_had() -> None:
    """A kind added without its status (or one dropped) is caught here, not by a client."""
    assert set(_kinds()) == set(TODAY)


def _app() -> web.Application:
    """The real middleware and pages; one route that refuses as asked, one that fails as before."""
    app = web.Application(middlewares=[errors_middleware])
    pages.setup(app)
    app.on_response_prepare.append(on_response_prepare)

    def kind_of(request: web.Request) -> type[ServiceError]:
        return next(k for k in [ServiceError, *_kinds()] if k.__name__ == request.match_info["kind"])

    async def refuse(request: web.Request) -> web.Response:
        kind = kind_of(request)
        field = request.query.get("field")
        retry = request.query.get("retry")
        raise kind(MESSAGE, field=field, retry_after=float(retry) if retry else None)

    async def old(request: web.Request) -> web.Response:
        headers = {"Retry-After": request.query["retry"]} if "retry" in request.query else None
        fail(int(request.match_info["status"]), MESSAGE, request.query.get("field"), headers)

    for prefix in ("/api", "/page"):
        app.router.add_get(prefix + "/refuse/{kind}", refuse)
        app.router.add_get(prefix + "/fail/{status}", old)
    return app


async def _answer(client: Client, path: str) -> tuple[int, str, str, str | None, str]:
    r = await client.get(path)
    return (
        r.status,
        r.content_type,
        await r.text(),
        r.headers.get("Retry-After"),
        r.headers["X-Frame-Options"],
    )


@pytest.mark.parametrize("kind", list(TODAY), ids=lambda k: k.__name__)
async def test_each_refusal_is_answered_as_fail_answered_its_status(
    aiohttp_client: MakeClient, kind: type[ServiceError]
) -> None:
    client = await aiohttp_client(_app())
    status = TODAY[kind]
    name = kind.__name__
    for query_new, query_old in (("", ""), ("?field=opponents", "?field=opponents")):
        api = await _answer(client, f"/api/refuse/{name}{query_new}")
        assert api == await _answer(client, f"/api/fail/{status}{query_old}")
        assert api[:2] == (status, "application/json")
        r = await client.get(f"/api/refuse/{name}{query_new}")
        want = {"error": MESSAGE, "status": status} | ({"field": "opponents"} if query_new else {})
        assert await r.json() == want
        page = await _answer(client, f"/page/refuse/{name}{query_new}")
        assert page == await _answer(client, f"/page/fail/{status}{query_old}")
        assert page[:2] == (status, "text/html") and "only an open competition freezes" in page[2]


async def test_retry_after_is_whole_seconds_at_least_one(aiohttp_client: MakeClient) -> None:
    client = await aiohttp_client(_app())
    for retry, said in (("2.2", "3"), ("15", "15"), ("0.0004", "1"), ("0", "1")):
        for prefix in ("/api", "/page"):
            r = await client.get(f"{prefix}/refuse/RateLimited?retry={retry}")
            assert (r.status, r.headers.get("Retry-After")) == (429, said), (prefix, retry)
    assert (await client.get("/api/refuse/RateLimited")).headers.get("Retry-After") is None


async def test_a_bare_service_error_is_a_bad_request(aiohttp_client: MakeClient) -> None:
    client = await aiohttp_client(_app())
    r = await client.get("/api/refuse/ServiceError?field=name")
    assert (r.status, await r.json()) == (400, {"error": MESSAGE, "status": 400, "field": "name"})


def test_a_refusal_is_made_without_a_status() -> None:
    params = inspect.signature(ServiceError.__init__).parameters
    assert "status" not in params and list(params)[:2] == ["self", "message"]
    e = Conflict(MESSAGE, field="opponents", retry_after=3)
    assert not hasattr(e, "status") and str(e) == MESSAGE
    again = e.reworded(f"cannot open: {e.message}")
    assert type(again) is Conflict and (again.message, again.field, again.retry_after) == (
        f"cannot open: {MESSAGE}",
        "opponents",
        3,
    )


# ------------------------------------------------------------ the code's shape

#: Where an HTTP status may be made from what a refusal is: the one mapping, and the handlers.
WEB_ANSWERS = {"referee/web/errors.py", "referee/web/middlewares.py"}


def _sources(*folders: str) -> list[tuple[str, ast.Module]]:
    out = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            out.append((rel, ast.parse(path.read_text(), rel)))
    return out


def _is_error_class(node: ast.ClassDef) -> bool:
    names = [
        b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
        for b in node.bases
    ]
    return any(n.endswith(("Error", "Exception", "Fault")) or n in TODAY_NAMES for n in names)


TODAY_NAMES = {k.__name__ for k in TODAY} | {"ServiceError"}


def test_no_error_class_of_the_service_or_the_web_holds_a_status() -> None:
    """An exception that carries an HTTP status (``StartError(409, ...)``,
    ``PickError``) puts the web's answer in the domain: none is left."""
    found = []
    for rel, tree in _sources("referee/service", "referee/web"):
        if rel in WEB_ANSWERS:
            continue
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef) or not _is_error_class(cls):
                continue
            for node in ast.walk(cls):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign)
                    else []
                )
                for t in targets:
                    name = t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else ""
                    if "status" in name:
                        found.append(f"{rel}:{node.lineno}: {cls.name}.{name}")
    assert not found, "error classes with a status (raise a kind of ServiceError instead):\n" + "\n".join(
        found
    )


def test_no_status_is_read_off_an_error_outside_the_mapping() -> None:
    """``fail(e.status, e.message)``: a handler translating a domain error
    by hand. The middleware answers a ServiceError; nothing else reads a
    status off an object to answer with it."""
    found = []
    for rel, tree in _sources("referee/web"):
        if rel in WEB_ANSWERS:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("fail", "http_error")
                and node.args
                and isinstance(node.args[0], ast.Attribute)
            ):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:80]}")
            if isinstance(node, ast.ImportFrom) and any(a.name == "answer" for a in node.names):
                found.append(f"{rel}:{node.lineno}: the errors' answer() outside the middleware")
    assert not found, "\n".join(found)


def test_the_domain_modules_and_the_service_answer_no_http() -> None:
    found = []
    for rel, tree in _sources("referee/service"):
        for node in ast.walk(tree):  # `.errors` here is the service's own: the web's is `..web.errors`
            if isinstance(node, ast.ImportFrom) and node.module in ("web.errors", "referee.web.errors"):
                found.append(
                    f"{rel}:{node.lineno}: imports {', '.join(a.name for a in node.names)} from the web's errors"
                )
            if isinstance(node, ast.Attribute) and node.attr.startswith("HTTP"):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
