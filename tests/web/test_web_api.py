"""The service's JSON API: roles and tokens, validation, limits, a tournament
run through the API with URL bots on loopback, a restart."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB, hash_token
from tests.support.api import auth, error_of, new_competition, new_team, play_run, read_events, submit
from tests.support.web import league_text

Service = Callable[..., Awaitable[Any]]


def stored(db_path: Path, table: str) -> int:
    db = sqlite3.connect(db_path)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


# ------------------------------------------------------------------ tokens


def test_admin_token_is_shown_once_and_stored_hashed(db_path: Path) -> None:
    db = ServiceDB(db_path)
    token = db.ensure_admin_token()
    assert token is not None and len(token) >= 40
    assert db.ensure_admin_token() is None  # never again
    assert db.is_admin(token) and not db.is_admin(token + "x") and not db.is_admin("")
    db.close()
    raw = b"".join(p.read_bytes() for p in db_path.parent.glob("service.sqlite*"))
    assert token.encode() not in raw
    assert hash_token(token).encode() in raw
    db = ServiceDB(db_path)
    new = db.ensure_admin_token(reset=True)
    assert new is not None and db.is_admin(new) and not db.is_admin(token)
    db.close()


async def test_admin_endpoints_need_the_admin_token(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    body = {"name": "x", "league": league_text()}
    r = await client.post("/api/competitions", json=body)
    err = await error_of(r, 401)
    assert "Bearer" in err["error"] and r.headers["WWW-Authenticate"].startswith("Bearer")
    await error_of(await client.post("/api/competitions", json=body, headers=auth("nope")), 401)
    await error_of(
        await client.post("/api/competitions", json=body, headers={"Authorization": admin_token}), 401
    )
    assert stored(db_path, "competitions") == 0
    cid = await new_competition(client, admin_token)
    _, team_token = await new_team(client, admin_token, cid, "ada")
    # A team token is known but is not the admin's: 403.
    err = await error_of(await client.post("/api/competitions", json=body, headers=auth(team_token)), 403)
    assert "admin" in err["error"]
    await error_of(
        await client.post(f"/api/competitions/{cid}/teams", json={"name": "b"}, headers=auth(team_token)), 403
    )
    await error_of(await client.post(f"/api/competitions/{cid}/runs", headers=auth(team_token)), 403)
    await error_of(await client.get(f"/api/competitions/{cid}/teams", headers=auth(team_token)), 403)
    await error_of(await client.get(f"/api/competitions/{cid}/teams"), 401)
    assert (
        stored(db_path, "competitions") == 1
        and stored(db_path, "teams") == 1
        and stored(db_path, "runs") == 0
    )


async def test_submissions_need_the_teams_own_token(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    grace, grace_token = await new_team(client, admin_token, cid, "grace")
    url = f"/api/competitions/{cid}/teams/{ada}/bot"
    sub = {"url": "http://127.0.0.1:8101"}
    await error_of(await client.put(url, json=sub), 401)
    await error_of(await client.put(url, json=sub, headers=auth("wrong-token")), 401)
    err = await error_of(await client.put(url, json=sub, headers=auth(grace_token)), 403)
    assert "another team" in err["error"]
    err = await error_of(await client.put(url, json=sub, headers=auth(admin_token)), 403)
    await error_of(await client.get(url, headers=auth(grace_token)), 403)
    await error_of(await client.get(url), 401)
    assert stored(db_path, "submissions") == 0
    # The right token: stored, and readable by that team only.
    r = await client.put(url, json={**sub, "secret": "s", "note": "v1"}, headers=auth(ada_token))
    assert r.status == 201, await r.text()
    r = await client.get(url, headers=auth(ada_token))
    own = await r.json()
    assert own["bot"]["url"] == "http://127.0.0.1:8101" and own["bot"]["has_secret"] is True
    assert "s" not in (own["bot"].get("secret") or "")
    # A team of another competition is not found there.
    cid2 = await new_competition(client, admin_token, name="other")
    await error_of(
        await client.put(f"/api/competitions/{cid2}/teams/{ada}/bot", json=sub, headers=auth(ada_token)), 404
    )
    assert stored(db_path, "submissions") == 1
    assert grace  # (grace submitted nothing)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"", None, "empty"),
        (b"[1, 2]", None, "object"),
        (b'{"url": 8101}', "url", "str"),
        (b'{"url": "http://127.0.0.1:1", "secrt": "x"}', "secrt", "unknown field"),
        (b'{"url": "ftp://bot:21"}', "url", "http://"),
        (b'{"url": "http://127.0.0.1:99999"}', "url", "port"),
        (b'{"url": "http://a:1", "image": "bot:1"}', "image", "exactly one"),
        (b"{}", "url", "exactly one"),
        (b'{"url": "http://127.0.0.1:1", "secret": ""}', "secret", "secret"),
        (b'{"url": "http://127.0.0.1:1", "note": 5}', "note", "str"),
    ],
)
async def test_malformed_submissions_are_refused_with_the_field(
    service: Service, admin_token: str, db_path: Path, body: bytes, field: str | None, words: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    r = await client.put(
        f"/api/competitions/{cid}/teams/{tid}/bot",
        data=body,
        headers={**auth(token), "Content-Type": "application/json"},
    )
    err = await error_of(r, 422)
    assert err.get("field") == field, err
    assert words.lower() in err["error"].lower(), err
    assert stored(db_path, "submissions") == 0


async def test_image_submissions_depend_on_container_support(
    service: Service, admin_token: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import referee.web.validation as web_app

    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    url = f"/api/competitions/{cid}/teams/{tid}/bot"
    monkeypatch.setattr(web_app, "containers_enabled", lambda: False)
    admin = auth(admin_token)
    err = await error_of(await client.put(url, json={"image": "ada-bot:1"}, headers=admin), 422)
    assert err["field"] == "image" and "not enabled" in err["error"]
    assert stored(db_path, "submissions") == 0
    monkeypatch.setattr(web_app, "containers_enabled", lambda: True)
    err = await error_of(await client.put(url, json={"image": "Bad Image!"}, headers=admin), 422)
    assert err["field"] == "image"
    r = await client.put(url, json={"image": "ada-bot:1"}, headers=admin)
    assert r.status == 201 and (await r.json())["kind"] == "image"
    assert stored(db_path, "submissions") == 1


async def test_a_team_cannot_name_an_image_on_the_server(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Issue 14: an image on the server (another team's, the base image) is
    the admin's to name; a team runs only what it uploaded."""
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    url = f"/api/competitions/{cid}/teams/{tid}/bot"
    for image in ("referee-base:local", "referee-team-2:v7", "greedy:latest"):
        err = await error_of(await client.put(url, json={"image": image}, headers=auth(token)), 403)
        assert "only images it uploaded" in err["error"] and err["field"] == "image"
    assert stored(db_path, "submissions") == 0


