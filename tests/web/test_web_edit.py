"""A competition can be changed, and the teacher sees what a team sees
(issue 25, items 4 and 6), through the real service over HTTP: the league
file edited through the API and the admin's form (a bad one is a 422 naming
its line, and nothing is stored), its versions listed with the runs that
played them; a team renamed, withdrawn, given a new token; the admin's pages
of a team (its submissions, report, build log, diagnostics), which a team's
token or session never reaches."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from referee.web.sessions import COOKIE
from tests.support.api import auth, error_of, new_competition, new_team, play_run, signed_in, submit
from tests.support.web import league_text

Service = Any


def bots_of(data: dict[str, Any]) -> set[str]:
    return {s["bot"] for s in data["standings"]}


async def team_session(client: Any, token: str) -> str:
    """Sign the team in from the form: its session cookie's value."""
    r = await client.post("/login", data={"token": token}, allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/team", await r.text()
    cookie = r.cookies[COOKIE].value
    assert cookie
    return str(cookie)


async def page_with(client: Any, path: str, cookie: str) -> Any:
    return await client.get(path, cookies={COOKIE: cookie}, allow_redirects=False)


# ------------------------------------------------------------------- league


async def test_the_league_edited_through_the_api_is_kept_as_versions_with_their_runs(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    assert (await submit(client, cid, tid, token, {"url": bot_urls["random"]}))["submission"][
        "status"
    ] == "accepted"
    first = await play_run(client, cid, admin_token)
    url = f"/api/competitions/{cid}/league"
    # a bad league: 422 naming the field and its line; nothing stored
    bad = league_text(house={"house-greedy": bot_urls["greedy"]}).replace("table_size = 2", "table_size = 9")
    err = await error_of(await client.put(url, json={"league": bad}, headers=auth(admin_token)), 422)
    assert err["field"] == "league" and "league:4:" in err["error"] and "table_size" in err["error"], err
    # a house bot named as a team is: refused too
    clash = league_text(house={"ada": bot_urls["greedy"]})
    err = await error_of(await client.put(url, json={"league": clash}, headers=auth(admin_token)), 422)
    assert "'ada'" in err["error"] and "team" in err["error"], err
    # a house URL outside the address policy: refused as at creation
    far = league_text(house={"far": "http://10.9.8.7:9"})
    err = await error_of(await client.put(url, json={"league": far}, headers=auth(admin_token)), 422)
    assert "far" in err["error"] and "--bot-networks" in err["error"], err
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM league_versions").fetchone()[0] == 1
    assert "move_ms = 2000" in db.execute("SELECT league_toml FROM competitions").fetchone()[0]
    # teams and strangers cannot edit or read it
    await error_of(await client.put(url, json={"league": bad}, headers=auth(token)), 403)
    await error_of(await client.get(url, headers=auth(token)), 403)
    await error_of(await client.put(url, json={"league": bad}), 401)
    # a good edit: version 2; the next run plays it
    edited = league_text(house={"house-greedy": bot_urls["greedy"]}).replace(
        "move_ms = 2000", "move_ms = 1500"
    )
    r = await client.put(url, json={"league": edited}, headers=auth(admin_token))
    assert r.status == 201, await r.text()
    made = await r.json()
    assert made["version"] == 2 and made["who"] == "admin (API)" and made["runs"] == []
    second = await play_run(client, cid, admin_token)
    assert second["run"]["id"] != first["run"]["id"]
    versions = await (await client.get(url, headers=auth(admin_token))).json()
    assert [v["version"] for v in versions] == [2, 1]
    assert [r["id"] for r in versions[0]["runs"]] == [second["run"]["id"]]
    assert [r["id"] for r in versions[1]["runs"]] == [first["run"]["id"]]
    assert "move_ms = 1500" in versions[0]["league"] and "move_ms = 2000" in versions[1]["league"]
    played = {
        rid: json.loads(lj)["timeouts"]["move_ms"]
        for rid, lj in db.execute("SELECT id, league_json FROM runs")
    }
    assert played == {first["run"]["id"]: 2000, second["run"]["id"]: 1500}


async def test_the_league_edited_from_the_admin_form(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    csrf = await signed_in(client, admin_token)
    await client.post("/admin/competitions", data={"csrf": csrf, "name": "class", "league": league_text()})
    page = html.unescape(await (await client.get("/admin/c/1")).text())
    assert "move_ms = 2000" in page and "A new version is for every run and final started after it" in page
    bad = league_text().replace("table_size = 2", "table_size = 9")
    r = await client.post("/admin/c/1/league", data={"csrf": csrf, "league": bad}, allow_redirects=False)
    page = html.unescape(await r.text())
    assert r.status == 422 and "league:4:" in page and "table_size" in page
    assert "table_size = 9" in page  # what was typed is kept
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM league_versions").fetchone()[0] == 1
    # no CSRF token, another site's page: refused
    good = league_text().replace("move_ms = 2000", "move_ms = 900")
    assert (await client.post("/admin/c/1/league", data={"league": good})).status == 403
    assert (
        await client.post(
            "/admin/c/1/league",
            data={"csrf": csrf, "league": good},
            headers={"Origin": "https://evil.example"},
        )
    ).status == 403
    r = await client.post("/admin/c/1/league", data={"csrf": csrf, "league": good}, allow_redirects=False)
    assert r.status == 303
    page = html.unescape(await (await client.get("/admin/c/1")).text())
    assert re.findall(r'<tr data-version="(\d+)">', page) == ["2", "1"]
    assert "admin (page)" in page and "at creation" in page
    assert db.execute("SELECT league_toml FROM competitions").fetchone()[0] == good


# -------------------------------------------------------------------- teams


async def test_a_renamed_team_keeps_its_id_token_and_history(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    await new_team(client, admin_token, cid, "bea")
    await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    first = await play_run(client, cid, admin_token)
    assert "ada" in bots_of(first)
    url = f"/api/competitions/{cid}/teams/{tid}"
    for name, words in (
        ("bea", "exists already"),
        ("house-greedy", "house bot"),
        ("", "name"),
        ("x" * 41, "too long"),
    ):
        err = await error_of(await client.patch(url, json={"name": name}, headers=auth(admin_token)), 422)
        assert words in err["error"], err
    await error_of(await client.patch(url, json={"name": "ada-2"}, headers=auth(token)), 403)
    r = await client.patch(url, json={"name": "ada-2"}, headers=auth(admin_token))
    assert r.status == 200 and (await r.json())["name"] == "ada-2" and (await r.json())["id"] == tid
    # the same token still works, and the team's bot plays under the new name
    own = await (await client.get(f"{url}/bot", headers=auth(token))).json()
    assert own["name"] == "ada-2" and own["bot"] is not None
    second = await play_run(client, cid, admin_token)
    assert "ada-2" in bots_of(second) and "ada" not in bots_of(second)
    page = await (await client.get(f"/c/{cid}")).text()
    assert "ada-2" in page
    # the run played before keeps its games, under the name it was played under
    old = await (await client.get(f"/api/competitions/{cid}?run={first['run']['id']}")).json()
    assert "ada" in bots_of(old) and old["games"] == first["games"] > 0
    # the admin's form renames too
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/teams/{tid}/rename", data={"csrf": csrf, "name": "bea"})
    assert r.status == 422 and "exists already" in html.unescape(await r.text())
    r = await client.post(
        f"/admin/c/{cid}/teams/{tid}/rename", data={"csrf": csrf, "name": "ada-3"}, allow_redirects=False
    )
    assert r.status == 303 and r.headers["Location"] == f"/admin/c/{cid}/teams/{tid}"
    assert ">ada-3</h1>" in await (await client.get(f"/admin/c/{cid}/teams/{tid}")).text()


async def test_a_withdrawn_team_stops_playing_and_its_token_stops(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["greedy"]})
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bea, bea_token = await new_team(client, admin_token, cid, "bea")
    await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})
    await submit(client, cid, bea, bea_token, {"url": bot_urls["greedy"], "note": "bea v1"})
    first = await play_run(client, cid, admin_token)
    assert {"ada", "bea"} <= bots_of(first)
    cookie = await team_session(client, bea_token)
    assert (await page_with(client, "/team", cookie)).status == 200
    await error_of(
        await client.post(f"/api/competitions/{cid}/teams/{bea}/withdraw", headers=auth(bea_token)), 403
    )
    r = await client.post(f"/api/competitions/{cid}/teams/{bea}/withdraw", headers=auth(admin_token))
    assert r.status == 200 and (await r.json())["withdrawn_at"] is not None
    # its token and its session stop at once
    await error_of(await client.get(f"/api/competitions/{cid}/teams/{bea}/bot", headers=auth(bea_token)), 401)
    await error_of(
        await client.put(
            f"/api/competitions/{cid}/teams/{bea}/bot",
            json={"url": bot_urls["greedy"]},
            headers=auth(bea_token),
        ),
        401,
    )
    assert (await page_with(client, "/team", cookie)).headers["Location"] == "/login"
    assert (await client.post("/login", data={"token": bea_token})).status == 401
    # a new token is refused for it; the next run plays without it
    await error_of(
        await client.post(f"/api/competitions/{cid}/teams/{bea}/token", headers=auth(admin_token)), 409
    )
    second = await play_run(client, cid, admin_token)
    assert "bea" not in bots_of(second) and "ada" in bots_of(second)
    # its history stays: the earlier run, and the admin's pages
    old = await (await client.get(f"/api/competitions/{cid}?run={first['run']['id']}")).json()
    assert "bea" in bots_of(old)
    games = await (await client.get(f"/api/competitions/{cid}/runs/{first['run']['id']}/games")).json()
    rows = games if isinstance(games, list) else games["games"]
    idx = next(g["index"] for g in rows if "bea" in g["seats"])
    assert (await client.get(f"/c/{cid}/runs/{first['run']['id']}/games/{idx}")).status == 200  # its replays
    listing = await (await client.get(f"/api/competitions/{cid}/teams", headers=auth(admin_token))).json()
    assert {t["name"]: t["withdrawn_at"] is not None for t in listing} == {"ada": False, "bea": True}
    csrf = await signed_in(client, admin_token)
    page = html.unescape(await (await client.get(f"/admin/c/{cid}/teams/{bea}")).text())
    assert 'id="withdrawn"' in page and "bea v1" in page
    assert "withdrawn" in html.unescape(await (await client.get(f"/admin/c/{cid}")).text())
    # the admin's form withdraws too
    r = await client.post(f"/admin/c/{cid}/teams/{ada}/withdraw", data={"csrf": csrf}, allow_redirects=False)
    assert r.status == 303
    await error_of(await client.get(f"/api/competitions/{cid}/teams/{ada}/bot", headers=auth(ada_token)), 401)


async def test_a_new_token_stops_the_old_one_and_its_sessions_at_once(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, old = await new_team(client, admin_token, cid, "ada")
    cookie = await team_session(client, old)
    await error_of(await client.post(f"/api/competitions/{cid}/teams/{tid}/token", headers=auth(old)), 403)
    r = await client.post(f"/api/competitions/{cid}/teams/{tid}/token", headers=auth(admin_token))
    assert r.status == 201 and r.headers["Cache-Control"] == "no-store"
    new = (await r.json())["token"]
    assert new and new != old
    await error_of(await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(old)), 401)
    assert (await page_with(client, "/team", cookie)).headers["Location"] == "/login"
    assert (await client.post("/login", data={"token": old})).status == 401
    assert (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(new))).status == 200
    fresh = await team_session(client, new)
    assert (await page_with(client, "/team", fresh)).status == 200
    # from the admin's page: shown once there, the previous one stops
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/teams/{tid}/token", data={"csrf": csrf})
    page = await r.text()
    assert r.status == 200 and r.headers["Cache-Control"] == "no-store"
    newest = re.search(r'<code id="token">([^<]+)</code>', page).group(1)  # type: ignore[union-attr]
    assert (await page_with(client, "/team", fresh)).headers["Location"] == "/login"
    await error_of(await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(new)), 401)
    assert (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(newest))).status == 200
    assert newest not in await (await client.get(f"/admin/c/{cid}/teams/{tid}")).text()


