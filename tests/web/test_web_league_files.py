"""League files an admin sends through the web (issue 24, item 7): one
nested 10,000 levels deep is a 422 naming the problem, not a 500; a house
URL bot is under the address policy of the teams' URLs
(``referee serve --house-urls-anywhere`` lifts it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from helpers_web import league_text
from test_web_api import auth, error_of

Service = Callable[..., Awaitable[Any]]

DEEP = "[tournament]\nseed = " + "[" * 10_000 + "]" * 10_000 + "\n"


async def test_a_league_nested_10000_deep_is_a_422_naming_the_problem(service: Service, admin_token: str) -> None:
    """Attack: tomllib's RecursionError was a 500 (and a traceback in the log)."""
    client = await service()
    r = await client.post("/api/competitions", json={"name": "deep", "league": DEEP}, headers=auth(admin_token))
    err = await error_of(r, 422)
    assert err["field"] == "league" and "nested too deeply" in err["error"], err
    # the admin's form: its page again, with the error
    origin = {"Origin": str(client.make_url("")).rstrip("/")}
    r = await client.post("/admin/login", data={"token": admin_token}, headers=origin, allow_redirects=False)
    assert r.status == 303
    page = await (await client.get("/admin")).text()
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = await client.post("/admin/competitions", data={"csrf": csrf, "name": "deep", "league": DEEP}, headers=origin,
                          allow_redirects=False)
    assert r.status == 422 and "nested too deeply" in await r.text()
    # nothing was made
    assert await (await client.get("/api/competitions")).json() == []
    # and a good league still is
    r = await client.post("/api/competitions", json={"name": "fine", "league": league_text()}, headers=auth(admin_token))
    assert r.status == 201, await r.text()
