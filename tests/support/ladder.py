"""The open ladder as the service tests drive it: a ladder league, its competition,
waiting on the board, its folder and games, the final."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

from referee.bots.sandbox.instance import Instance
from referee.service.store import ServiceDB
from referee.tournament.runner import DETERMINISTIC_FIELDS
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.api import auth, board_until, new_team, submit
from tests.support.web import LOOPBACK, new_admin_token

LEAGUE = """
[tournament]
name = "ladder class"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 60

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2
catch_up = 4

[[bots]]
name = "house"
url = "{house}"
"""


async def competition(client: Any, admin: str, house: str) -> int:
    r = await client.post(
        "/api/competitions", json={"name": "class", "league": LEAGUE.format(house=house)}, headers=auth(admin)
    )
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


async def board(client: Any, cid: int) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}")
    assert r.status == 200
    return dict(await r.json())


async def until(client: Any, cid: int, cond: Any, timeout: float = 120) -> dict[str, Any]:
    """The competition's board once `cond` holds (at the service's changes, :func:`board_until`)."""
    return await board_until(client, cid, cond, timeout)


def ladder_dir(db_path: Path, cid: int) -> Path:
    db = ServiceDB(db_path)
    try:
        run = db.latest_run_of(cid, "ladder")
        assert run is not None
        return Path(run.out_dir)
    finally:
        db.close()


def recorded(out: Path) -> list[tuple[int, list[str], int]]:
    with sqlite3.connect(out / "tournament.sqlite") as db:
        return [
            (i, json.loads(s), d)
            for i, s, d in db.execute("SELECT idx, seats, deal_seed FROM games ORDER BY idx")
        ]


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
    instance = client.server.app[ROOM].pipeline.instance
    await client.close()
    return Final(
        standings=[{k: r[k] for k in DETERMINISTIC_FIELDS} for r in rows],
        ladder=ladder_dir(db_path, cid),
        final=out,
        instance=instance,
    )
