"""Deadlines (issue 25, item 5): a league file's ``[competition]
freeze_at``/``final_at`` (or the admin's) freeze a competition and start its
final by themselves, on the real service with real HTTP bots; a restart
across a deadline applies it at the start; a time without its zone is refused
naming the field and line; reopening past a deadline is refused."""

from __future__ import annotations

import asyncio
import datetime
import re
import time
from pathlib import Path
from typing import Any

import pytest

from referee.service.deadlines import remaining
from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.api import auth, board_until, error_of, room_of
from tests.support.web import LOOPBACK

Service = Any


def league(house: dict[str, str], *, freeze_at: str | None = None, final_at: str | None = None) -> str:
    lines = [
        "[tournament]",
        'name = "timed"',
        "seed = 5",
        "table_size = 2",
        'schedule = "adaptive"',
        "concurrency = 2",
        "",
        "[stop]",
        "max_games = 8",
        "",
        "[timeouts]",
        "move_ms = 2000",
        "",
    ]
    if freeze_at or final_at:
        lines.append("[competition]")
        lines += [f"freeze_at = {freeze_at}"] if freeze_at else []
        lines += [f"final_at = {final_at}"] if final_at else []
        lines.append("")
    for name, url in house.items():
        lines += ["[[bots]]", f'name = "{name}"', f'url = "{url}"', ""]
    return "\n".join(lines)


def at(seconds: float) -> str:
    """A time `seconds` from now, ISO 8601 in UTC with its Z."""
    when = datetime.datetime.fromtimestamp(time.time() + seconds, datetime.UTC).replace(microsecond=0)
    return when.isoformat().replace("+00:00", "Z")


async def create(client: Any, admin: str, text: str, name: str = "timed") -> int:
    r = await client.post("/api/competitions", json={"name": name, "league": text}, headers=auth(admin))
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


async def board(client: Any, cid: int) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}")
    assert r.status == 200, await r.text()
    return dict(await r.json())


async def until(client: Any, cid: int, cond: Any, timeout: float) -> dict[str, Any]:
    """The board once `cond` holds, at the service's changes (`timeout`, at least 120 s, bounds a broken test)."""
    return await board_until(client, cid, cond, max(timeout, 120))


def houses(urls: dict[str, str]) -> dict[str, str]:
    return {"house-greedy": urls["greedy"], "house-random": urls["random"]}


def stored(db_path: Path, cid: int) -> tuple[Any, Any, Any]:
    db = ServiceDB(db_path)
    try:
        comp = db.competition(cid)
        assert comp is not None
        return comp, db.latest_run_of(cid, "ladder"), db.latest_run_of(cid, "final")
    finally:
        db.close()


async def test_the_league_files_deadlines_freeze_and_start_the_final_by_themselves(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    freeze, final = at(4), at(7)
    cid = await create(client, admin_token, league(houses(bot_urls), freeze_at=freeze, final_at=final))
    r = await client.get(f"/api/competitions/{cid}/deadlines")
    assert await r.json() == {"freeze_at": freeze, "final_at": final, "source": "league"}
    page = await (await client.get(f"/c/{cid}")).text()
    assert re.search(r"Submissions close in \d+ s", page) and 'data-countdown="' in page
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))).status == 202
    await until(client, cid, lambda d: d["phase"] == "open" and d["games"] >= 1, 30)
    frozen = await until(client, cid, lambda d: d["phase"] != "open", 30)
    assert frozen["phase"] in ("frozen", "final")
    freeze_ts = datetime.datetime.fromisoformat(freeze).timestamp()

    async def frozen_as_of_the_deadline() -> bool:  # once the ladder's games in flight end
        return stored(db_path, cid)[0].frozen_at == freeze_ts

    async with asyncio.timeout(120):  # a bound for a broken test
        await room_of(client).until(frozen_as_of_the_deadline)
    # submissions closed as of the deadline itself
    comp, ladder, _ = stored(db_path, cid)
    assert time.time() >= freeze_ts
    assert ladder is not None and ladder.status != "running"
    page = await (await client.get(f"/c/{cid}")).text()
    assert "Submissions close" not in page
    done = await until(
        client,
        cid,
        lambda d: (
            d["phase"] == "final"
            and d["run"] is not None
            and d["run"]["kind"] == "final"
            and d["run"]["status"] == "finished"
        ),
        60,
    )
    _, _, final_run = stored(db_path, cid)
    assert (
        final_run is not None and final_run.started_at >= datetime.datetime.fromisoformat(final).timestamp()
    )
    assert done["games"] >= 1
    assert "The final starts" not in await (await client.get(f"/c/{cid}")).text()


