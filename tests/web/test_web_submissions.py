"""Submissions that check themselves, a team's own page, and the security
rules of issue 14: each rule with the attack that it stops."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from referee.bots.netpolicy import AddressPolicy, host_addresses, parse_networks
from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from referee.web.sessions import COOKIE
from tests.support.api import (
    auth,
    csrf_of,
    error_of,
    login,
    new_competition,
    new_team,
    play_run,
    room_of,
    settled,
    submit,
)
from tests.support.web import LOOPBACK, league_text

Service = Any
Client = TestClient[web.Request, web.Application]


# ------------------------------------------------------------ URL bots


async def test_a_loopback_bot_is_refused_unless_the_admin_allows_it(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Issue 14: a team's URL at 127.0.0.1 reaches the server itself."""
    client = await service(bot_policy=AddressPolicy.for_service(), submissions_per_window=20)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    for url in (
        bot_urls["greedy"],
        bot_urls["greedy"].replace("127.0.0.1", "localhost"),
        "http://[::ffff:127.0.0.1]:80",
        "http://169.254.169.254",
        "http://0.0.0.0:80",
    ):
        refused = await submit(client, cid, tid, token, {"url": url})
        sub = refused["submission"]
        assert sub["status"] == "refused" and "is refused" in sub["reason"], (url, sub)
        assert refused["report"] is None  # refused before any request reached it
    with_lan = await service(bot_policy=LOOPBACK, submissions_per_window=20)
    accepted = await submit(with_lan, cid, tid, token, {"url": bot_urls["greedy"]})
    assert accepted["submission"]["status"] == "accepted"
    assert accepted["submission"]["address"] == "127.0.0.1"


async def test_the_service_itself_is_refused_even_inside_allowed_networks(
    service: Service, admin_token: str
) -> None:
    client = await service()
    port = client.port
    assert port is not None
    # the policy referee serve makes, listening where this test server listens
    client.app[ROOM].settings.bot_policy = AddressPolicy.for_service(
        parse_networks("127.0.0.0/8"), listen=[("127.0.0.1", port)]
    )
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    refused = await submit(client, cid, tid, token, {"url": f"http://127.0.0.1:{port}"})
    assert refused["submission"]["status"] == "refused"
    assert "where the service listens" in refused["submission"]["reason"]


async def test_an_address_of_this_server_is_refused(service: Service, admin_token: str) -> None:
    own = [a for a in host_addresses() if not a.is_loopback and a.version == 4]
    if not own:
        pytest.skip("this machine has no non-loopback IPv4 address")
    client = await service(bot_policy=AddressPolicy.for_service(parse_networks("0.0.0.0/0")))
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    refused = await submit(client, cid, tid, token, {"url": f"http://{own[0]}:8001"})
    assert "an address of this server" in refused["submission"]["reason"]


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://user:pw@bot.example.org:8001", "user"),
        ("http://bot.example.org:8001/?next=1", "query"),
        ("http://bot.example.org:8001/#x", "fragment"),
        ("ftp://bot.example.org", "http"),
        ("http://2130706433:80", ""),
    ],
)
async def test_a_team_url_with_userinfo_query_or_fragment_is_refused_at_once(
    service: Service, admin_token: str, db_path: Path, url: str, words: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    r = await client.put(f"/api/competitions/{cid}/teams/{tid}/bot", json={"url": url}, headers=auth(token))
    err = await error_of(r, 422)
    assert err["field"] == "url" and words in err["error"].lower()
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 0


async def test_a_refused_version_leaves_the_previous_one_in_play(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    first = await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    assert first["submission"]["status"] == "accepted"
    second = await submit(client, cid, tid, token, {"url": "http://127.0.0.1:9", "note": "v2"})
    assert second["submission"]["status"] == "refused"
    line = second["report"]["lines"][0]
    assert not line["ok"] and line["fix"]
    own = await (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(token))).json()
    assert own["playing"]["id"] == first["submission"]["id"]
    assert own["bot"]["id"] == second["submission"]["id"] and own["bot"]["status"] == "refused"
    listing = await (
        await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions", headers=auth(token))
    ).json()
    assert [s["status"] for s in listing] == ["refused", "accepted"]


async def test_a_bot_that_plays_illegal_moves_is_refused_with_the_turn(
    service: Service, admin_token: str
) -> None:
    """The scripted positions catch a bot that always answers index 99."""
    from aiohttp import web

    from tests.support.web import serve

    async def info(request: web.Request) -> web.Response:
        return web.json_response({"name": "bad", "version": "1", "author": "x", "apiversion": 1})

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    async def act(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"request_id": body["request_id"], "index": 99})

    app = web.Application()
    app.router.add_get("/", info)
    app.router.add_post("/start", ok)
    app.router.add_post("/end", ok)
    app.router.add_post("/act", act)
    runner, url = await serve(app)
    try:
        client = await service()
        cid = await new_competition(client, admin_token)
        tid, token = await new_team(client, admin_token, cid, "ada")
        refused = await submit(client, cid, tid, token, {"url": url})
    finally:
        await runner.cleanup()
    assert refused["submission"]["status"] == "refused"
    failing = [x for x in refused["report"]["lines"] if not x["ok"]]
    assert failing and all("illegal" in x["detail"] for x in failing if x["what"].startswith("/act"))


