"""Issue 35, item 2: ``referee check`` agrees with the service.

A bot that passes the compliance check's scripted positions but picks up the
pile when it could play (illegal in real games) was passed by ``referee
check`` and refused by the service. The local check now plays the service's
validation games, with the competition's settings (a league file, or
fetched from the service with the team's token), and both refuse it for the
same reason; a good bot passes both. Real HTTP bots on loopback, the real
service on loopback, the real command in a thread of its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from referee.admission import AdmissionSettings
from referee.cli import main
from referee.cli.check import competition_api
from referee.web.app_state import ROOM
from tests.support.api import auth, new_competition, new_team
from tests.support.programs.zoo import serve as serve_zoo
from tests.support.programs.zoo import zoo_app

Service = Any

REFUSED = "the service would refuse this bot: "


async def referee(*args: str) -> Result:
    """``referee ARGS`` in a thread (it runs its own event loop), while this
    test's loop goes on serving the bots and the service it talks to."""
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


async def submitted(client: Any, cid: int, tid: int, token: str, url: str) -> dict[str, Any]:
    """Submit the URL bot and wait for its check: its status and reason, and its report."""
    r = await client.put(f"/api/competitions/{cid}/teams/{tid}/bot", json={"url": url}, headers=auth(token))
    assert r.status == 201, await r.text()
    sid = (await r.json())["id"]
    await client.app[ROOM].pipeline.wait_for(sid, timeout_s=200)
    r = await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token))
    return dict(await r.json())


def verdict(out: str) -> str | None:
    """The reason ``referee check`` printed for refusing the bot, if it did."""
    return next((line[len(REFUSED) :] for line in out.splitlines() if line.startswith(REFUSED)), None)


def the_reason(reason: str) -> str:
    """A refusal's reason up to its first fault's kind and detail (which turn
    of which game differs from one set of secret deals to another)."""
    what, _, faults = reason.partition(" fault(s) in ")
    first = faults.split(": ", 1)[1].split("; ")[0]  # "game 1, turn 9: illegal: ..." -> after the game
    return f"{what.rsplit(':', 1)[0]}: {first.split(': ', 1)[1]}"


async def test_check_and_the_service_refuse_an_illegal_pickup_alike_and_pass_a_good_bot(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, table_size=3)
    tid, token = await new_team(client, admin_token, cid, "ada")
    competition = str(client.make_url(f"/c/{cid}"))
    async with serve_zoo(zoo_app("pickup_high")) as picky, serve_zoo(zoo_app("good")) as good:
        # the service refuses the bot that picks up when it could play
        refused = await submitted(client, cid, tid, token, picky)
        assert refused["submission"]["status"] == "refused", refused
        reason = refused["submission"]["reason"]
        assert reason.startswith("validation games against house-greedy: ") and "may not pick up" in reason
        # and so does referee check, with the competition's settings, for the same reason
        local = await referee("check", picky, "--competition", competition, "--token", token)
        assert local.exit_code == 1, local.output
        assert "PASS  /act forced pick-up" in local.output  # the compliance check alone passed it
        said = verdict(local.output)
        assert said is not None, local.output
        assert (
            the_reason(said)
            == the_reason(reason)
            == (
                "validation games against house-greedy: illegal: "
                "you may not pick up while you have a legal play (must play if you can)"
            )
        )
        # a good bot: accepted by the service, passed by referee check (exit code 0, no verdict)
        accepted = await submitted(client, cid, tid, token, good)
        assert accepted["submission"]["status"] == "accepted", accepted
        local = await referee("check", good, "--competition", competition, "--token", token)
        assert local.exit_code == 0, local.output
        assert verdict(local.output) is None
        assert "PASS  validation games against house-greedy: 4 games, no fault" in local.output


async def test_a_league_file_gives_the_check_its_table_and_timeouts(tmp_path: Path) -> None:
    """``--league FILE``: the league's table size and timeouts (a 3-seat table
    here, the bot's replays name three players)."""
    from referee.replay import read as read_replay

    league = tmp_path / "league.toml"
    league.write_text('[tournament]\nname = "class"\ntable_size = 3\n\n[timeouts]\nmove_ms = 1500\n')
    async with serve_zoo(zoo_app("pickup_high")) as picky, serve_zoo(zoo_app("good")) as good:
        local = await referee("check", picky, "--league", str(league), "--log-dir", str(tmp_path / "bad"))
        assert local.exit_code == 1 and "may not pick up" in (verdict(local.output) or ""), local.output
        local = await referee("check", good, "--league", str(league), "--log-dir", str(tmp_path / "good"))
        assert local.exit_code == 0, local.output
    assert "(deadline 1500 ms)" in local.output
    replays = sorted((tmp_path / "good" / "games").iterdir())
    assert len(replays) == 4
    assert all(len(read_replay(r).header.names) == 3 for r in replays)


async def test_the_admission_settings_are_for_the_competitions_teams_only(
    service: Service, admin_token: str
) -> None:
    """``GET /api/competitions/{cid}/admission``: the team's own token (or the
    admin's); none is 401, an unknown one 401, another competition's team
    403; and it holds the league's settings and nothing of any team."""
    client = await service(validation_games=3, check_budget_s=90)
    cid = await new_competition(client, admin_token, table_size=3)
    other = await new_competition(client, admin_token, name="other")
    _, token = await new_team(client, admin_token, cid, "ada")
    await new_team(client, admin_token, cid, "bea")
    _, stranger = await new_team(client, admin_token, other, "cy")
    path = f"/api/competitions/{cid}/admission"
    r = await client.get(path)
    assert r.status == 401 and "missing token" in (await r.json())["error"]
    r = await client.get(path, headers=auth("not-a-token"))
    assert r.status == 401
    r = await client.get(path, headers=auth(stranger))
    assert r.status == 403 and "another competition" in (await r.json())["error"]
    for who in (token, admin_token):
        r = await client.get(path, headers=auth(who))
        assert r.status == 200, await r.text()
        body = await r.read()
        settings = msgspec.json.decode(body, type=AdmissionSettings)
        assert (settings.table_size, settings.games, settings.budget_s) == (3, 3, 90)
        assert settings.timeouts.move_ms == 2000  # the league's
        assert b"ada" not in body and b"bea" not in body and token.encode() not in body
    # referee check with a wrong token says so, and gives no verdict on the bot (exit code 2)
    local = await referee(
        "check", "http://127.0.0.1:9", "--competition", str(client.make_url(f"/c/{cid}")), "--token", stranger
    )
    assert local.exit_code == 2, local.output
    assert "answered HTTP 403" in local.output and "--token" in local.output


@pytest.mark.parametrize(
    ("url", "api"),
    [
        ("http://h:8080/c/3", "http://h:8080/api/competitions/3/admission"),
        ("https://h/class/c/12/rules", "https://h/class/api/competitions/12/admission"),
        ("http://h/api/competitions/7", "http://h/api/competitions/7/admission"),
    ],
)
def test_a_competitions_url_gives_its_admission_settings(url: str, api: str) -> None:
    assert competition_api(url) == api


def test_a_url_that_names_no_competition_is_refused() -> None:
    with pytest.raises(ValueError, match="competition's page"):
        competition_api("http://h:8080/team")
    r = CliRunner().invoke(
        main, ["check", "http://127.0.0.1:9", "--competition", "http://h/team", "--token", "t"]
    )
    assert r.exit_code == 2 and "--competition" in r.output
    r = CliRunner().invoke(main, ["check", "http://127.0.0.1:9", "--competition", "http://h/c/1"])
    assert r.exit_code == 2 and "--token" in r.output
