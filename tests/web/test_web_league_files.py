"""League files an admin sends through the web (issue 24, item 7): one
nested 10,000 levels deep is a 422 naming the problem, not a 500; a house
URL bot is under the address policy of the teams' URLs
(``referee serve --house-urls-anywhere`` lifts it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from referee.service.runs import decode_league
from referee.service.store import ServiceDB
from tests.support.api import auth, error_of, play_run
from tests.support.web import league_text

Service = Callable[..., Awaitable[Any]]

DEEP = "[tournament]\nseed = " + "[" * 10_000 + "]" * 10_000 + "\n"


async def test_a_league_nested_10000_deep_is_a_422_naming_the_problem(
    service: Service, admin_token: str
) -> None:
    """Attack: tomllib's RecursionError was a 500 (and a traceback in the log)."""
    client = await service()
    r = await client.post(
        "/api/competitions", json={"name": "deep", "league": DEEP}, headers=auth(admin_token)
    )
    err = await error_of(r, 422)
    assert err["field"] == "league" and "nested too deeply" in err["error"], err
    # the admin's form: its page again, with the error
    origin = {"Origin": str(client.make_url("")).rstrip("/")}
    r = await client.post("/admin/login", data={"token": admin_token}, headers=origin, allow_redirects=False)
    assert r.status == 303
    page = await (await client.get("/admin")).text()
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = await client.post(
        "/admin/competitions",
        data={"csrf": csrf, "name": "deep", "league": DEEP},
        headers=origin,
        allow_redirects=False,
    )
    assert r.status == 422 and "nested too deeply" in await r.text()
    # nothing was made
    assert await (await client.get("/api/competitions")).json() == []
    # and a good league still is
    r = await client.post(
        "/api/competitions", json={"name": "fine", "league": league_text()}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()


# ------------------------------------------------------------ house URL bots


def _house_league(house: dict[str, str], extra: str = "") -> str:
    return league_text(house=house) + extra


async def test_a_house_url_bot_on_loopback_or_a_private_network_is_refused_by_default(
    service: Service, admin_token: str
) -> None:
    """Attack: a league file's house URL bots skipped the address policy
    every team's URL is under: an admin's league (or a stolen admin token)
    reached this server's loopback services, the cloud's metadata address,
    the private network. Now each is admitted as a team's URL would be, and
    the refusal names the bot, the address and the flag."""
    client = await service(bot_policy=None)  # the server's default: public addresses only
    for url, what in (
        ("http://127.0.0.1:8001", "127.0.0.1 is a loopback address"),
        ("http://10.1.2.3:8001", "10.1.2.3 is a private address"),
        ("http://169.254.169.254", "169.254.169.254 is a link-local address (the cloud metadata"),
        ("http://[::ffff:127.0.0.1]:8001", "127.0.0.1 is a loopback address"),
        ("http://localhost:8001", "localhost resolves to"),
    ):
        r = await client.post(
            "/api/competitions",
            json={"name": "house", "league": _house_league({"inner": url})},
            headers=auth(admin_token),
        )
        err = await error_of(r, 422)
        assert err["field"] == "league", err
        assert f"house bot 'inner' at {url!r} is refused: {what}" in err["error"], err
        assert "--house-urls-anywhere" in err["error"] and "--bot-networks" in err["error"]
    # an address the league file pins itself is checked as it is
    pinned = _house_league({"inner": "http://203.0.113.5:8001"}).replace(
        'url = "http://203.0.113.5:8001"', 'url = "http://203.0.113.5:8001"\naddress = "127.0.0.1"'
    )
    err = await error_of(
        await client.post(
            "/api/competitions", json={"name": "house", "league": pinned}, headers=auth(admin_token)
        ),
        422,
    )
    assert (
        "house bot 'inner' at 'http://203.0.113.5:8001' is refused: 127.0.0.1 is a loopback address"
        in err["error"]
    ), err
    assert await (await client.get("/api/competitions")).json() == []


async def test_house_urls_anywhere_lets_the_operator_mean_it(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """``referee serve --house-urls-anywhere``: two house bots on loopback
    play a run under the default policy."""
    client = await service(bot_policy=None, house_urls_anywhere=True)
    league = _house_league({"house-greedy": bot_urls["greedy"], "house-random": bot_urls["random"]})
    r = await client.post(
        "/api/competitions", json={"name": "house", "league": league}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()
    cid = (await r.json())["id"]
    data = await play_run(client, cid, admin_token)
    assert {s["bot"] for s in data["standings"]} == {"house-greedy", "house-random"}


async def test_a_stored_league_whose_house_bot_the_policy_refuses_does_not_start(
    service: Service, admin_token: str, db_path: Path, bot_urls: dict[str, str]
) -> None:
    """A competition stored before (or the policy narrowed since): its run
    and its ladder refuse to start, saying which house bot and why."""
    db = ServiceDB(db_path)
    try:
        cid = db.add_competition(
            "old", _house_league({"house-greedy": bot_urls["greedy"], "house-random": bot_urls["random"]})
        ).id
    finally:
        db.close()
    client = await service(bot_policy=None)
    err = await error_of(await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token)), 409)
    assert (
        err["error"].startswith(
            f"cannot start: house bot 'house-greedy' at {bot_urls['greedy']!r} is refused: "
            "127.0.0.1 is a loopback address"
        )
        and "--house-urls-anywhere" in err["error"]
    ), err
    err = await error_of(await client.post(f"/api/competitions/{cid}/open", headers=auth(admin_token)), 409)
    assert (
        err["error"].startswith("cannot open: house bot 'house-greedy' at ")
        and "--house-urls-anywhere" in err["error"]
    ), err
    assert (await (await client.get(f"/api/competitions/{cid}")).json())["run"] is None


async def test_a_house_url_bot_is_pinned_to_the_address_admitted(
    service: Service, admin_token: str, db_path: Path, bot_urls: dict[str, str]
) -> None:
    """Its host resolved once when the run starts, the run connects to that
    address whatever the name resolves to later (as a team's URL)."""
    client = await service()  # 127.0.0.0/8 allowed
    by_name = bot_urls["greedy"].replace("127.0.0.1", "localhost")
    league = _house_league({"house-greedy": by_name, "house-random": bot_urls["random"]})
    r = await client.post(
        "/api/competitions", json={"name": "house", "league": league}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()
    cid = (await r.json())["id"]
    data = await play_run(client, cid, admin_token)
    db = ServiceDB(db_path)
    try:
        run = db.run(data["run"]["id"])
    finally:
        db.close()
    assert run is not None
    bots = {b.name: b for b in decode_league(run.league_json).bots}
    assert bots["house-greedy"].url == by_name and bots["house-greedy"].address in ("127.0.0.1", "::1")
    assert bots["house-random"].address == "127.0.0.1"


def test_serve_has_the_house_urls_anywhere_flag() -> None:
    from click.testing import CliRunner

    from referee.cli import main

    r = CliRunner().invoke(main, ["serve", "--help"])
    assert r.exit_code == 0 and "--house-urls-anywhere" in r.output
