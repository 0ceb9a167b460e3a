"""One numbering per team and a CSV a teacher can grade from (issues 25 and
26), through the API of a real service on loopback: a team's second
submission is its "v2" whatever the other teams submitted in between (the
ladder names it "ada v2", the API says ``version: 2`` beside the
service-wide ``id``); the final's standings CSV says whose bot each row is,
flags the house bots, leaves them out with ``?house=0``, and leaves
``separated_above`` empty on the first row and ``separated_below`` on the
last."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from tests.support.api import auth, error_of, new_team, settled, submit
from tests.support.ladder import competition, until

Service = Any


@pytest.mark.slow
async def test_versions_are_per_team_and_the_final_csv_says_whose_bot_each_row_is(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, bot_urls["greedy"])
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bo, bo_token = await new_team(client, admin_token, cid, "bo")
    # ada's v1, bo's v1 and v2, then ada's v2: submission 4 of the service
    first = await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})
    await submit(client, cid, bo, bo_token, {"url": bot_urls["random"]})
    r = await client.put(
        f"/api/competitions/{cid}/teams/{bo}/bot", json={"url": bot_urls["greedy"]}, headers=auth(bo_token)
    )
    assert r.status == 201 and (await r.json())["version"] == 2, await r.text()
    bo_v2 = (await r.json())["id"]
    r = await client.put(
        f"/api/competitions/{cid}/teams/{ada}/bot", json={"url": bot_urls["greedy"]}, headers=auth(ada_token)
    )
    put = await r.json()
    assert put["id"] == first["submission"]["id"] + 3 and put["version"] == 2, put
    for sid, team, token in ((bo_v2, bo, bo_token), (put["id"], ada, ada_token)):
        assert (await settled(client, cid, team, token, sid))["submission"]["status"] == "accepted"
    r = await client.put(
        f"/api/competitions/{cid}/teams/{bo}/bot", json={"url": bot_urls["greedy"]}, headers=auth(bo_token)
    )
    second = await r.json()
    assert second["version"] == 3, second
    assert (await settled(client, cid, bo, bo_token, second["id"]))["submission"]["status"] == "accepted"

    # the API: `id` is still the service's, `version` the team's
    listed = await (
        await client.get(f"/api/competitions/{cid}/teams/{ada}/submissions", headers=auth(ada_token))
    ).json()
    assert [(s["id"], s["version"]) for s in listed] == [(put["id"], 2), (first["submission"]["id"], 1)]
    one = await (
        await client.get(
            f"/api/competitions/{cid}/teams/{ada}/submissions/{put['id']}", headers=auth(ada_token)
        )
    ).json()
    assert one["submission"]["version"] == 2
    own = await (await client.get(f"/api/competitions/{cid}/teams/{ada}/bot", headers=auth(ada_token))).json()
    assert own["playing"]["version"] == 2 and own["bot"]["version"] == 2
    teams = await (await client.get(f"/api/competitions/{cid}/teams", headers=auth(admin_token))).json()
    assert {t["name"]: t["bot"]["version"] for t in teams} == {"ada": 2, "bo": 3}

    # the ladder names the versions as the pages do
    r = await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    data = await until(client, cid, lambda d: d["games"] >= 6)
    assert {s["bot"] for s in data["standings"]} == {"house", "ada v2", "bo v3"}
    bot = await (await client.get(f"/api/competitions/{cid}/bots/ada v2")).json()
    assert bot["submission"]["version"] == 2

    r = await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin_token))
    assert r.status == 200, await r.text()
    r = await client.post(f"/api/competitions/{cid}/final", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    rid = (await r.json())["run"]["id"]
    data = await until(client, cid, lambda d: d["run"]["status"] != "running", timeout=300)
    assert data["run"]["status"] == "finished" and data["run"]["id"] == rid, data["run"]
    url = f"/api/competitions/{cid}/runs/{rid}/standings.csv"

    r = await client.get(url)
    assert r.status == 200 and r.content_type == "text/csv"
    rows = list(csv.DictReader(io.StringIO(await r.text())))
    header = (await r.text()).splitlines()[0].split(",")
    assert header[:4] == ["rank", "bot", "mu", "sigma"]  # the old columns first, where they were
    assert header[-5:] == ["team_id", "team", "version", "submission", "house"]
    assert len(rows) == 3
    by_bot = {r["bot"]: r for r in rows}
    assert {k: by_bot["ada"][k] for k in ("team_id", "team", "version", "submission", "house")} == {
        "team_id": str(ada),
        "team": "ada",
        "version": "v2",
        "submission": str(put["id"]),
        "house": "",
    }
    assert {k: by_bot["bo"][k] for k in ("team_id", "team", "version", "submission", "house")} == {
        "team_id": str(bo),
        "team": "bo",
        "version": "v3",
        "submission": str(second["id"]),
        "house": "",
    }
    assert {k: by_bot["house"][k] for k in ("team_id", "team", "version", "submission", "house")} == {
        "team_id": "",
        "team": "",
        "version": "",
        "submission": "",
        "house": "yes",
    }
    # no bot above the first nor below the last to be separated from
    assert rows[0]["separated_above"] == "" and rows[-1]["separated_below"] == ""
    assert rows[0]["separated_below"] in ("True", "False") and rows[-1]["separated_above"] in (
        "True",
        "False",
    )
    assert [int(r["rank"]) for r in rows] == [1, 2, 3]

    # ?house=0: the teams alone, with the ranks of the run
    r = await client.get(url, params={"house": "0"})
    assert r.status == 200
    teams_only = list(csv.DictReader(io.StringIO(await r.text())))
    assert [r["bot"] for r in teams_only] == [r["bot"] for r in rows if r["bot"] != "house"]
    assert [r["rank"] for r in teams_only] == [r["rank"] for r in rows if r["bot"] != "house"]
    assert "house" in (await error_of(await client.get(url, params={"house": "no"}), 400))["error"]

    # the admin page links both
    r = await client.post(
        "/admin/login",
        data={"token": admin_token},
        allow_redirects=False,
        headers={"Origin": f"http://{client.host}:{client.port}"},
    )
    assert r.status == 303
    html = await (await client.get(f"/admin/c/{cid}")).text()
    assert f'href="{url}" id="final-csv"' in html and f'href="{url}?house=0" id="final-csv-teams"' in html


async def test_the_leaderboards_list_of_runs_is_paged_newest_first(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    db = ServiceDB(db_path)
    try:
        for _ in range(45):
            run = db.begin_run(cid, out_dir="", league_json="{}", total_games=0)
            assert not isinstance(run, str)
            db.end_run(run.id, "failed", "made by the test")
    finally:
        db.close()
    html = await (await client.get(f"/c/{cid}")).text()
    shown = [int(n) for n in re.findall(r">run (\d+)</a>", html.split('id="runs"', 1)[1].split("</p>", 1)[0])]
    assert shown == list(range(45, 25, -1))
    assert "page 1 of 3 (45 in all)" in html and '<a href="?page=2" rel="next"' in html
    html = await (await client.get(f"/c/{cid}", params={"page": "3"})).text()
    shown = [int(n) for n in re.findall(r">run (\d+)</a>", html.split('id="runs"', 1)[1].split("</p>", 1)[0])]
    assert shown == list(range(5, 0, -1)) and '<a href="?page=2" rel="prev"' in html
    r = await client.get(f"/c/{cid}", params={"page": "0"})
    assert r.status == 400 and "is not a page" in await r.text()


async def test_a_superseded_submission_keeps_its_number_and_the_next_one_takes_the_next(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """Numbers are given when a submission is made and never change: a
    superseded one (replaced before its check) is "v1 superseded", the one
    that replaced it "v2", and the ladder names it "di v2" as the pages do."""
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    tid, token = await new_team(client, admin_token, cid, "di")
    db = ServiceDB(db_path)
    try:
        sub = db.add_submission(
            tid, kind="url", url=bot_urls["random"], image=None, secret=None, note="", status="superseded"
        )
        assert sub is not None
    finally:
        db.close()
    accepted = await submit(client, cid, tid, token, {"url": bot_urls["greedy"]})
    assert accepted["submission"]["status"] == "accepted" and accepted["submission"]["version"] == 2
    listed = await (
        await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions", headers=auth(token))
    ).json()
    assert [(s["version"], s["status"]) for s in listed] == [(2, "accepted"), (1, "superseded")]
    r = await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    data = await until(client, cid, lambda d: d["games"] >= 2)
    assert {s["bot"] for s in data["standings"]} == {"house", "di v2"}
