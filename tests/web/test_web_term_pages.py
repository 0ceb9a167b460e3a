"""The pages at a term's size show a bounded part, the rest a page at a
time (issue 37): a ladder's earlier versions, a bot's games, the admin's
teams. The term is written through the stores' own tables (as
benchmarks/service_scale.py writes one, smaller), then served."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec

from referee.bots.factory import BotSpec
from referee.service.runs import check_league_text
from referee.service.store import ServiceDB
from referee.tournament.store import TOURNAMENT_DB, Entry, open_ladder_store
from referee.web.handlers.admin_pages import TEAMS_PAGE_SIZE
from referee.web.handlers.competitions import EARLIER_PAGE_SIZE, RETIRED_SHOWN
from referee.web.paging import H2H_SHOWN, PAGE_SIZE

Service = Any

LEAGUE = """[tournament]
name = "term"
seed = 5
table_size = 3
rounds = 1

[timeouts]
move_ms = 2000
"""

#: Teams with versions in the ladder, each with VERSIONS of them (the last in play).
LADDER_TEAMS = H2H_SHOWN + 4
VERSIONS = 10
#: Teams in all: more than a page of the admin's.
TEAMS = TEAMS_PAGE_SIZE + 5
#: Games the first team's version in play played (seated with two others in play, in
#: turn: it meets every other team's).
GAMES = 2 * PAGE_SIZE + 5


def _result(names: list[str], places: list[int]) -> dict[str, Any]:
    """A game's result as the runner records it (each seat's moves' latencies, its faults)."""
    return {
        "game_id": "g",
        "seed": 1,
        "names": names,
        "places": places,
        "adjudicated": False,
        "disqualified": [],
        "points": [0] * len(names),
        "turns": 10,
        "faults": [[] for _ in names],
        "strikes": [0] * len(names),
        "latency": [{"count": 2, "p50_ms": 1.0, "p95_ms": 2.0, "max_ms": 2.0} for _ in names],
        "latencies_ms": [[1.0, 2.0] for _ in names],
    }


def write_term(db_path: Path) -> dict[str, Any]:
    """A competition of TEAMS teams whose first LADDER_TEAMS entered VERSIONS
    versions each into its (finished) ladder; the first's version in play
    played GAMES games, each other team's version in play in turn. Its ids,
    names, tokens and the games' places."""
    db = ServiceDB(db_path)
    try:
        cid = db.add_competition("term", LEAGUE).id
        made = db.add_teams(cid, [f"t{i:03d}" for i in range(TEAMS)])
        teams = [t for t, _ in made]
        league = check_league_text(LEAGUE)
        out = db.data_dir / f"competition-{cid}" / "ladder-1"
        out.mkdir(parents=True)
        run = db.begin_run(
            cid,
            out_dir=str(out),
            league_json=msgspec.json.encode(league).decode(),
            total_games=0,
            kind="ladder",
        )
        assert not isinstance(run, str)
        store = open_ladder_store(out / TOURNAMENT_DB)
        store.set_meta("league", msgspec.json.encode(league).decode())
        now = 1.7e9
        for v in range(1, VERSIONS + 1):
            for t in teams[:LADDER_TEAMS]:
                sub = db.add_submission(
                    t.id,
                    kind="url",
                    url="http://127.0.0.1:9",
                    image=None,
                    secret=None,
                    note="",
                    status="accepted",
                )
                assert sub is not None
                last = v == VERSIONS
                store.put_entry(
                    Entry(
                        name=f"{t.name} v{v}",
                        team=t.name,
                        team_id=t.id,
                        submission=sub.id,
                        spec=BotSpec(name=f"{t.name} v{v}", url="http://127.0.0.1:9"),
                        mu0=25.0,
                        sigma0=8.333,
                        games0=0,
                        joined_at=now + v * 100 + t.id,
                        first_index=0,
                        status="active" if last else "retired",
                        reason=None if last else "a newer version entered",
                    )
                )
        playing = [f"{t.name} v{VERSIONS}" for t in teams[:LADDER_TEAMS]]
        places = []
        for i in range(GAMES):
            others = playing[1:]
            seated = [playing[0], others[2 * i % len(others)], others[(2 * i + 1) % len(others)]]
            rot = i % 3
            names = seated[rot:] + seated[:rot]
            order = [1 + (i + k) % 3 for k in range(3)]
            places.append(order[names.index(seated[0])])
            store.record_game(
                index=i,
                round_=0,
                meeting=i // 3,
                rotation=rot,
                deal_seed=i // 3,
                seats=names,
                game_id=f"{i:024x}",
                places=order,
                adjudicated=False,
                disqualified=[],
                turns=10,
                result=_result(names, order),
                faults=[],
                replay=None,
            )
        store.close()
        db.end_run(run.id, "finished")
        return {
            "cid": cid,
            "run": run.id,
            "teams": teams,
            "token": made[0][1],
            "bot": playing[0],
            "places": places,
        }
    finally:
        db.close()


