"""The ladder and the final on Ray workers (issue 15, "Scale"): ``referee
serve --executor ray`` plays through the executors of ``referee tournament``,
with the same final standings as this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers_web import LOOPBACK, new_admin_token
from test_web_api import auth, new_team, submit
from test_web_ladder import LEAGUE, ladder_dir, until

from referee.bots.sandbox.instance import Instance
from referee.service.store import ServiceDB
from referee.tournament.runner import DETERMINISTIC_FIELDS
from referee.web import Settings, make_app
from referee.web.admission_queue import PIPELINE

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

pytestmark = pytest.mark.slow


class Final(NamedTuple):
    """What a competition's ladder and final left: the final's standings
    (the fields that do not depend on timing), the ladder's and the final's
    run folders, the service's install (its images and containers' names)."""

    standings: list[dict[str, Any]]
    ladder: Path
    final: Path
    instance: Instance


async def final_of(
    aiohttp_client: Any,
    db_path: Path,
    house: str,
    teams: dict[str, dict[str, Any]],
    *,
    by_admin: bool = False,
    **settings: Any,
) -> Final:
    """A competition through the service with `settings`: the house URL bot
    at `house`, `teams` ({name: the body of its bot's submission}, sent with
    the admin's token when `by_admin`: an image on the server is the
    admin's to name), six ladder games, the freeze and a final of seed 1234."""
    admin = new_admin_token(db_path)
    client = await aiohttp_client(
        make_app(
            db_path, Settings(**{"poll_s": 0.05, "bot_policy": LOOPBACK, "min_update_s": 0.05, **settings})
        )
    )
    league = LEAGUE.format(house=house)
    r = await client.post("/api/competitions", json={"name": "class", "league": league}, headers=auth(admin))
    cid = (await r.json())["id"]
    for name, body in teams.items():
        tid, token = await new_team(client, admin, cid, name)
        sub = (await submit(client, cid, tid, token, body, sender=admin if by_admin else None))["submission"]
        assert sub["status"] == "accepted", sub
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin))).status == 202
    await until(client, cid, lambda d: d["games"] >= 6, timeout=300)
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
    instance = client.server.app[PIPELINE].instance
    await client.close()
    return Final(
        standings=[{k: r[k] for k in DETERMINISTIC_FIELDS} for r in rows],
        ladder=ladder_dir(db_path, cid),
        final=out,
        instance=instance,
    )


def url_teams(bot_urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {"ada": {"url": bot_urls["greedy"]}, "bo": {"url": bot_urls["signed"], "secret": "s3cret"}}


async def test_the_ladder_and_the_final_on_ray_give_the_standings_of_this_process(
    aiohttp_client: Any, tmp_path: Path, bot_urls: dict[str, str]
) -> None:
    from referee.web.run_start import start_ray

    teams = url_teams(bot_urls)
    local = await final_of(aiohttp_client, tmp_path / "local.sqlite", bot_urls["greedy"], teams)
    start_ray(None)
    try:
        remote = await final_of(
            aiohttp_client, tmp_path / "ray.sqlite", bot_urls["greedy"], teams, executor="ray"
        )
    finally:
        ray.shutdown()
    assert remote.standings == local.standings
    assert {r["bot"] for r in local.standings} == {"house", "ada", "bo"}
