"""A new competition without a league file gets the default league, with the
service's built-in house bots (issue 34, items 1 and 8): from the API, and
on the admin page, whose *New competition* form starts from it; the empty
home page points to the admin page."""

from __future__ import annotations

import html
from typing import Any

from referee.service.default_league import DEFAULT_LEAGUE
from referee.tournament.league import parse_league
from tests.support.api import auth, csrf_of, signed_in

Service = Any


async def test_a_competition_without_a_league_gets_the_default_one(
    service: Service, admin_token: str
) -> None:
    client = await service()
    r = await client.post("/api/competitions", json={"name": "class"}, headers=auth(admin_token))
    assert r.status == 201, await r.text()
    cid = (await r.json())["id"]
    versions = await (await client.get(f"/api/competitions/{cid}/league", headers=auth(admin_token))).json()
    text = versions[0]["league"]
    assert text == DEFAULT_LEAGUE
    bots = {b.name: b.builtin for b in parse_league(text, bots_to_come=True).bots}
    assert bots == {"house-random": "random", "house-greedy": "greedy", "house-tactician": "tactician"}
    # a blank one too
    r = await client.post(
        "/api/competitions", json={"name": "blank", "league": " \n"}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()


async def test_the_new_competition_form_starts_from_the_default_league(
    service: Service, admin_token: str
) -> None:
    client = await service()
    home = await (await client.get("/")).text()
    assert 'href="/admin"' in home  # no competition yet: the page says where to make one
    await signed_in(client, admin_token)
    page = await (await client.get("/admin")).text()
    textarea = page.split('<textarea name="league"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    assert html.unescape(textarea) == DEFAULT_LEAGUE
    r = await client.post(
        "/admin/competitions",
        data={"csrf": csrf_of(page), "name": "class", "league": html.unescape(textarea)},
        allow_redirects=False,
    )
    assert r.status == 303, await r.text()