async def test_oversized_bodies_get_413(service: Service, admin_token: str, db_path: Path) -> None:
    client = await service(max_body=4096)
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    url = f"/api/competitions/{cid}/teams/{tid}/bot"
    big = json.dumps({"url": "http://127.0.0.1:1", "note": "x" * 10_000}).encode()
    err = await error_of(await client.put(url, data=big, headers=auth(token)), 413)
    assert "too large" in err["error"] and "4096" in err["error"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    err = await error_of(await client.put(url, data=chunks(), headers=auth(token)), 413)
    big_league = {"name": "huge", "league": "# " + "x" * 10_000}
    await error_of(await client.post("/api/competitions", json=big_league, headers=auth(admin_token)), 413)
    assert stored(db_path, "submissions") == 0 and stored(db_path, "competitions") == 1


async def test_submissions_are_rate_limited_per_team(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service(submissions_per_window=3, window_s=60)
    cid = await new_competition(client, admin_token)
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    grace, grace_token = await new_team(client, admin_token, cid, "grace")
    for i in range(3):
        r = await client.put(
            f"/api/competitions/{cid}/teams/{ada}/bot",
            json={"url": f"http://127.0.0.1:{8000 + i}"},
            headers=auth(ada_token),
        )
        assert r.status == 201
    r = await client.put(
        f"/api/competitions/{cid}/teams/{ada}/bot",
        json={"url": "http://127.0.0.1:9000"},
        headers=auth(ada_token),
    )
    err = await error_of(r, 429)
    assert "too many submissions" in err["error"] and int(r.headers["Retry-After"]) >= 1
    assert stored(db_path, "submissions") == 3
    # Another team is not limited by ada's submissions.
    r = await client.put(
        f"/api/competitions/{cid}/teams/{grace}/bot",
        json={"url": "http://127.0.0.1:9001"},
        headers=auth(grace_token),
    )
    assert r.status == 201
    # The latest submission is the bot.
    r = await client.get(f"/api/competitions/{cid}/teams/{ada}/bot", headers=auth(ada_token))
    assert (await r.json())["bot"]["url"] == "http://127.0.0.1:8002"


async def test_invalid_competitions_and_teams_get_422(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    bad = league_text().replace("table_size = 2", "table_size = 9")
    err = await error_of(
        await client.post("/api/competitions", json={"name": "c", "league": bad}, headers=auth(admin_token)),
        422,
    )
    assert err["field"] == "league" and "table_size" in err["error"] and ":4:" in err["error"]
    err = await error_of(
        await client.post(
            "/api/competitions", json={"name": "c", "league": "[tournament\n"}, headers=auth(admin_token)
        ),
        422,
    )
    assert err["field"] == "league" and "TOML" in err["error"]
    err = await error_of(
        await client.post(
            "/api/competitions", json={"name": "", "league": league_text()}, headers=auth(admin_token)
        ),
        422,
    )
    assert err["field"] == "name"
    err = await error_of(
        await client.post("/api/competitions", json={"league": league_text()}, headers=auth(admin_token)), 422
    )
    assert err["field"] == "name" and "required" in err["error"]
    assert stored(db_path, "competitions") == 0
    cid = await new_competition(client, admin_token, house={"house": "http://127.0.0.1:1"})
    for name, words in (
        ("house", "house bot"),
        ("a/b", "/"),
        ("x" * 41, "too long"),
        ("a\nb", "control"),
        ("__team_slot_1__", "reserved"),
    ):
        err = await error_of(
            await client.post(
                f"/api/competitions/{cid}/teams", json={"name": name}, headers=auth(admin_token)
            ),
            422,
        )
        assert err["field"] == "name" and words in err["error"], err
    await new_team(client, admin_token, cid, "ada")
    await error_of(
        await client.post(f"/api/competitions/{cid}/teams", json={"name": "ada"}, headers=auth(admin_token)),
        422,
    )
    assert stored(db_path, "teams") == 1
    await error_of(await client.get("/api/competitions/999"), 404)
    r = await client.get("/c/999")
    assert r.status == 404 and "text/html" in r.content_type


async def test_names_cannot_inject_html(service: Service, admin_token: str, db_path: Path) -> None:
    client = await service()
    evil = '<script>alert("x")</script>'
    cid = await new_competition(client, admin_token, name=f"<b>{evil}</b>")
    team = '<img src=x onerror="alert(1)">&'
    tid, token = await new_team(client, admin_token, cid, team)
    db = ServiceDB(db_path)
    try:  # an admitted bot (its check is not what this test is about)
        db.add_submission(
            tid, kind="url", url="http://127.0.0.1:1", image=None, secret=None, note="", status="accepted"
        )
    finally:
        db.close()
    for path in ("/", f"/c/{cid}", f"/c/{cid}/live"):
        r = await client.get(path)
        text = await r.text()
        assert r.status == 200
        assert "<script>alert" not in text, path
        if not path.endswith("/live"):
            assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text, path
        if path != "/":
            assert "<img src=x" not in text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in text
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    from urllib.parse import quote

    r = await client.get(f"/c/{cid}/bots/{quote(team, safe='')}")
    text = await r.text()
    assert r.status == 200 and "<img src=x" not in text and "&lt;img src=x" in text


# ------------------------------------------------------------- tournaments


async def run_league(client: Any, admin: str, bot_urls: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """A competition with a house bot and two teams' URL bots (one signed),
    played through the API: its id and final data."""
    cid = await new_competition(client, admin, house={"house-greedy": bot_urls["greedy"]})
    for name, url, secret in (("ada", bot_urls["random"], None), ("grace", bot_urls["signed"], "s3cret")):
        tid, token = await new_team(client, admin, cid, name)
        sub: dict[str, Any] = {"url": url}
        if secret:
            sub["secret"] = secret
        detail = await submit(client, cid, tid, token, sub)
        assert detail["submission"]["status"] == "accepted", detail
    events = await client.get(f"/api/competitions/{cid}/events")
    assert events.status == 200 and events.headers["Content-Type"].startswith("text/event-stream")
    first = await read_events(events, lambda d: True)
    assert first[0]["run"] is None and {s["bot"] for s in first[0]["standings"]} == {
        "house-greedy",
        "ada",
        "grace",
    }
    r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin))
    assert r.status == 202, await r.text()
    run = await r.json()
    assert run["total_games"] == 6 and run["status"] == "running"
    # A second start while it runs: 409.
    await error_of(await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin)), 409)
    seen = await read_events(events, lambda d: d["run"] is not None and d["run"]["status"] != "running")
    events.close()
    final = seen[-1]
    assert final["run"]["status"] == "finished", final["run"]
    assert final["games"] == 6
    # Live: updates came while games were being recorded, not only at the end.
    progress = sorted({d["games"] for d in seen if d["run"] is not None})
    assert len(progress) >= 2, progress
    return cid, final