# ----------------------------------------------- the teacher sees what a team sees


async def test_the_admin_sees_a_teams_submissions_report_log_and_diagnostics(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["greedy"]})
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bea, bea_token = await new_team(client, admin_token, cid, "bea")
    good = await submit(client, cid, ada, ada_token, {"url": bot_urls["random"], "note": "first try"})
    refused = await submit(client, cid, ada, ada_token, {"url": "http://127.0.0.1:9"})
    assert good["submission"]["status"] == "accepted" and refused["submission"]["status"] == "refused"
    await play_run(client, cid, admin_token)
    base = f"/admin/c/{cid}/teams/{ada}"
    paths = [
        base,
        f"{base}/submissions/{good['submission']['id']}",
        f"{base}/submissions/{refused['submission']['id']}",
        f"{base}/diagnostics",
    ]
    # a team's token, a team's session, nobody: never these pages
    bea_cookie = await team_session(client, bea_token)
    ada_cookie = await team_session(client, ada_token)
    for path in paths:
        for kwargs in (
            {},
            {"headers": auth(ada_token)},
            {"headers": auth(bea_token)},
            {"cookies": {COOKIE: ada_cookie}},
            {"cookies": {COOKIE: bea_cookie}},
        ):
            r = await client.get(path, allow_redirects=False, **kwargs)
            assert r.status == 303 and r.headers["Location"] == "/admin/login", (path, kwargs, r.status)
            assert "first try" not in await r.text()
    # nor another team's data through the API
    for path in ("bot", "submissions", f"submissions/{good['submission']['id']}", "diagnostics"):
        await error_of(
            await client.get(f"/api/competitions/{cid}/teams/{ada}/{path}", headers=auth(bea_token)), 403
        )
    r = await page_with(client, f"/team/submissions/{good['submission']['id']}", bea_cookie)
    assert r.status == 404
    # the admin: every submission with its status and reason, the report, the diagnostics
    await signed_in(client, admin_token)
    page = html.unescape(await (await client.get(base)).text())
    assert "first try" in page and "refused" in page and refused["submission"]["reason"] in page
    assert 'id="versions"' in page  # its standing, as on the team's own page
    page = html.unescape(await (await client.get(paths[1])).text())
    assert 'id="report"' in page and "PASS" in page and f'href="{base}"' in page
    page = html.unescape(await (await client.get(paths[2])).text())
    assert refused["submission"]["reason"] in page
    page = html.unescape(await (await client.get(paths[3])).text())
    assert "Your bot in run" in page and 'id="latency"' in page and 'id="games"' in page
    # a submission of another team is not found under this team
    bea_sub = await submit(client, cid, bea, bea_token, {"url": bot_urls["greedy"]})
    r = await client.get(f"{base}/submissions/{bea_sub['submission']['id']}")
    assert r.status == 404


