"""The games API a page at a time (issue 37): ``?page=N&per_page=M`` in
schedule order, with ``X-Total-Count`` and ``Link`` headers; without either
the whole list, as clients written before pages read it; a bot's games
paged with their filters; sizes out of bounds refused saying what to give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from referee.service.store import ServiceDB
from referee.tournament.store import TOURNAMENT_DB, Store
from tests.support.api import error_of
from tests.support.ladder import competition

Service = Any

BOTS = ["ada", "bo", "cy", "di"]


def _recorded(out: Path, games: int) -> None:
    """`games` two-seat games recorded as the runner records them (game 3 missing: one in flight)."""
    out.mkdir(parents=True)
    with Store(out / TOURNAMENT_DB) as store:
        for i in range(games + 1):
            if i == 3:
                continue
            seats = [BOTS[i % 4], BOTS[(i + 1) % 4]]
            store.record_game(
                index=i,
                round_=0,
                meeting=i,
                rotation=0,
                deal_seed=i,
                seats=seats,
                game_id=f"g{i}",
                places=[1, 2],
                adjudicated=False,
                disqualified=[],
                turns=10,
                result={"places": [1, 2]},
                faults=[(0, seats[0], "timeout", 2, "late", 1.0)] if i % 5 == 0 else [],
                replay=None,
            )


async def test_the_games_api_pages_in_schedule_order_and_without_a_page_answers_every_game(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path, tmp_path: Path
) -> None:
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    out = tmp_path / "run"
    _recorded(out, 25)  # 25 games: 0-2 and 4-25
    db = ServiceDB(db_path)
    try:
        run = db.begin_run(cid, out_dir=str(out), league_json="{}", total_games=0)
        assert not isinstance(run, str)
        db.end_run(run.id, "finished")
    finally:
        db.close()
    url = f"/api/competitions/{cid}/runs/{run.id}/games"

    every = await (await client.get(url)).json()  # no page asked: every game, as before
    assert [g["index"] for g in every] == [0, 1, 2, *range(4, 26)]

    r = await client.get(url, params={"page": "2", "per_page": "10"})
    assert r.status == 200
    assert await r.json() == every[10:20]  # the same rows, fault counts included
    assert r.headers["X-Total-Count"] == "25"
    links = dict(
        (part.split('rel="')[1].rstrip('"'), part.split(">")[0].lstrip("<"))
        for part in r.headers["Link"].split(", ")
    )
    assert set(links) == {"first", "prev", "next", "last"}
    assert "page=3" in links["next"] and "per_page=10" in links["next"] and "page=1" in links["prev"]
    last = await client.get(links["last"])
    assert await last.json() == every[20:] and "next" not in last.headers["Link"]
    assert await (await client.get(url, params={"page": "4", "per_page": "10"})).json() == []

    r = await client.get(url, params={"page": "1"})  # the default page size
    assert await r.json() == every and r.headers["X-Total-Count"] == "25"

    # a bot's games, filtered, a page at a time
    ada = await (await client.get(url, params={"bot": "ada", "result": "won"})).json()
    assert ada and all(g["seats"][0] == "ada" for g in ada)
    r = await client.get(url, params={"bot": "ada", "result": "won", "page": "1", "per_page": "2"})
    assert await r.json() == ada[:2] and r.headers["X-Total-Count"] == str(len(ada))
    assert "result=won" in r.headers["Link"] and "bot=ada" in r.headers["Link"]

    for bad in ("0", "1001", "ten"):
        err = await error_of(await client.get(url, params={"per_page": bad}), 400)
        assert "from 1 to 1000" in err["error"]
    assert "is not a page" in (await error_of(await client.get(url, params={"page": "-1"}), 400))["error"]
