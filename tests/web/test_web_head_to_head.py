"""Who you lose to (issue 35, item 3): a bot's head-to-head against each
opponent on its page, its team's page and in the API, checked against a
count made from the games' own replay records of a real ladder (sample bots,
four seats); its games filtered by opponent and result, the filters kept
across pages; the empty state."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from referee.replay import read as read_replay
from referee.tournament.results import replay_path
from tests.support.api import auth, error_of, login, new_team, submit
from tests.support.ladder import ladder_dir, until

Service = Any


def game_numbers(page: str) -> list[int]:
    """The games a bot page lists (its games table's first column)."""
    table = page[page.index('<table class="grid games">') :]
    table = table[: table.index("</table>")]
    return [int(n) for n in re.findall(r"<tr><td>(\d+)</td>", table)]


def replay_of(out: Path, index: int) -> Path:
    path = replay_path(out, index)
    assert path is not None and path.exists(), f"game {index} kept no replay"
    return path


LEAGUE = """
[tournament]
name = "four seats"
seed = 11
table_size = 4
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 400

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2
catch_up = 4

[[bots]]
name = "house"
url = "{house}"
"""


def wilson(wins: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval, from its textbook formula."""
    z = 1.959964
    p = wins / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n), (centre + spread) / (1 + z * z / n)


@pytest.mark.slow
async def test_head_to_head_and_the_games_filters_agree_with_the_replays_of_a_real_ladder(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    r = await client.post(
        "/api/competitions",
        json={"name": "four", "league": LEAGUE.format(house=bot_urls["greedy"])},
        headers=auth(admin_token),
    )
    assert r.status == 201, await r.text()
    cid = int((await r.json())["id"])
    tokens = {}
    for name, kind in (("ada", "greedy"), ("bo", "random"), ("cy", "random"), ("di", "greedy")):
        tid, token = await new_team(client, admin_token, cid, name)
        tokens[name] = token
        assert (await submit(client, cid, tid, token, {"url": bot_urls[kind]}))["submission"][
            "status"
        ] == "accepted"

    # before any game: the empty state, on the team's page and the bot's
    await login(client, tokens["ada"])
    page = await (await client.get("/team")).text()
    assert '<p class="muted empty" id="head-to-head">No games against anyone yet.</p>' in page

    r = await client.post(f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(admin_token))
    assert r.status == 202, await r.text()
    rid = (await r.json())["run"]["id"]
    me = "ada v1"
    await until(client, cid, lambda d: any(s["bot"] == me and s["games"] >= 26 for s in d["standings"]))
    r = await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin_token))
    assert r.status == 200, await r.text()
    await until(client, cid, lambda d: d["run"]["status"] == "finished")
    out = ladder_dir(db_path, cid)

    # the count made from the replay records
    games = await (await client.get(f"/api/competitions/{cid}/runs/{rid}/games", params={"bot": me})).json()
    assert len(games) >= 26
    tally: dict[str, list[int]] = {}  # opponent: [games, wins, losses, draws, my places summed]
    firsts = 0
    for g in games:
        record = read_replay(replay_of(out, g["index"]))
        assert record.result is not None and record.header.names == g["seats"]
        places = record.result.places
        mine = places[record.header.names.index(me)]
        firsts += mine == 1
        for seat, other in enumerate(record.header.names):
            if other == me:
                continue
            t = tally.setdefault(other, [0, 0, 0, 0, 0])
            t[0] += 1
            t[1] += mine < places[seat]
            t[2] += mine > places[seat]
            t[3] += mine == places[seat]
            t[4] += mine
    assert set(tally) == {"house", "bo v1", "cy v1", "di v1"}, tally

    bot = await (
        await client.get(f"/api/competitions/{cid}/bots/{quote(me)}", params={"run": str(rid)})
    ).json()
    h2h = {o["opponent"]: o for o in bot["head_to_head"]}
    assert set(h2h) == set(tally)
    for name, (n, wins, losses, draws, place_sum) in tally.items():
        o = h2h[name]
        assert (o["games"], o["wins"], o["losses"], o["draws"]) == (n, wins, losses, draws), (name, o)
        score = wins + draws / 2
        low, high = wilson(score, n)
        assert o["rate"] == round(score / n, 4) and (o["low"], o["high"]) == (round(low, 4), round(high, 4))
        assert o["place"] == round(place_sum / n, 2)
        assert o["house"] == (name == "house")
    rates = [o["rate"] for o in bot["head_to_head"]]
    assert rates == sorted(rates), "the opponent it fares worst against comes first"

    # the games list filtered, in the API: the same counts
    api = f"/api/competitions/{cid}/runs/{rid}/games"
    for name, (n, wins, losses, draws, _) in tally.items():
        for result, expected in ((None, n), ("won", wins), ("lost", losses), ("drawn", draws)):
            params = {"bot": me, "opponent": name, **({"result": result} if result else {})}
            got = await (await client.get(api, params=params)).json()
            assert len(got) == expected, (name, result)
            assert all(name in g["seats"] for g in got)
    got = await (await client.get(api, params={"bot": me, "result": "won"})).json()
    assert len(got) == firsts and all(g["places"][g["seats"].index(me)] == 1 for g in got)
    got = await (await client.get(api, params={"bot": me, "result": "lost"})).json()
    assert len(got) == len(games) - firsts
    got = await (await client.get(api, params={"bot": me, "result": "2"})).json()
    assert got and all(g["places"][g["seats"].index(me)] == 2 for g in got)
    # the bot's JSON filters its games the same way
    filtered = await (
        await client.get(
            f"/api/competitions/{cid}/bots/{quote(me)}",
            params={"run": str(rid), "opponent": "house", "result": "won"},
        )
    ).json()
    assert len(filtered["games"]) == tally["house"][1] and filtered["head_to_head"] == bot["head_to_head"]
    # refusals that say what to give
    assert (
        "give ?bot=NAME too"
        in (await error_of(await client.get(api, params={"opponent": "house"}), 400))["error"]
    )
    assert (
        "is not a result"
        in (await error_of(await client.get(api, params={"bot": me, "result": "best"}), 400))["error"]
    )
    assert (
        "needs ?opponent="
        in (await error_of(await client.get(api, params={"bot": me, "result": "drawn"}), 400))["error"]
    )

    # the bot's page: the table, and its games filtered and paged with the filters kept
    page = await (await client.get(f"/c/{cid}/bots/{quote(me)}", params={"run": str(rid)})).text()
    rows = re.findall(
        r'<tr data-opponent="([^"]+)">.*?<td class="wld">(\d+) · (\d+) · (\d+)</td>', page, re.S
    )
    assert {html.unescape(o): (int(w), int(lo), int(d)) for o, w, lo, d in rows} == {
        k: (v[1], v[2], v[3]) for k, v in tally.items()
    }
    assert "finished ahead of it" in page  # the help text says what a win is
    busiest = max(tally, key=lambda k: tally[k][0])
    assert tally[busiest][0] > 20  # more than a page of games against it
    page = await (
        await client.get(f"/c/{cid}/bots/{quote(me)}", params={"run": str(rid), "opponent": busiest})
    ).text()
    shown = game_numbers(page)
    assert len(shown) == 20
    older = re.search(r'<a href="\?([^"]+)" rel="next" class="older">', page)
    assert older is not None
    query = html.unescape(older.group(1))
    assert (
        f"opponent={quote(busiest)}" in query.replace("+", "%20")
        and f"run={rid}" in query
        and "page=2" in query
    )
    rest = await (await client.get(f"/c/{cid}/bots/{quote(me)}?{query}")).text()
    assert len(game_numbers(rest)) == min(20, tally[busiest][0] - 20)
    # a filter no game passes says so (a draw, the same place, is rare in four seats)
    none = next(
        (o, r) for o, t in tally.items() for r, k in (("drawn", 3), ("won", 1), ("lost", 2)) if t[k] == 0
    )
    page = await (
        await client.get(
            f"/c/{cid}/bots/{quote(me)}", params={"run": str(rid), "opponent": none[0], "result": none[1]}
        )
    ).text()
    assert f"No game of {me} matches these filters." in page and 'id="games-unfilter"' in page
    # the filter form offers the opponents met and keeps what was chosen
    assert f'<option value="{none[1]}" selected>' in page

    # the team's page: its own version's head-to-head
    page = await (await client.get("/team")).text()
    assert 'id="who-you-lose-to"' in page and f'data-bot="{me}"' in page
    assert "No games against anyone yet." not in page
    assert len(re.findall(r'<tr data-opponent="', page)) == len(tally)