# ------------------------------------------------------------ private diagnostics


async def test_a_teams_report_is_its_own(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    bid, btoken = await new_team(client, admin_token, cid, "bea")
    refused = await submit(client, cid, tid, token, {"url": "http://127.0.0.1:9"})
    sid = refused["submission"]["id"]
    path = f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}"
    assert (await client.get(path, headers=auth(btoken))).status == 403
    assert (await client.get(path, headers=auth(admin_token))).status == 403
    assert (await client.get(path)).status == 401
    # bea's own path with ada's submission id: not found
    other = f"/api/competitions/{cid}/teams/{bid}/submissions/{sid}"
    assert (await client.get(other, headers=auth(btoken))).status == 404
    reason = refused["submission"]["reason"]
    for page in (
        "/",
        f"/c/{cid}",
        f"/c/{cid}/live",
        f"/api/competitions/{cid}",
        f"/api/competitions/{cid}/teams/{tid}/bot",
    ):
        r = await client.get(page, headers=auth(btoken) if "teams" in page else {})
        assert reason not in await r.text(), page


# ------------------------------------------------------------ the team's page


async def test_a_team_signs_in_with_a_form_and_submits_from_its_page(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    r = await client.post("/login", data={"token": "wrong"}, allow_redirects=False)
    assert r.status == 401 and "unknown token" in await r.text()
    assert (await client.get("/team", allow_redirects=False)).headers["Location"] == "/login"
    sid = await login(client, token)
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM sessions WHERE id_sha256 = ?", (sid,)).fetchone()[0] == 0
    page = await (await client.get("/team")).text()
    assert "ada" in page and "No version of your bot is in play" in page
    csrf = csrf_of(page)
    form = {"csrf": csrf, "kind": "url", "url": bot_urls["greedy"], "note": "first"}
    # a post without the CSRF token, or from another site's page, is refused
    for data, headers in (
        ({k: v for k, v in form.items() if k != "csrf"}, {}),
        ({**form, "csrf": "x" * 43}, {}),
        (form, {"Origin": "https://evil.example"}),
    ):
        from aiohttp import FormData

        body = FormData()
        for k, v in data.items():
            body.add_field(k, v)
        r = await client.post("/team/submit", data=body, headers=headers, allow_redirects=False)
        assert r.status in (403, 422), (data, headers, r.status)
    assert db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 0
    from aiohttp import FormData

    body = FormData()
    for k, v in form.items():
        body.add_field(k, v)
    r = await client.post("/team/submit", data=body, allow_redirects=False)
    assert r.status == 303, await r.text()
    detail = await settled(client, cid, tid, token, 1)
    assert detail["submission"]["status"] == "accepted"
    page = await (await client.get("/team")).text()
    assert "accepted" in page and "Version v1" in page
    report = await (await client.get("/team/submissions/1")).text()
    assert "PASS" in report and "validation games" in report
    # sign out: the session is gone
    r = await client.post("/logout", data={"csrf": csrf}, allow_redirects=False)
    assert r.status == 303
    client.session.cookie_jar.clear()
    client.session.cookie_jar.update_cookies({COOKIE: sid})
    assert (await client.get("/team", allow_redirects=False)).status == 303


# ------------------------------------------------------------ uploads


async def test_an_upload_over_the_cap_is_refused_before_it_fills_the_disk(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service(max_upload=64 * 1024)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    url = f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source"
    # declared too big: refused before a byte is read
    r = await client.post(url, data=b"x" * (1 << 20), headers=auth(token))
    err = await error_of(r, 413)
    assert "too large" in err["error"]

    async def chunks() -> Any:  # no Content-Length: refused once the bytes pass the cap
        for _ in range(64):
            yield b"y" * 8192

    r = await client.post(url, data=chunks(), headers=auth(token))
    assert r.status == 413
    uploads = db_path.parent / "service-data" / "teams" / str(tid) / "uploads"
    assert not uploads.exists() or not any(uploads.iterdir())
    assert sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 0
    err = await error_of(await client.post(url.replace("source", "exe"), data=b"x", headers=auth(token)), 422)
    assert err["field"] == "kind"


# ------------------------------------------------------------ the service itself


async def test_ids_out_of_range_are_404(service: Service, admin_token: str) -> None:
    client = await service()
    for path in (
        "/api/competitions/99999999999999999999",
        "/api/competitions/-1",
        "/api/competitions/9223372036854775808/runs",
        "/c/99999999999999999999999",
        "/api/competitions/1/teams/99999999999999999999/bot",
    ):
        r = await client.get(path, headers=auth(admin_token))
        assert r.status == 404, (path, r.status)


async def test_a_deeply_nested_body_is_422(service: Service, admin_token: str) -> None:
    client = await service()
    body = b'{"name": "x", "league": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = await client.post(
        "/api/competitions", data=body, headers={**auth(admin_token), "Content-Type": "application/json"}
    )
    assert r.status in (413, 422)
    client2 = await service(max_body=1 << 20)
    r = await client2.post(
        "/api/competitions", data=body, headers={**auth(admin_token), "Content-Type": "application/json"}
    )
    await error_of(r, 422)  # refused by type at the first array: never a 500


async def test_a_league_sent_through_the_web_cannot_start_commands(
    service: Service, admin_token: str
) -> None:
    client = await service()
    for bot in (
        'command = ["python", "-c", "import os; os.system(\'id\')", "{port}"]',
        'url = "unix:/run/docker.sock"',
    ):
        text = league_text() + f'[[bots]]\nname = "house"\n{bot}\n'
        r = await client.post(
            "/api/competitions", json={"name": "c", "league": text}, headers=auth(admin_token)
        )
        err = await error_of(r, 422)
        assert "--allow-house-commands" in err["error"]
    client2 = await service(allow_house_commands=True)
    text = (
        league_text()
        + '[[bots]]\nname = "house"\ncommand = ["python", "-m", "sample_bots.greedy", "--port", "{port}"]\n'
    )
    r = await client2.post("/api/competitions", json={"name": "c", "league": text}, headers=auth(admin_token))
    assert r.status == 201


async def test_the_database_and_data_are_the_services_own(service: Service, db_path: Path) -> None:
    await service()
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(db_path.parent / "service-data").st_mode) == 0o700