@pytest.mark.slow
async def test_a_tournament_through_the_api_and_a_restart(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid, final = await run_league(client, admin_token, bot_urls)
    standings = final["standings"]
    assert [s["rank"] for s in standings] == [1, 2, 3]
    assert {s["bot"] for s in standings} == {"house-greedy", "ada", "grace"}
    for s in standings:
        assert s["games"] == 4 and abs(s["score"] - (s["mu"] - 3 * s["sigma"])) < 1e-3
        assert s["faults"] == {} and s["latency_p50_ms"] is not None
    rid = final["run"]["id"]

    r = await client.get(f"/api/competitions/{cid}/bots/grace")
    bot = await r.json()
    assert bot["team"] and len(bot["history"]) == 4 and len(bot["games"]) == 4
    assert bot["standing"]["bot"] == "grace"
    r = await client.get(f"/api/competitions/{cid}/runs/{rid}/games")
    games = await r.json()
    assert [g["index"] for g in games] == list(range(6)) and all(g["has_replay"] for g in games)
    r = await client.get(f"/api/competitions/{cid}/runs/{rid}/games/0")
    replay = await r.json()
    assert r.status == 200, replay
    assert replay["names"] == games[0]["seats"] and len(replay["frames"]) > 10
    step = replay["frames"][5]
    assert {"full", "views", "events", "label"} <= set(step)
    seat0 = step["views"][0]
    assert seat0["you"]["hand"] == step["full"]["hands"][0]
    assert "hand" not in seat0["players"][1]  # another seat's hand is a count
    for path in (f"/c/{cid}", f"/c/{cid}/bots/grace", f"/c/{cid}/runs/{rid}/games/0", "/"):
        r = await client.get(path)
        assert r.status == 200, path
    r = await client.get(f"/c/{cid}/bots/grace")
    assert "<svg" in await r.text() and "rating-chart" in await r.text()
    r = await client.get(f"/api/competitions/{cid}/teams", headers=auth(admin_token))
    teams = await r.json()
    assert [t["name"] for t in teams] == ["ada", "grace"] and teams[1]["bot"]["has_secret"]
    api = await (await client.get(f"/api/competitions/{cid}")).json()
    await client.close()

    # A new app on the same database: everything is there.
    client2 = await service()
    again = await (await client2.get(f"/api/competitions/{cid}")).json()
    assert again["standings"] == api["standings"] and again["runs"] == api["runs"]
    assert again["teams"] == ["ada", "grace"]
    r = await client2.get(f"/api/competitions/{cid}/teams", headers=auth(admin_token))
    assert await r.json() == teams
    r = await client2.get(f"/api/competitions/{cid}/runs/{rid}/games/3")
    assert r.status == 200
    listing = await (await client2.get("/api/competitions")).json()
    assert listing[0]["status"] == "finished" and listing[0]["games"] == 6
    # Tokens still work after the restart (only their hashes were stored).
    r = await client2.get(f"/api/competitions/{cid}/teams/{teams[0]['id']}/bot", headers=auth(admin_token))
    assert r.status == 403
    r = await client2.post(f"/api/competitions/{cid}/runs", json={"resume": True}, headers=auth(admin_token))
    err = await error_of(r, 409)
    assert "finished" in err["error"]


async def test_a_run_that_cannot_start_says_why(service: Service, admin_token: str, db_path: Path) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, table_size=3)
    tid, token = await new_team(client, admin_token, cid, "ada")
    refused = await submit(client, cid, tid, token, {"url": "http://127.0.0.1:1"})
    assert refused["submission"]["status"] == "refused" and "GET /" in refused["submission"]["reason"]
    err = await error_of(await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token)), 409)
    assert "no bots" in err["error"]  # a refused bot never enters the league
    err = await error_of(
        await client.post(f"/api/competitions/{cid}/runs", json={"resume": True}, headers=auth(admin_token)),
        409,
    )
    assert "nothing to resume" in err["error"]
    err = await error_of(
        await client.post(f"/api/competitions/{cid}/runs", json={"resume": "yes"}, headers=auth(admin_token)),
        422,
    )
    assert err["field"] == "resume"
    assert stored(db_path, "runs") == 0


