"""The ladder never stalls silently (issue 25, item 3), and the words of
its pages (item 8), through the real service on loopback with real HTTP
bots: too few players for a table says why and what to do, on the
leaderboard, the admin page and in the API; a house bot (or the built-in
greedy one) fills the seats; a team's new version that stops answering
puts its previous version back in play; the adjudicated share is shown and
explained."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web
from helpers_web import sample_bot_app, serve
from test_web_api import auth, new_team, submit
from test_web_ladder import board, until

Service = Any


def league(*, table_size: int, fill: str | None = None, house: str | None = None, turn_limit: int | None = None,
           max_games: int = 40) -> str:
    lines = ["[tournament]", 'name = "stall"', "seed = 5", f"table_size = {table_size}", 'schedule = "adaptive"',
             "concurrency = 2", "", "[stop]", f"max_games = {max_games}", "", "[timeouts]", "move_ms = 2000", "",
             "[ladder]", "concurrency = 2", "catch_up = 4"]
    if fill is not None:
        lines.append(f'fill = "{fill}"')
    if turn_limit is not None:
        lines += ["", "[rules]", f"turn_limit = {turn_limit}"]
    if house is not None:
        lines += ["", "[[bots]]", 'name = "house"', f'url = "{house}"']
    return "\n".join(lines) + "\n"


async def competition(client: Any, admin: str, text: str, name: str = "stall") -> int:
    r = await client.post("/api/competitions", json={"name": name, "league": text}, headers=auth(admin))
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


async def with_teams(client: Any, admin: str, cid: int, urls: list[str]) -> list[tuple[int, str]]:
    out = []
    for i, url in enumerate(urls):
        tid, token = await new_team(client, admin, cid, f"t{i}")
        assert (await submit(client, cid, tid, token, {"url": url}))["submission"]["status"] == "accepted"
        out.append((tid, token))
    return out


async def open_it(client: Any, admin: str, cid: int) -> None:
    r = await client.post(f"/api/competitions/{cid}/open", headers=auth(admin))
    assert r.status == 202, await r.text()


async def admin_html(client: Any, admin: str, cid: int) -> str:
    origin = {"Origin": f"http://{client.host}:{client.port}"}
    r = await client.post("/admin/login", data={"token": admin}, allow_redirects=False, headers=origin)
    assert r.status == 303
    return str(await (await client.get(f"/admin/c/{cid}")).text())


async def test_three_players_at_tables_of_four_without_house_bots_say_why_and_what_to_do(
        service: Service, admin_token: str, bot_urls: dict[str, str]) -> None:
    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, league(table_size=4, fill="none"))
    await with_teams(client, admin_token, cid, [bot_urls["greedy"], bot_urls["random"], bot_urls["random"]])
    await open_it(client, admin_token, cid)
    data = await until(client, cid, lambda d: d.get("waiting") is not None, timeout=60)
    why = data["waiting"]
    assert "needs at least 4 players to play (tables of 4) and has 3 (t0 v1, t1 v1, t2 v1)" in why, why
    assert "Add a house bot to the league file" in why and 'fill = "greedy"' in why and "wait for" in why
    assert data["games"] == 0 and data["run"]["status"] == "running"
    html = await (await client.get(f"/c/{cid}")).text()
    assert 'id="waiting"' in html and "Add a house bot to the league file" in html
    assert re.search(r'ladder: <span class="status waiting">waiting</span>', html), html
    assert "playing" not in html.split('id="progress"')[1].split("</p>")[0]  # not "playing, 0 games"
    admin = await admin_html(client, admin_token, cid)
    assert 'id="waiting"' in admin and "needs at least 4 players" in admin


async def test_with_a_house_bot_or_the_built_in_greedy_bot_the_games_are_played(
        service: Service, admin_token: str, bot_urls: dict[str, str]) -> None:
    client = await service(submissions_per_window=20)
    urls = [bot_urls["greedy"], bot_urls["random"], bot_urls["random"]]
    housed = await competition(client, admin_token, league(table_size=4, fill="none", house=bot_urls["greedy"]))
    await with_teams(client, admin_token, housed, urls)
    filled = await competition(client, admin_token, league(table_size=4), "filled")  # fill = "greedy", the default
    await with_teams(client, admin_token, filled, urls)
    await open_it(client, admin_token, housed)
    await open_it(client, admin_token, filled)
    data = await until(client, housed, lambda d: d["games"] >= 4, timeout=120)
    assert data["waiting"] is None and {s["bot"] for s in data["standings"]} == {"house", "t0 v1", "t1 v1", "t2 v1"}
    data = await until(client, filled, lambda d: d["games"] >= 4, timeout=120)
    assert data["waiting"] is None
    assert {s["bot"] for s in data["standings"]} == {"house-greedy-1", "t0 v1", "t1 v1", "t2 v1"}
    assert data["house_bots"] == ["house-greedy-1"]  # flagged as a house bot
    html = await (await client.get(f"/c/{filled}")).text()
    assert "House bots: house-greedy-1" in html and 'id="waiting"' not in html


def dying_bot() -> tuple[web.Application, dict[str, bool]]:
    """The greedy sample bot, until told to die: then it resets every /act
    connection (as a container killed for its memory does)."""
    app = sample_bot_app("greedy")
    state = {"dead": False}

    @web.middleware
    async def die(request: web.Request, handler: Any) -> web.StreamResponse:
        if state["dead"] and request.path == "/act":
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        return await handler(request)  # type: ignore[no-any-return]

    app.middlewares.append(die)
    return app, state


async def test_a_new_version_that_is_dropped_puts_the_previous_one_back_in_play(
        service: Service, admin_token: str, bot_urls: dict[str, str]) -> None:
    """One team and one house bot at tables of 2: the team's new version
    stops answering and is dropped. On the old code its previous version
    stayed retired, the house bot sat alone and the ladder played nothing
    for ever; now the previous version plays on, and the pages say so."""
    app, state = dying_bot()
    runner, dying = await serve(app)
    try:
        client = await service(submissions_per_window=20)
        cid = await competition(client, admin_token, league(table_size=2, house=bot_urls["greedy"]))
        [(tid, token)] = await with_teams(client, admin_token, cid, [bot_urls["random"]])
        await open_it(client, admin_token, cid)
        await until(client, cid, lambda d: d["games"] >= 4)
        assert (await submit(client, cid, tid, token, {"url": dying}))["submission"]["status"] == "accepted"
        await until(client, cid, lambda d: any(s["bot"] == "t0 v2" and s["games"] >= 2 for s in d["standings"]))
        state["dead"] = True
        data = await until(client, cid, lambda d: any(s["bot"] == "t0 v2" for s in d["retired"])
                           and any(s["bot"] == "t0 v1" for s in d["standings"]), timeout=120)
        before = data["games"]
        data = await until(client, cid, lambda d: d["games"] >= before + 6, timeout=120)  # it plays on
        assert data["waiting"] is None
        assert {s["bot"] for s in data["standings"]} == {"house", "t0 v1"}
        # the team's page says which version plays and why
        origin = {"Origin": f"http://{client.host}:{client.port}"}
        r = await client.post("/login", data={"token": token}, allow_redirects=False, headers=origin)
        assert r.status == 303
        live = await (await client.get("/team/live")).text()
        assert re.search(r"In play now: <b>t0 v1</b> — back in play: t0 v2 was dropped \(it stopped answering", live), live
        # and the admin's
        admin = await admin_html(client, admin_token, cid)
        row = admin.split('data-team="t0"')[1].split("</tr>")[0]
        assert "t0 v1: <span class=\"status\">active</span>" in row and "back in play" in row
    finally:
        await runner.cleanup()


async def test_the_adjudicated_share_is_shown_and_explained(
        service: Service, admin_token: str, bot_urls: dict[str, str]) -> None:
    """With a turn limit of 10, every game reaches it and is adjudicated
    (RULES.md [D12]): the leaderboard says how many and what it means."""
    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, league(table_size=2, house=bot_urls["greedy"], turn_limit=10))
    await with_teams(client, admin_token, cid, [bot_urls["random"]])
    await open_it(client, admin_token, cid)
    data = await until(client, cid, lambda d: d["games"] >= 4)
    assert data["adjudicated"] >= 4 and data["turn_limit"] == 10
    html = await (await client.get(f"/c/{cid}")).text()
    text = re.sub(r"<[^>]+>", "", html.split('id="adjudicated"')[1].split("</p>")[0])
    m = re.search(r"(\d+) of the (\d+) games \((\d+)%\) were adjudicated: they reached the limit of 10 turns, "
                  r"and the players still in were ranked by the penalty points", text)
    assert m, text
    assert m.group(1) == m.group(2) and m.group(3) == "100"
    assert "D12" in text