@pytest.mark.slow
async def test_a_restart_across_the_deadlines_applies_them_at_the_start(
    aiohttp_client: Any, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    settings = Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK)
    client = await aiohttp_client(make_app(db_path, settings))
    cid = await create(client, admin_token, league(houses(bot_urls)))
    r = await client.put(
        f"/api/competitions/{cid}/deadlines",
        json={"freeze_at": at(3), "final_at": at(4)},
        headers=auth(admin_token),
    )
    assert r.status == 200, await r.text()
    body = await r.json()
    assert body["source"] == "admin"
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))).status == 202
    await until(client, cid, lambda d: d["games"] >= 1, 30)
    await client.close()  # the server stops before its deadlines
    comp, _, _ = stored(db_path, cid)
    assert comp.phase == "open"
    await asyncio.sleep(
        max(0.0, datetime.datetime.fromisoformat(body["final_at"]).timestamp() - time.time()) + 0.5
    )

    again = await aiohttp_client(make_app(db_path, settings))
    first = await board(again, cid)  # the first answer after the start: both already applied
    assert first["phase"] == "final", first
    comp, ladder, final = stored(db_path, cid)
    assert comp.frozen_at == datetime.datetime.fromisoformat(body["freeze_at"]).timestamp()
    assert ladder is not None and ladder.status != "running"  # the ladder did not play again
    assert final is not None and final.kind == "final"
    await until(again, cid, lambda d: d["run"] is not None and d["run"]["status"] == "finished", 60)


async def test_times_without_a_zone_are_refused_naming_the_field(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    text = league(houses(bot_urls), freeze_at="2030-06-01T17:00:00")
    r = await client.post(
        "/api/competitions", json={"name": "bad", "league": text}, headers=auth(admin_token)
    )
    err = await error_of(r, 422)
    line = text.splitlines().index("freeze_at = 2030-06-01T17:00:00") + 1
    assert f"league:{line}: [competition] 'freeze_at': 2030-06-01T17:00:00 has no time zone" in err["error"]
    r = await client.post(
        "/api/competitions",
        json={
            "name": "bad",
            "league": league(
                houses(bot_urls), freeze_at="2030-06-01T17:00:00Z", final_at="2030-06-01T16:00:00Z"
            ),
        },
        headers=auth(admin_token),
    )
    assert "'final_at'" in (await error_of(r, 422))["error"]

    cid = await create(client, admin_token, league(houses(bot_urls)))
    url = f"/api/competitions/{cid}/deadlines"
    err = await error_of(
        await client.put(url, json={"freeze_at": "2030-06-01 17:00"}, headers=auth(admin_token)), 422
    )
    assert err["field"] == "freeze_at" and "no time zone" in err["error"]
    err = await error_of(await client.put(url, json={"final_at": "friday"}, headers=auth(admin_token)), 422)
    assert err["field"] == "final_at" and "not an ISO 8601 time" in err["error"]
    assert (await client.put(url, json={"freeze_at": at(3600)})).status in (401, 403)

    # a deadline that has passed: the competition does not open until it is moved or cleared
    assert (await client.put(url, json={"freeze_at": at(-60)}, headers=auth(admin_token))).status == 200
    err = await error_of(await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token)), 409)
    assert "freeze_at" in err["error"] and "has passed" in err["error"]
    r = await client.delete(url, headers=auth(admin_token))
    assert await r.json() == {"freeze_at": None, "final_at": None, "source": "league"}
    assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))).status == 202


def test_remaining_reads_as_the_pages_script_writes_it() -> None:
    assert [remaining(s) for s in (9, 247, 3900, 2 * 86400 + 3 * 3600 + 5)] == [
        "9 s",
        "4 min 07 s",
        "1 h 05 min",
        "2 d 3 h",
    ]
