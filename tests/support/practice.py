"""Practice games as the service tests drive them: a practice league, its
competition, a team's practice URLs, a game played, a game's folder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from referee.service.store import ServiceDB
from referee.service.store.practice import get_game
from tests.support.api import auth, room_of

LEAGUE = """
[tournament]
name = "practice class"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 100000

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2
{extra}

[[bots]]
name = "house"
url = "{house}"
"""


async def competition(client: Any, admin: str, house: str, extra: str = "", name: str = "class") -> int:
    r = await client.post(
        "/api/competitions",
        json={"name": name, "league": LEAGUE.format(house=house, extra=extra)},
        headers=auth(admin),
    )
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


def base(cid: int, tid: int) -> str:
    return f"/api/competitions/{cid}/teams/{tid}/practice"


async def played(
    client: Any, cid: int, tid: int, token: str, pid: int, timeout: float = 120
) -> dict[str, Any]:
    """Practice game `pid` once it is over, as its team sees it: asked again
    each time the service signals a change (a practice game ends), never on a
    timer; `timeout` bounds a broken test only."""
    game: dict[str, Any] = {}

    async def over() -> bool:
        r = await client.get(f"{base(cid, tid)}/{pid}", headers=auth(token))
        assert r.status == 200, await r.text()
        game.clear()
        game.update(await r.json())
        return game["status"] not in ("queued", "playing")

    try:
        async with asyncio.timeout(timeout):
            await room_of(client).until(over)
    except TimeoutError:
        raise AssertionError(f"not over within {timeout:.0f} s: {game}") from None
    return dict(game)


def out_dir_of(db_path: Path, pid: int) -> Path:
    db = ServiceDB(db_path)
    try:
        game = get_game(db, pid)
    finally:
        db.close()
    assert game is not None
    return Path(game.out_dir)