# ------------------------------------------------------------------- ladder


@pytest.mark.slow
async def test_an_open_ladder_takes_a_league_edit_and_a_withdrawn_team_leaves_it(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """The rule stated on the page: an open ladder plays a saved version from
    its next games (a new house bot enters, the new timeouts; issue 34); a withdrawn or renamed
    team's entry retires at once, its games kept; a renamed team's entry
    plays on under the name it came in with (issue 32: a rename is a label)."""
    from tests.support.ladder import LEAGUE, competition, ladder_dir, recorded, until

    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, bot_urls["greedy"])
    teams = {}
    for name in ("ada", "bo", "cy"):
        teams[name] = await new_team(client, admin_token, cid, name)
        await submit(client, cid, *teams[name], {"url": bot_urls["random"]})
    r = await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    await until(client, cid, lambda d: d["games"] >= 6)
    # an edit while it plays: a new house bot, a new timeout; the ladder takes both
    edited = LEAGUE.format(house=bot_urls["greedy"]).replace("move_ms = 2000", "move_ms = 1500") + (
        f'\n[[bots]]\nname = "house-2"\nurl = "{bot_urls["greedy"]}"\n'
    )
    r = await client.put(
        f"/api/competitions/{cid}/league", json={"league": edited}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()
    assert (await r.json())["notes"][0] == "the open ladder plays version 2 from its next games"
    # withdraw bo: its entry retires now; rename cy: its entry plays on (who it is, is its team's id);
    # the new house bot enters
    bo, bo_token = teams["bo"]
    assert (
        await client.post(f"/api/competitions/{cid}/teams/{bo}/withdraw", headers=auth(admin_token))
    ).status == 200
    cy, _ = teams["cy"]
    r = await client.patch(
        f"/api/competitions/{cid}/teams/{cy}", json={"name": "cyd"}, headers=auth(admin_token)
    )
    assert r.status == 200
    data = await until(
        client, cid, lambda d: {s["bot"] for s in d["standings"]} == {"house", "house-2", "ada v1", "cy v1"}
    )
    assert "bo v1" in {s["bot"] for s in data["retired"]}  # retired, its games kept
    mark = max(i for i, _, _ in recorded(ladder_dir(db_path, cid)))
    await until(client, cid, lambda d: d["games"] >= mark + 20)
    games = recorded(ladder_dir(db_path, cid))
    assert any("house-2" in seats for _, seats, _ in games)  # it plays
    # (a retired entry may still owe the rotations of a deal it was dealt into: some games on)
    later = [seats for i, seats, _ in games if i > mark + 10]
    assert later and all("bo v1" not in seats for seats in later)
    db = sqlite3.connect(db_path)
    ladder = json.loads(db.execute("SELECT league_json FROM runs WHERE kind = 'ladder'").fetchone()[0])
    assert ladder["timeouts"]["move_ms"] == 1500
    versions = await (await client.get(f"/api/competitions/{cid}/league", headers=auth(admin_token))).json()
    assert [v["version"] for v in versions] == [2, 1]
    assert [r["kind"] for r in versions[0]["runs"]] == ["ladder"] and versions[1]["runs"] == []
    await error_of(await client.get(f"/api/competitions/{cid}/teams/{bo}/bot", headers=auth(bo_token)), 401)
    r = await client.post(f"/api/competitions/{cid}/freeze", headers=auth(admin_token))
    assert r.status in (200, 202), await r.text()


async def test_a_withdrawn_team_leaves_the_board_before_any_run(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    for name in ("ada", "bea"):
        tid, token = await new_team(client, admin_token, cid, name)
        await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    assert bots_of(await (await client.get(f"/api/competitions/{cid}")).json()) == {"ada", "bea"}
    assert (
        await client.post(f"/api/competitions/{cid}/teams/{tid}/withdraw", headers=auth(admin_token))
    ).status == 200
    assert bots_of(await (await client.get(f"/api/competitions/{cid}")).json()) == {"ada"}


async def test_a_competition_from_before_versions_gets_its_league_as_version_one(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """A database of an older service has no versions: its league so far
    becomes version 1 at the first edit, with the runs played before."""
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    with sqlite3.connect(
        db_path
    ) as db:  # raw on purpose: no store function makes a database of before versions
        db.execute("DELETE FROM league_versions")
    first = await play_run(client, cid, admin_token)
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT league_version FROM runs").fetchone()[0] is None
    edited = league_text(house={"house-greedy": bot_urls["greedy"]}).replace("rounds = 1", "rounds = 2")
    r = await client.put(
        f"/api/competitions/{cid}/league", json={"league": edited}, headers=auth(admin_token)
    )
    assert r.status == 201 and (await r.json())["version"] == 2
    versions = await (await client.get(f"/api/competitions/{cid}/league", headers=auth(admin_token))).json()
    assert [(v["version"], v["who"], [r["id"] for r in v["runs"]]) for v in versions] == [
        (2, "admin (API)", []),
        (1, "at creation", [first["run"]["id"]]),
    ]
    assert "rounds = 1" in versions[1]["league"]
