"""A competition that plays itself (issue 15), through the API: open, a
submission entering the ladder at once, its previous version retiring, a
restart in the middle, freeze, the final; and the fairness rules."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from tests.support.api import auth, error_of, new_team, submit
from tests.support.ladder import board, competition, ladder_dir, recorded, until

Service = Any


@pytest.mark.slow
async def test_the_ladders_life_open_enter_retire_restart_freeze_final(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, bot_urls["greedy"])
    teams = {}
    for name, url in (("ada", bot_urls["greedy"]), ("bo", bot_urls["random"]), ("cy", bot_urls["random"])):
        tid, token = await new_team(client, admin_token, cid, name)
        teams[name] = (tid, token)
        assert (await submit(client, cid, tid, token, {"url": url}))["submission"]["status"] == "accepted"
    # a run by hand, a freeze or a final make no sense before it opens
    assert (
        await error_of(await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin_token)), 409)
    )["error"].startswith(f"competition {cid} is setup")
    # only the admin opens it
    tid, token = teams["ada"]
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(token))).status == 403
    r = await client.post(f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(admin_token))
    assert r.status == 202, await r.text()
    opened = await r.json()
    assert opened["phase"] == "open" and opened["run"]["kind"] == "ladder"
    rid = opened["run"]["id"]
    data = await until(client, cid, lambda d: d["games"] >= 12)
    assert data["phase"] == "open" and data["run"]["kind"] == "ladder" and data["run"]["seed"] is None
    assert {s["bot"] for s in data["standings"]} == {"house", "ada v1", "bo v1", "cy v1"}
    assert (
        await error_of(await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token)), 409)
    )["error"].endswith("(a run by hand is for a competition in setup)")

    # a new version enters at once; the old one retires and keeps its history
    sub = await submit(client, cid, tid, token, {"url": bot_urls["random"], "note": "v2"})
    assert sub["submission"]["status"] == "accepted"
    data = await until(
        client, cid, lambda d: any(s["bot"] == "ada v2" and s["games"] >= 4 for s in d["standings"])
    )
    assert "ada v1" not in {s["bot"] for s in data["standings"]}
    old = next(s for s in data["retired"] if s["bot"] == "ada v1")
    assert old["games"] >= 2 and old["retired"]
    out = ladder_dir(db_path, cid)
    games = recorded(out)
    first_v2 = min(i for i, seats, _ in games if "ada v2" in seats)
    assert all("ada v1" not in seats for i, seats, _ in games if i > first_v2 + 8)
    # the team's page shows both versions
    page = await client.get("/api/competitions/%d/bots/%s" % (cid, "ada v1"))
    assert page.status == 200 and (await page.json())["standing"]["retired"]

    # the team's diagnostics follow its newest version, or the one it asks for; never another team's
    diag_url = f"/api/competitions/{cid}/teams/{tid}/diagnostics"
    diag = await (await client.get(diag_url, headers=auth(token))).json()
    assert diag["bot"] == "ada v2" and diag["games"]
    diag = await (await client.get(diag_url, params={"version": "ada v1"}, headers=auth(token))).json()
    assert diag["bot"] == "ada v1" and diag["games"]
    assert (await client.get(diag_url, params={"version": "bo v1"}, headers=auth(token))).status == 404

    # a restart in the middle: the ladder plays on by itself, nothing lost, nothing twice
    before = (await board(client, cid))["games"]
    await client.close()
    client = await service(submissions_per_window=20)
    data = await until(client, cid, lambda d: d["games"] >= before + 10 and d["run"]["status"] == "running")
    assert data["run"]["id"] == rid and data["phase"] == "open"

    # freeze: submissions close, the ladder stops after its games in flight
    r = await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin_token))
    assert r.status == 200, await r.text()
    assert (await r.json())["phase"] == "frozen"
    games = recorded(out)  # the games abandoned by the restart were played first after it
    assert [i for i, _, _ in games] == list(range(len(games)))
    data = await board(client, cid)
    assert data["run"]["status"] == "finished" and data["phase"] == "frozen"
    closed = await client.put(
        f"/api/competitions/{cid}/teams/{tid}/bot", json={"url": bot_urls["greedy"]}, headers=auth(token)
    )
    assert (await error_of(closed, 409))["error"].startswith("submissions are closed")
    frozen_games = len(recorded(out))
    await asyncio.sleep(0.3)
    assert len(recorded(out)) == frozen_games  # nothing plays while frozen

    # the final: the frozen bots from fresh ratings, adaptive, until settled or its budget
    r = await client.post(f"/api/competitions/{cid}/final", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    final = (await r.json())["run"]
    assert final["kind"] == "final" and final["seed"] is None
    data = await until(client, cid, lambda d: d["run"]["status"] != "running", timeout=300)
    assert data["run"]["status"] == "finished" and data["run"]["id"] == final["id"], data["run"]
    assert {s["bot"] for s in data["standings"]} == {"house", "ada", "bo", "cy"}
    assert 0 < data["games"] <= 60
    assert all(s["rank_low"] <= s["rank"] <= s["rank_high"] for s in data["standings"])
    seed = data["run"]["seed"]
    assert isinstance(seed, int)  # published now that every deal is played
    csv = await client.get(f"/api/competitions/{cid}/runs/{final['id']}/standings.csv")
    assert csv.status == 200 and csv.content_type == "text/csv"
    text = await csv.text()
    assert text.splitlines()[0].startswith("rank,bot,mu,sigma") and "rank_low" in text.splitlines()[0]
    assert len(text.splitlines()) == 5
    listed = await (await client.get(f"/api/competitions/{cid}/runs/{final['id']}/games")).json()
    assert len(listed) == data["games"]
    page = await client.get(f"/c/{cid}")
    html = await page.text()
    assert str(seed) in html and "standings as CSV" in html


async def test_while_it_plays_no_public_answer_holds_the_seed_or_an_unfinished_deal(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    tid, token = await new_team(client, admin_token, cid, "ada")
    await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    r = await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))
    assert r.status == 202
    rid = (await r.json())["run"]["id"]
    await until(client, cid, lambda d: d["games"] >= 6)
    db = ServiceDB(db_path)
    try:
        run = db.run(rid)
        assert run is not None
        seed = json.loads(run.league_json)["tournament"]["seed"]
    finally:
        db.close()
    assert seed != 5  # a fresh secret seed, not the league file's
    for url in (
        f"/api/competitions/{cid}",
        f"/api/competitions/{cid}/runs",
        f"/api/competitions/{cid}/runs/{rid}/games",
        f"/c/{cid}",
        "/api/competitions",
        f"/c/{cid}/live",
    ):
        body = await (await client.get(url)).text()
        assert str(seed) not in body, url
    await client.close()  # stopped: its games in flight abandoned
    out = ladder_dir(db_path, cid)
    games = recorded(out)
    per_deal: dict[int, list[int]] = {}
    for i, _, d in games:
        per_deal.setdefault(d, []).append(i)
    partial = [idx for idx in per_deal.values() if len(idx) < 2]
    if not partial:  # killed between a deal's two rotations: the second is still to play
        with sqlite3.connect(out / "tournament.sqlite") as con:
            con.execute("DELETE FROM games WHERE idx = ?", (games[-1][0],))
        partial = [[i for i in per_deal[games[-1][2]] if i != games[-1][0]]]
    client = await service(poll_s=0.05)
    idx = partial[0][0]
    # the server is up again but not yet played the deal's other rotation: check right away
    r = await client.get(f"/api/competitions/{cid}/runs/{rid}/games/{idx}")
    if r.status == 403:
        assert "not public yet" in (await r.json())["error"]
    await until(client, cid, lambda d: d["games"] >= len(games) + 4)
    r = await client.get(f"/api/competitions/{cid}/runs/{rid}/games/{idx}")
    assert r.status == 200  # every rotation played: public


async def test_an_admin_opens_freezes_and_starts_the_final_from_the_page(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    tid, token = await new_team(client, admin_token, cid, "ada")
    await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    # sign in
    page = await client.get("/admin/login")
    assert page.status == 200
    r = await client.post(
        "/admin/login",
        data={"token": admin_token},
        allow_redirects=False,
        headers={"Origin": f"http://{client.host}:{client.port}"},
    )
    assert r.status == 303
    html = await (await client.get(f"/admin/c/{cid}")).text()
    csrf = html.split('name="csrf" value="')[1].split('"')[0]
    origin = {"Origin": f"http://{client.host}:{client.port}"}
    bad = await client.post(
        f"/admin/c/{cid}/open", data={"csrf": "nope"}, headers=origin, allow_redirects=False
    )
    assert bad.status == 403
    bad = await client.post(
        f"/admin/c/{cid}/open", data={"csrf": csrf, "concurrency": "many"}, headers=origin
    )
    assert bad.status == 422
    r = await client.post(
        f"/admin/c/{cid}/open", data={"csrf": csrf, "concurrency": "2"}, headers=origin, allow_redirects=False
    )
    assert r.status == 303, await r.text()
    await until(client, cid, lambda d: d["games"] >= 4)
    html = await (await client.get(f"/admin/c/{cid}")).text()
    assert 'data-phase="open"' in html and "ada v1" in html and 'id="freeze"' in html
    r = await client.post(
        f"/admin/c/{cid}/freeze", data={"csrf": csrf}, headers=origin, allow_redirects=False
    )
    assert r.status == 303
    r = await client.post(f"/admin/c/{cid}/final", data={"csrf": csrf}, headers=origin, allow_redirects=False)
    assert r.status == 303
    data = await until(
        client, cid, lambda d: d["run"]["kind"] == "final" and d["run"]["status"] == "finished", timeout=300
    )
    html = await (await client.get(f"/admin/c/{cid}")).text()
    assert 'id="final-csv"' in html and data["phase"] == "final"