@pytest.mark.slow
async def test_a_secret_is_stored_once(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """Not in the run's league record, not in the tournament database."""
    client = await service()
    cid = await new_competition(client, admin_token, house={"house": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    accepted = await submit(client, cid, tid, token, {"url": bot_urls["signed"], "secret": "s3cret"})
    assert accepted["submission"]["status"] == "accepted", accepted
    await play_run(client, cid, admin_token)
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM submissions WHERE secret = 's3cret'").fetchone()[0] == 1
    (league_json,) = db.execute("SELECT league_json FROM runs").fetchone()
    assert "s3cret" not in league_json
    for path in (db_path.parent / "service-data").rglob("*.sqlite"):
        assert b"s3cret" not in path.read_bytes(), path


# ------------------------------------------------------------ diagnostics


async def test_a_team_sees_its_faults_with_their_requests_and_nobody_else_does(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    from tests.support.programs.zoo import serve as serve_zoo
    from tests.support.programs.zoo import zoo_app

    client = await service()
    cid = await new_competition(client, admin_token, house={"house": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    bid, btoken = await new_team(client, admin_token, cid, "bea")
    async with serve_zoo(zoo_app("illegal", after=2, name="ada-bot")) as bad:
        db = ServiceDB(db_path)
        try:  # admitted earlier; it went wrong since
            db.add_submission(tid, kind="url", url=bad, image=None, secret=None, note="", status="accepted")
            db.add_submission(
                bid, kind="url", url=bot_urls["random"], image=None, secret=None, note="", status="accepted"
            )
        finally:
            db.close()
        await play_run(client, cid, admin_token)
    path = f"/api/competitions/{cid}/teams/{tid}/diagnostics"
    r = await client.get(path, headers=auth(token))
    assert r.status == 200, await r.text()
    diag = await r.json()
    assert diag["bot"] == "ada" and diag["fault_count"] >= 3 and diag["games"]
    fault = diag["faults"][0]
    assert fault["kind"] == "illegal" and fault["verified"]
    request = fault["request"]
    assert request["seat"] == fault["seat"] and request["turn"] == fault["turn"] and request["legal"]
    assert sum(diag["histogram"]) == diag["latency"]["count"] > 0
    for who in (btoken, admin_token):
        assert (await client.get(path, headers=auth(who))).status == 403
    assert (await client.get(path)).status == 401
    # the page, signed in
    await login(client, token)
    page = await (await client.get("/team/diagnostics")).text()
    assert (
        "illegal" in page and "the request that caused it" in page.lower() and "replay from your seat" in page
    )
    # public pages show none of it
    for public in (f"/c/{cid}", f"/api/competitions/{cid}", f"/c/{cid}/bots/ada"):
        assert fault["detail"] not in await (await client.get(public)).text(), public


# ------------------------------------------------------------ fair play


async def test_a_deal_is_public_only_once_all_its_rotations_are_played(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """A URL bot could fetch the finished rotation of a deal it is about to
    be dealt, every hidden card in it."""
    from tests.support.programs.zoo import serve as serve_zoo
    from tests.support.programs.zoo import zoo_app

    client = await service()
    hidden = public = 0
    async with serve_zoo(zoo_app("late", late_s=0.03, name="slow")) as slow:  # games of a second or more
        cid = await new_competition(
            client, admin_token, rounds=6, concurrency=1, house={"g": bot_urls["greedy"], "slow": slow}
        )
        r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token))
        rid = (await r.json())["id"]

        async def a_game_played() -> bool:
            return bool(await (await client.get(f"/api/competitions/{cid}/runs/{rid}/games")).json())

        async with asyncio.timeout(120):  # a bound for a broken test
            await room_of(client).until(a_game_played)
        await client.post(f"/api/competitions/{cid}/runs/{rid}/stop", headers=auth(admin_token))
    games = await (await client.get(f"/api/competitions/{cid}/runs/{rid}/games")).json()
    assert games
    deals: dict[tuple[int, int], int] = {}
    for g in games:
        deals[(g["round"], g["meeting"])] = deals.get((g["round"], g["meeting"]), 0) + 1
    for g in games:
        r = await client.get(f"/api/competitions/{cid}/runs/{rid}/games/{g['index']}")
        if deals[(g["round"], g["meeting"])] < 2:
            err = await error_of(r, 403)
            assert "not public yet" in err["error"]
            page = await client.get(f"/c/{cid}/runs/{rid}/games/{g['index']}")
            assert page.status == 403
            hidden += 1
        else:
            assert r.status == 200
            public += 1
    assert hidden + public == len(games) and hidden >= 1  # game 0 alone: its second rotation was cut


async def test_a_pinned_address_is_checked_again_when_a_run_starts(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """The admin narrowed --bot-networks after the bot was admitted: it does not play."""
    client = await service()
    cid = await new_competition(client, admin_token, house={"g": bot_urls["greedy"], "r": bot_urls["random"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    accepted = await submit(client, cid, tid, token, {"url": bot_urls["random"]})
    assert accepted["submission"]["address"] == "127.0.0.1"
    client.app[ROOM].settings.bot_policy = AddressPolicy()  # loopback no longer allowed
    client.app[ROOM].settings.house_urls_anywhere = True  # but the house bots on loopback still are
    data = await play_run(client, cid, admin_token)
    assert {s["bot"] for s in data["standings"]} == {"g", "r"}