def rows(html: str, within: str) -> list[str]:
    """The bots of the standings rows inside the element of id `within`."""
    start = html.index(f'id="{within}"')
    part = html[start:]
    end = part.find("</table>")
    return re.findall(r'<tr data-bot="([^"]+)"', part[:end])


async def test_the_ladders_board_shows_its_best_earlier_versions_and_all_a_page_at_a_time(
    service: Service, db_path: Path
) -> None:
    term = write_term(db_path)
    client = await service()
    cid, rid = term["cid"], term["run"]
    data = await (await client.get(f"/api/competitions/{cid}", params={"run": str(rid)})).json()
    retired = [s["bot"] for s in data["retired"]]  # the JSON keeps every one, in the table's order
    assert len(retired) == LADDER_TEAMS * (VERSIONS - 1) > EARLIER_PAGE_SIZE > RETIRED_SHOWN
    assert len(data["standings"]) == LADDER_TEAMS

    page = await (await client.get(f"/c/{cid}", params={"run": str(rid)})).text()
    assert rows(page, "retired") == retired[:RETIRED_SHOWN]  # the best ranked of them
    assert f"{len(retired)} earlier versions" in page
    assert f'href="/c/{cid}/earlier?run={rid}" id="retired-all"' in page

    shown = []
    pages = -(-len(retired) // EARLIER_PAGE_SIZE)
    for number in range(1, pages + 1):
        earlier = await client.get(f"/c/{cid}/earlier", params={"run": str(rid), "page": str(number)})
        assert earlier.status == 200
        html = await earlier.text()
        shown += rows(html, "earlier")
        assert f"page {number} of {pages} ({len(retired)} in all)" in html
    assert shown == retired  # every one, once, in rank order
    last = await (await client.get(f"/c/{cid}/earlier", params={"run": str(rid), "page": "99"})).text()
    assert rows(last, "earlier") == retired[(pages - 1) * EARLIER_PAGE_SIZE :]  # past the last: the last


async def test_a_bots_games_a_page_at_a_time_newest_first_and_on_its_json(
    service: Service, db_path: Path
) -> None:
    term = write_term(db_path)
    client = await service()
    cid, rid, bot = term["cid"], term["run"], term["bot"]
    url = f"/c/{cid}/bots/{bot}"

    def games_on(html: str) -> list[int]:
        table = html[html.index('<table class="grid games">') :]
        return [int(g) for g in re.findall(r"<tr><td>(\d+)</td>", table[: table.index("</table>")])]

    first = await (await client.get(url, params={"run": str(rid)})).text()
    assert games_on(first) == list(range(GAMES - 1, GAMES - 1 - PAGE_SIZE, -1))  # the newest, newest first
    assert f"page 1 of 3 ({GAMES} in all)" in first
    last = await (await client.get(url, params={"run": str(rid), "page": "3"})).text()
    assert games_on(last) == list(range(GAMES - 2 * PAGE_SIZE - 1, -1, -1))
    past = await (await client.get(url, params={"run": str(rid), "page": "50"})).text()
    assert games_on(past) == games_on(last)
    # filtered: the games it won, a page of them
    won = [i for i, p in enumerate(term["places"]) if p == 1]
    page = await (await client.get(url, params={"run": str(rid), "result": "won"})).text()
    assert games_on(page) == won[::-1][:PAGE_SIZE]
    assert f"({len(won)} in all)" in page or len(won) <= PAGE_SIZE

    api = f"/api/competitions/{cid}/bots/{bot}"
    whole = await (await client.get(api, params={"run": str(rid)})).json()
    assert [g["index"] for g in whole["games"]] == list(range(GAMES))  # without ?page=: every game, as before
    paged = await client.get(api, params={"run": str(rid), "page": "2", "per_page": "10"})
    body = await paged.json()
    assert [g["index"] for g in body["games"]] == list(range(10, 20))  # schedule order, as the games API
    assert paged.headers["X-Total-Count"] == str(GAMES)
    assert 'rel="next"' in paged.headers["Link"] and 'rel="prev"' in paged.headers["Link"]
    assert {k: v for k, v in body.items() if k != "games"} == {k: v for k, v in whole.items() if k != "games"}
    refused = await client.get(api, params={"run": str(rid), "per_page": "0"})
    assert refused.status == 400 and "per_page" in json.dumps(await refused.json())


async def test_the_admins_teams_a_page_at_a_time_with_their_versions(
    service: Service, db_path: Path, admin_token: str
) -> None:
    term = write_term(db_path)
    client = await service()
    cid = term["cid"]
    r = await client.post(
        "/admin/login",
        data={"token": admin_token},
        allow_redirects=False,
        headers={"Origin": str(client.make_url(""))},
    )
    assert r.status == 303, await r.text()
    teams = term["teams"]

    def listed(html: str) -> list[str]:
        return re.findall(r'<tr data-team="([^"]+)">', html)

    first = await (await client.get(f"/admin/c/{cid}")).text()
    assert listed(first) == [t.name for t in teams[:TEAMS_PAGE_SIZE]]
    assert f"page 1 of 2 ({TEAMS} in all)" in first
    row = first[first.index('<tr data-team="t000">') :]
    row = row[: row.index("</tr>")]
    assert f't000 v{VERSIONS}: <span class="status">active</span>' in row  # its entry in the ladder
    assert f'<td class="l">v{VERSIONS}</td>' in row  # its version in play
    assert f"v{VERSIONS} url" in row and f"<td>{VERSIONS}</td>" in row  # its newest and its count
    idle = first[first.index(f'<tr data-team="t{LADDER_TEAMS:03d}">') :]
    assert '<td class="l">none</td>' in idle[: idle.index("</tr>")]  # a team that never submitted
    second = await (await client.get(f"/admin/c/{cid}", params={"page": "2"})).text()
    assert listed(second) == [t.name for t in teams[TEAMS_PAGE_SIZE:]]


async def test_the_head_to_head_shows_the_worst_opponents_and_every_one_on_asking(
    service: Service, db_path: Path
) -> None:
    term = write_term(db_path)
    client = await service()
    cid, rid, bot = term["cid"], term["run"], term["bot"]
    opponents = LADDER_TEAMS - 1
    data = await (await client.get(f"/api/competitions/{cid}/bots/{bot}", params={"run": str(rid)})).json()
    worst = [o["opponent"] for o in data["head_to_head"]]  # the JSON has every one, the worst first
    assert len(worst) == opponents > H2H_SHOWN

    def table(html: str, id: str = "head-to-head") -> list[str]:
        part = html[html.index(f'<table class="grid wrap h2h" id="{id}"') :]
        return re.findall(r'<tr data-opponent="([^"]+)">', part[: part.index("</table>")])

    page = await (await client.get(f"/c/{cid}/bots/{bot}", params={"run": str(rid)})).text()
    assert table(page) == worst[:H2H_SHOWN]
    assert f"The {H2H_SHOWN} opponents it fares worst against, of {opponents}." in page
    href = re.search(r'id="head-to-head-more">[^<]*<a href="([^"]+)">', page)
    assert href is not None and "h2h=all" in href.group(1)
    every = await (await client.get(f"/c/{cid}/bots/{bot}" + href.group(1).replace("&amp;", "&"))).text()
    assert table(every) == worst and 'id="head-to-head-more"' not in every

    # the team's own page: the same, its link to the bot page's every opponent
    r = await client.post(
        "/login",
        data={"token": term["token"]},
        allow_redirects=False,
        headers={"Origin": str(client.make_url(""))},
    )
    assert r.status == 303, await r.text()
    team = await (await client.get("/team")).text()
    assert table(team) == worst[:H2H_SHOWN]
    assert f"/c/{cid}/bots/{bot.replace(' ', '%20')}?run={rid}&amp;h2h=all#head-to-head" in team


async def test_a_teams_diagnostics_list_its_games_a_page_at_a_time_newest_first(
    service: Service, db_path: Path
) -> None:
    term = write_term(db_path)
    client = await service()
    cid, rid = term["cid"], term["run"]
    r = await client.post(
        "/login",
        data={"token": term["token"]},
        allow_redirects=False,
        headers={"Origin": str(client.make_url(""))},
    )
    assert r.status == 303, await r.text()
    tid = term["teams"][0].id
    whole = await client.get(
        f"/api/competitions/{cid}/teams/{tid}/diagnostics",
        params={"run": str(rid)},
        headers={"Authorization": f"Bearer {term['token']}"},
    )
    assert [g["game"] for g in (await whole.json())["games"]] == list(range(GAMES))  # the JSON: every one

    def games_on(html: str) -> list[int]:
        part = html[html.index('<table class="grid" id="games">') :]
        return [int(g) for g in re.findall(r"<tr><td>(\d+)</td>", part[: part.index("</table>")])]

    first = await (await client.get("/team/diagnostics", params={"run": str(rid)})).text()
    assert f"{GAMES} games" in first
    assert games_on(first) == list(range(GAMES - 1, GAMES - 1 - PAGE_SIZE, -1))
    assert (
        f"page 1 of 3 ({GAMES} in all)" in first and f"run={rid}" in first[first.index('id="games-pages"') :]
    )
    last = await (await client.get("/team/diagnostics", params={"run": str(rid), "page": "3"})).text()
    assert games_on(last) == list(range(GAMES - 2 * PAGE_SIZE - 1, -1, -1))
