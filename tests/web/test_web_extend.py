"""Extending an unsettled final through the API and the admin page (issue 34
item 4): who may (401, 403), when (409), with what (422), and the estimate
the leaderboard shows; the rule itself is proven on the service core
(tests/service/test_final_and_edits.py)."""

from __future__ import annotations

from typing import Any

from tests.support.api import auth, error_of, new_team, signed_in, submit
from tests.support.ladder import LEAGUE, until

Service = Any


async def test_extend_the_final_through_the_api(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    league = LEAGUE.format(house=bot_urls["greedy"]).replace("max_games = 60", "max_games = 4")
    r = await client.post(
        "/api/competitions", json={"name": "class", "league": league}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()
    cid = (await r.json())["id"]
    tid, token = await new_team(client, admin_token, cid, "ada")
    await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    url = f"/api/competitions/{cid}/final/extend"

    r = await client.post(url, json={"games": 10})
    assert "missing token" in (await error_of(r, 401))["error"]
    r = await client.post(url, json={"games": 10}, headers=auth(token))
    assert "needs the admin token" in (await error_of(r, 403))["error"]
    r = await client.post(url, json={"games": 10}, headers=auth(admin_token))
    assert "only a finished final is extended" in (await error_of(r, 409))["error"]
    r = await client.post(url, json={"games": "many"}, headers=auth(admin_token))
    await error_of(r, 422)

    # a final of 4 games: unsettled, with the estimate on the board
    for step in ("open", "freeze", "final"):
        r = await client.post(f"/api/competitions/{cid}/{step}", headers=auth(admin_token))
        assert r.status in (200, 202), await r.text()
    data = await until(
        client, cid, lambda d: d["run"]["kind"] == "final" and d["run"]["status"] == "finished"
    )
    final = data["run"]
    assert data["games"] == 4 and data["unsettled"], data
    pair = data["unsettled"][0]
    assert {pair["upper"], pair["lower"]} <= {"ada", "house"} and "more" in pair
    assert final["league_version"] == 1
    # the admin page: the estimate and the form; a refusal comes back with the page
    csrf = await signed_in(client, admin_token)
    html = await (await client.get(f"/admin/c/{cid}")).text()
    assert (
        'id="estimates"' in html
        and 'id="extend"' in html
        and ("more games each" in html or "look equal" in html)
    )
    origin = {"Origin": f"http://{client.host}:{client.port}"}
    r = await client.post(f"/admin/c/{cid}/extend", data={"csrf": csrf, "games": "1"}, headers=origin)
    assert r.status == 422 and 'id="extend-error"' in await r.text()
    r = await client.post(url, json={"games": 1}, headers=auth(admin_token))
    assert "'games': at least 2" in (await error_of(r, 422))["error"]

    r = await client.post(url, json={"games": 12}, headers=auth(admin_token))
    assert r.status == 202, await r.text()
    answer = await r.json()
    assert answer["run"]["id"] == final["id"] and answer["run"]["total_games"] == 16
    data = await until(client, cid, lambda d: d["run"]["status"] == "finished" and d["games"] > 4)
    assert data["run"]["id"] == final["id"] and 4 < data["games"] <= 16
    assert data["run"]["seed"] == final["seed"]  # the same seed stream, published again