async def test_an_unreachable_bot_is_refused_and_costs_the_others_nothing(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Issue 14: an unreachable bot used to fail the whole run with its
    name; now its admission check refuses it, the team sees why, and the
    run plays everyone else."""
    client = await service()
    cid = await new_competition(client, admin_token, house={"house": bot_urls["greedy"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    bid, btoken = await new_team(client, admin_token, cid, "bea")
    refused = await submit(client, cid, tid, token, {"url": "http://127.0.0.1:9"})
    assert refused["submission"]["status"] == "refused"
    assert refused["report"]["lines"][0]["what"] == "GET /" and not refused["report"]["ok"]
    accepted = await submit(client, cid, bid, btoken, {"url": bot_urls["random"]})
    assert accepted["submission"]["status"] == "accepted", accepted
    assert all(line["ok"] for line in accepted["report"]["lines"])
    assert any("validation games" in line["what"] for line in accepted["report"]["lines"])
    data = await play_run(client, cid, admin_token)
    assert {s["bot"] for s in data["standings"]} == {"house", "bea"}


@pytest.mark.slow
async def test_a_run_stopped_by_a_restart_is_resumed(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    client = await service()
    cid = await new_competition(
        client, admin_token, rounds=4, concurrency=1, house={"g": bot_urls["greedy"], "r": bot_urls["random"]}
    )
    r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token))
    assert r.status == 202
    rid = (await r.json())["id"]
    for _ in range(400):
        data = await (await client.get(f"/api/competitions/{cid}")).json()
        if data["games"] >= 2:
            break
        await asyncio.sleep(0.02)
    assert data["run"]["status"] == "running" and 2 <= data["games"] < 8, data["games"]
    await client.close()  # the server stops: the run is interrupted, its games kept

    client = await service()
    data = await (await client.get(f"/api/competitions/{cid}")).json()
    kept = data["games"]
    assert data["run"]["status"] == "interrupted" and kept >= 2
    r = await client.post(f"/api/competitions/{cid}/runs", json={"resume": True}, headers=auth(admin_token))
    assert r.status == 202 and (await r.json())["id"] == rid
    for _ in range(600):
        data = await (await client.get(f"/api/competitions/{cid}")).json()
        if data["run"]["status"] != "running":
            break
        await asyncio.sleep(0.02)
    assert data["run"]["status"] == "finished" and data["games"] == 8
    games = await (await client.get(f"/api/competitions/{cid}/runs/{rid}/games")).json()
    assert [g["index"] for g in games] == list(range(8))
    assert [r["id"] for r in data["runs"]] == [rid]
