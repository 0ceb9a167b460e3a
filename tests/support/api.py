"""The service's JSON API and its pages as the tests drive them: tokens, competitions,
teams, submissions waited for until settled, runs, errors, the sign-in forms."""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import Callable
from typing import Any

from referee.service.classroom import Classroom
from referee.web.app_state import ROOM
from referee.web.sessions import ADMIN_COOKIE
from tests.support.web import league_text


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def new_competition(client: Any, admin: str, *, name: str = "class", **league: Any) -> int:
    r = await client.post(
        "/api/competitions", json={"name": name, "league": league_text(**league)}, headers=auth(admin)
    )
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


async def new_team(client: Any, admin: str, cid: int, name: str) -> tuple[int, str]:
    r = await client.post(f"/api/competitions/{cid}/teams", json={"name": name}, headers=auth(admin))
    assert r.status == 201, await r.text()
    body = await r.json()
    return int(body["id"]), str(body["token"])


async def submit(
    client: Any,
    cid: int,
    tid: int,
    token: str,
    body: dict[str, Any],
    *,
    wait: bool = True,
    sender: str | None = None,
) -> dict[str, Any]:
    """PUT the team's bot (with `sender`'s token: the admin's, who may name an
    image on the server; else the team's own); with `wait`, until its
    admission check is over: the submission as the team sees it then
    (status, reason, report, log)."""
    r = await client.put(f"/api/competitions/{cid}/teams/{tid}/bot", json=body, headers=auth(sender or token))
    assert r.status == 201, await r.text()
    sid = (await r.json())["id"]
    return await settled(client, cid, tid, token, sid) if wait else dict(await r.json())


async def settled(
    client: Any, cid: int, tid: int, token: str, sid: int, timeout: float = 120
) -> dict[str, Any]:
    """A submission once it is accepted or refused (or superseded): waited
    for on the service's admission pipeline (`timeout` bounds a broken
    test), then read as the team sees it."""
    await room_of(client).pipeline.wait_for(sid, timeout_s=timeout)
    r = await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token))
    assert r.status == 200, await r.text()
    return dict(await r.json())


def room_of(client: Any) -> Classroom:
    """The service core behind an aiohttp test client of the service."""
    return client.app[ROOM]  # type: ignore[no-any-return]


async def board_until(
    client: Any, cid: int, ready: Callable[[dict[str, Any]], bool], timeout: float = 120
) -> dict[str, Any]:
    """Competition `cid`'s data (GET /api/competitions/{cid}) once `ready`
    says yes: asked again at each change of the service (a game recorded, a
    verdict, a phase, a run's end), never on a timer; `timeout` bounds a
    broken test only."""
    seen: dict[str, Any] = {}

    async def ready_now() -> bool:
        r = await client.get(f"/api/competitions/{cid}")
        assert r.status == 200, await r.text()
        seen.clear()
        seen.update(await r.json())
        return ready(seen)

    try:
        async with asyncio.timeout(timeout):
            await room_of(client).until(ready_now)
    except TimeoutError:
        raise AssertionError(f"not within {timeout:.0f} s: {seen}") from None
    return dict(seen)


async def play_run(client: Any, cid: int, admin: str) -> dict[str, Any]:
    """Start a run and wait until it is over: the competition's data then (it finished)."""
    r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin))
    assert r.status == 202, await r.text()
    rid = (await r.json())["id"]
    data = await board_until(client, cid, lambda d: d["run"]["id"] == rid and d["run"]["status"] != "running")
    assert data["run"]["status"] == "finished", data["run"]
    return data


async def error_of(r: Any, status: int) -> dict[str, Any]:
    assert r.status == status, f"expected {status}, got {r.status}: {await r.text()}"
    assert r.content_type == "application/json"
    body = await r.json()
    assert isinstance(body["error"], str) and body["error"]
    return dict(body)


async def read_events(
    resp: Any, until: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> list[dict[str, Any]]:
    """Read server-sent ``update`` events until one satisfies ``until``. What
    came after it in the same chunk is kept for the next call on `resp`."""
    seen: list[dict[str, Any]] = []

    async def go() -> None:
        while True:
            buf = _unread.get(resp, b"")
            while b"\n\n" in buf:
                raw, buf = buf.split(b"\n\n", 1)
                _unread[resp] = buf
                lines = raw.decode().splitlines()
                if "event: update" not in lines:
                    continue
                data = json.loads("".join(x[len("data: ") :] for x in lines if x.startswith("data: ")))
                seen.append(data)
                if until(data):
                    return
            chunk = await resp.content.readany()
            assert chunk, "the event stream closed"
            _unread[resp] = buf + chunk

    await asyncio.wait_for(go(), timeout)
    return seen


#: Each event stream's bytes read but not yet parsed (an event after the one a call waited for).
_unread: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()


async def login(client: Any, token: str) -> str:
    r = await client.post("/login", data={"token": token}, allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/team"
    cookie = str(r.headers["Set-Cookie"])
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert token not in cookie and token not in r.headers["Location"]
    return cookie.split(";", 1)[0].split("=", 1)[1]


async def signed_in(client: Any, token: str) -> str:
    r = await client.post("/admin/login", data={"token": token}, allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/admin"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(ADMIN_COOKIE) and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert token not in cookie
    return csrf_of(await (await client.get("/admin")).text())


def url_of(cid: int, tid: int) -> str:
    return f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source"


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
