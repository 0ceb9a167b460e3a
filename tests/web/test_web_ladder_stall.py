"""The ladder never stalls silently (issue 25, item 3), and the words of
its pages (item 8), through the real service on loopback with real HTTP
bots: too few players for a table says why and what to do, on the
leaderboard, the admin page and in the API; a house bot (or the built-in
greedy one) fills the seats; a team's new version that stops answering
puts its previous version back in play; the adjudicated share is shown and
explained."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web

from tests.support.api import auth, new_team, submit
from tests.support.ladder import until
from tests.support.web import sample_bot_app, serve

Service = Any


def league(
    *,
    table_size: int,
    fill: str | None = None,
    house: str | None = None,
    turn_limit: int | None = None,
    max_games: int = 40,
) -> str:
    lines = [
        "[tournament]",
        'name = "stall"',
        "seed = 5",
        f"table_size = {table_size}",
        'schedule = "adaptive"',
        "concurrency = 2",
        "",
        "[stop]",
        f"max_games = {max_games}",
        "",
        "[timeouts]",
        "move_ms = 2000",
        "",
        "[ladder]",
        "concurrency = 2",
        "catch_up = 4",
    ]
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


@pytest.mark.slow
async def test_three_players_at_tables_of_four_without_house_bots_say_why_and_what_to_do(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
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


@pytest.mark.slow
async def test_with_a_house_bot_or_the_built_in_greedy_bot_the_games_are_played(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service(submissions_per_window=20)
    urls = [bot_urls["greedy"], bot_urls["random"], bot_urls["random"]]
    housed = await competition(
        client, admin_token, league(table_size=4, fill="none", house=bot_urls["greedy"])
    )
    await with_teams(client, admin_token, housed, urls)
    filled = await competition(
        client, admin_token, league(table_size=4), "filled"
    )  # fill = "greedy", the default
    await with_teams(client, admin_token, filled, urls)
    await open_it(client, admin_token, housed)
    await open_it(client, admin_token, filled)
    data = await until(client, housed, lambda d: d["games"] >= 4, timeout=120)
    assert data["waiting"] is None and {s["bot"] for s in data["standings"]} == {
        "house",
        "t0 v1",
        "t1 v1",
        "t2 v1",
    }
    data = await until(client, filled, lambda d: d["games"] >= 4, timeout=120)
    assert data["waiting"] is None
    assert {s["bot"] for s in data["standings"]} == {"house-greedy-1", "t0 v1", "t1 v1", "t2 v1"}
    assert data["house_bots"] == ["house-greedy-1"]  # flagged as a house bot
    html = await (await client.get(f"/c/{filled}")).text()
    assert "House bots: house-greedy-1" in html and 'id="waiting"' not in html
    # flagged in the standings: a house bot, not a team's
    assert re.search(
        r'<tr data-bot="house-greedy-1">.*?house-greedy-1</a> <span class="muted house"', html, re.S
    )
    assert not re.search(r'<tr data-bot="t0 v1">[^\n]*<span class="muted house"', html)


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
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
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
        await until(
            client, cid, lambda d: any(s["bot"] == "t0 v2" and s["games"] >= 2 for s in d["standings"])
        )
        state["dead"] = True
        data = await until(
            client,
            cid,
            lambda d: (
                any(s["bot"] == "t0 v2" for s in d["retired"])
                and any(s["bot"] == "t0 v1" for s in d["standings"])
            ),
            timeout=120,
        )
        before = data["games"]
        data = await until(client, cid, lambda d: d["games"] >= before + 6, timeout=120)  # it plays on
        assert data["waiting"] is None
        assert {s["bot"] for s in data["standings"]} == {"house", "t0 v1"}
        # the team's page says which version plays and why
        origin = {"Origin": f"http://{client.host}:{client.port}"}
        r = await client.post("/login", data={"token": token}, allow_redirects=False, headers=origin)
        assert r.status == 303
        live = await (await client.get("/team/live")).text()
        assert re.search(
            r"In play now: <b>t0 v1</b> — back in play: t0 v2 was dropped \(it stopped answering", live
        ), live
        # and the admin's
        admin = await admin_html(client, admin_token, cid)
        row = admin.split('data-team="t0"')[1].split("</tr>")[0]
        assert 't0 v1: <span class="status">active</span>' in row and "back in play" in row
    finally:
        await runner.cleanup()


async def test_the_adjudicated_share_is_shown_and_explained(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """With a turn limit of 10, every game reaches it and is adjudicated
    (RULES.md [D12]): the leaderboard says how many and what it means."""
    client = await service(submissions_per_window=20)
    cid = await competition(
        client, admin_token, league(table_size=2, house=bot_urls["greedy"], turn_limit=10)
    )
    await with_teams(client, admin_token, cid, [bot_urls["random"]])
    await open_it(client, admin_token, cid)
    data = await until(client, cid, lambda d: d["games"] >= 4)
    assert data["adjudicated"] >= 4 and data["turn_limit"] == 10
    html = await (await client.get(f"/c/{cid}")).text()
    text = re.sub(r"<[^>]+>", "", html.split('id="adjudicated"')[1].split("</p>")[0])
    m = re.search(
        r"(\d+) of the (\d+) games \((\d+)%\) were adjudicated: they reached the limit of 10 turns, "
        r"and the players still in were ranked by the penalty points",
        text,
    )
    assert m, text
    assert m.group(1) == m.group(2) and m.group(3) == "100"
    assert "D12" in text


def test_a_final_whose_settled_ranks_overlap_says_in_words_what_each_reading_means() -> None:
    """The case of the issue: ranks 3 and 4 settled apart (p > next clears
    the league's confidence under the table's rule) while both rank
    intervals read 3–4. The page names the pair and says what each reading
    means, so the two statements no longer seem to contradict each other."""
    from referee.tournament.ratings import Standing
    from referee.web.pages import environment
    from referee.web.schemas import Leaderboard, RunInfo

    def row(rank: int, bot: str, low: int, high: int, p: float | None, below: bool) -> Standing:
        return Standing(
            bot=bot,
            mu=30.0 - rank,
            sigma=1.0,
            score=27.0 - rank,
            games=40,
            wins=10,
            avg_place=2.5,
            faults={},
            rank=rank,
            p_above_next=p,
            rank_low=low,
            rank_high=high,
            separated_above=True,
            separated_below=below,
        )

    rows = [
        row(1, "ada", 1, 1, 0.999, True),
        row(2, "bo", 2, 2, 0.999, True),
        row(3, "cy", 3, 4, 0.97, True),
        row(4, "di", 3, 4, None, True),
    ]
    board = Leaderboard(
        id=1,
        name="class",
        created_at=0.0,
        teams=["ada", "bo", "cy", "di"],
        house_bots=[],
        runs=[],
        run=RunInfo(
            id=2,
            status="finished",
            total_games=80,
            error=None,
            started_at=0.0,
            finished_at=1.0,
            kind="final",
            seed=9,
        ),
        pinned=False,
        games=80,
        standings=rows,
        recent_games=[],
        phase="final",
        adjudicated=12,
    )
    html = environment().get_template("live.html").render(board=board)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert "Every bot is separated from the one right below it at the league's confidence." in text
    reading = re.sub(r"<[^>]+>", "", html.split('id="reading"')[1].split("</p>")[0])
    assert "settled compares a bot with the one right below it only" in reading
    assert "rank 95% interval is another measure" in reading and "counts every rival" in reading
    assert "cy (rank 3, 3–4) is settled above di (rank 4, 3–4)" in reading
    assert "ada (rank 1" not in reading  # only the pairs whose intervals overlap are named
    adjudicated = re.sub(r"<[^>]+>", "", html.split('id="adjudicated"')[1].split("</p>")[0])
    assert "12 of the 80 games (15%) were adjudicated: they reached the limit of 1,000 turns" in adjudicated
