"""The ladder and the final on Ray workers (issue 15, "Scale"): ``referee
serve --executor ray`` plays through the executors of ``referee tournament``,
with the same final standings as this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers_web import LOOPBACK
from test_web_api import auth, new_team, submit
from test_web_ladder import LEAGUE, until

from referee.tournament.runner import DETERMINISTIC_FIELDS
from referee.web import ServiceDB, Settings, make_app

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

pytestmark = pytest.mark.slow


async def final_of(aiohttp_client: Any, db_path: Path, bot_urls: dict[str, str], executor: str) -> list[Any]:
    db = ServiceDB(db_path)
    try:
        admin = db.ensure_admin_token()
    finally:
        db.close()
    assert admin is not None
    client = await aiohttp_client(
        make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK, executor=executor, min_update_s=0.05))
    )
    league = LEAGUE.format(house=bot_urls["greedy"])
    r = await client.post("/api/competitions", json={"name": "class", "league": league}, headers=auth(admin))
    cid = (await r.json())["id"]
    for name, body in (
        ("ada", {"url": bot_urls["greedy"]}),
        ("bo", {"url": bot_urls["signed"], "secret": "s3cret"}),
    ):
        tid, token = await new_team(client, admin, cid, name)
        assert (await submit(client, cid, tid, token, body))["submission"]["status"] == "accepted"
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin))).status == 202
    await until(client, cid, lambda d: d["games"] >= 6)
    assert (await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin))).status == 200
    r = await client.post(f"/api/competitions/{cid}/final", json={"seed": 1234}, headers=auth(admin))
    assert r.status == 202, await r.text()
    rid = (await r.json())["run"]["id"]
    data = await until(
        client, cid, lambda d: d["run"]["id"] == rid and d["run"]["status"] != "running", timeout=300
    )
    assert data["run"]["status"] == "finished" and data["run"]["seed"] == 1234, data["run"]
    db = ServiceDB(db_path)
    try:
        run = db.run(rid)
        assert run is not None
        out = Path(run.out_dir)
    finally:
        db.close()
    rows = json.loads((out / "standings.json").read_text())
    await client.close()
    return [{k: r[k] for k in DETERMINISTIC_FIELDS} for r in rows]


async def test_the_ladder_and_the_final_on_ray_give_the_standings_of_this_process(
    aiohttp_client: Any, tmp_path: Path, bot_urls: dict[str, str]
) -> None:
    from referee.web.run_start import start_ray

    local = await final_of(aiohttp_client, tmp_path / "local.sqlite", bot_urls, "local")
    start_ray(None)
    try:
        remote = await final_of(aiohttp_client, tmp_path / "ray.sqlite", bot_urls, "ray")
    finally:
        ray.shutdown()
    assert remote == local
    assert {r["bot"] for r in local} == {"house", "ada", "bo"}
