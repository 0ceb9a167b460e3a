"""The league file's ranges and the deadlines' bounds through the service
(issue 32, items 4 and 8): a league sent with a number out of its range is
refused with 422 naming the field, the line and the range, and nothing is
stored; the admin's "games at once" and a final's seed are held to the same
ranges; a deadline before 1970 or more than ten years ahead is refused in
the API, the admin's form (the page again, the times as typed) and the
league's ``[competition]`` table, nothing stored, and the public leaderboard
keeps answering 200, also for such a time stored before (or restored)."""

from __future__ import annotations

import datetime
import html
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from tests.support.api import auth, error_of, signed_in
from tests.support.bounds import FIELDS, attacks, case_text, range_text
from tests.support.web import league_text

Service = Any

#: One attack per number of the file (the second: above the range), the
#: ``[[bots]]`` limits aside (an image house bot is the admin's, as [containers]).
ONE_PER_FIELD = [
    pytest.param(table, key, bound, id=f"{table}.{key}")
    for table, keys in FIELDS.items()
    if table != "bots.limits"
    for key, bound in keys.items()
]


async def competitions(client: Any) -> list[Any]:
    r = await client.get("/api/competitions")
    assert r.status == 200
    return list(await r.json())


@pytest.mark.parametrize("table, key, bound", ONE_PER_FIELD)
async def test_a_league_with_a_number_out_of_range_is_refused_with_422_naming_it(
    service: Service, admin_token: str, table: str, key: str, bound: Any
) -> None:
    client = await service()
    value, quoted = attacks(bound)[1]
    text, line, shown = case_text(table, key, value)
    r = await client.post("/api/competitions", json={"name": "c", "league": text}, headers=auth(admin_token))
    err = await error_of(r, 422)
    assert err["field"] == "league"
    assert err["error"].startswith(
        f"'league': league:{line}: {shown} '{key}': must be {range_text(bound)}"
    ), err
    assert f", got {quoted}" in err["error"]
    assert await competitions(client) == []  # nothing stored


@pytest.mark.parametrize(
    "line, expected",
    [
        (f'memory = "{"9" * 400}g"', "[containers] 'memory': must be a size from 6m to 64g"),
        (f"pids = {'9' * 5000}", "a number of more than 4300 digits"),
    ],
)
async def test_numbers_python_cannot_hold_are_a_422_not_a_500(
    service: Service, admin_token: str, line: str, expected: str
) -> None:
    """Before: an OverflowError (an infinite float) and a ValueError (an
    integer of over 4300 digits) out of the loader, answered 500."""
    client = await service()
    text = league_text() + f"\n[containers]\n{line}\n"
    r = await client.post("/api/competitions", json={"name": "c", "league": text}, headers=auth(admin_token))
    err = await error_of(r, 422)
    assert err["field"] == "league" and f"league:{len(text.splitlines())}: " in err["error"]
    assert expected in err["error"]


async def test_the_huge_ladder_concurrency_is_refused_by_the_api_the_edit_and_the_form(
    service: Service, admin_token: str
) -> None:
    client = await service()
    attack = league_text() + "\n[ladder]\nconcurrency = 9223372036854775807\n"
    line = attack.splitlines().index("concurrency = 9223372036854775807") + 1
    expected = (
        f"league:{line}: [ladder] 'concurrency': must be a whole number from 1 to 256 (games at once), "
        "got 9223372036854775807"
    )
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": attack}, headers=auth(admin_token)
    )
    assert expected in (await error_of(r, 422))["error"]
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": league_text()}, headers=auth(admin_token)
    )
    cid = int((await r.json())["id"])
    r = await client.put(
        f"/api/competitions/{cid}/league", json={"league": attack}, headers=auth(admin_token)
    )
    assert expected in (await error_of(r, 422))["error"]
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/league", data={"csrf": csrf, "league": attack})
    assert r.status == 422 and html.escape(expected) in await r.text()
    r = await client.get(f"/api/competitions/{cid}/league", headers=auth(admin_token))
    assert "9223372036854775807" not in await r.text()  # the first version only


async def test_the_admins_games_at_once_and_a_finals_seed_have_the_league_files_ranges(
    service: Service, admin_token: str
) -> None:
    client = await service()
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": league_text()}, headers=auth(admin_token)
    )
    cid = int((await r.json())["id"])
    for concurrency in (0, 257, 9223372036854775807):
        r = await client.post(
            f"/api/competitions/{cid}/open", json={"concurrency": concurrency}, headers=auth(admin_token)
        )
        err = await error_of(r, 422)
        assert err["field"] == "concurrency"
        assert err["error"] == (
            f"'concurrency': must be a whole number from 1 to 256 (games at once), got {concurrency}"
        )
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/open", data={"csrf": csrf, "concurrency": "257"})
    assert r.status == 422 and "from 1 to 256 (games at once)" in await r.text()
    r = await client.post(f"/api/competitions/{cid}/final", json={"seed": -1}, headers=auth(admin_token))
    err = await error_of(r, 422)
    assert err["field"] == "seed"
    assert err["error"] == "'seed': must be a whole number from 0 to 9223372036854775807 (a seed), got -1"
    assert (await client.get(f"/api/competitions/{cid}")).status == 200
    assert (await competitions(client))[0]["phase"] == "setup"


# ------------------------------------------------------------ deadlines (item 8)


def years_from_now(years: float) -> str:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365.25 * years)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


#: year 10000 and year 0 in UTC (each answered 500 yet was stored), year 1,
#: before 1970, and more than ten years ahead.
ODD = [
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "1900-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "2999-01-01T00:00:00Z",
]


async def pages_answer(client: Any, cid: int) -> None:
    """The public leaderboard, its API and the deadlines keep answering."""
    for url in (f"/c/{cid}", f"/api/competitions/{cid}", f"/api/competitions/{cid}/deadlines", "/"):
        r = await client.get(url)
        assert r.status == 200, (url, r.status, await r.text())


@pytest.mark.parametrize("when", [*ODD, "far-future"])
async def test_an_odd_deadline_is_refused_by_the_api_and_nothing_is_stored(
    service: Service, admin_token: str, when: str
) -> None:
    when = years_from_now(10.1) if when == "far-future" else when
    client = await service()
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": league_text()}, headers=auth(admin_token)
    )
    cid = int((await r.json())["id"])
    url = f"/api/competitions/{cid}/deadlines"
    for field in ("freeze_at", "final_at"):
        r = await client.put(url, json={field: when}, headers=auth(admin_token))
        err = await error_of(r, 422)
        assert err["field"] == field
        assert err["error"].startswith(
            f"'{field}': {when} is out of range: a deadline is a time from 1970-01-01 00:00:00 UTC to ten "
            "years from now ("
        ), err
        assert await (await client.get(url)).json() == {
            "freeze_at": None,
            "final_at": None,
            "source": "league",
        }
    await pages_answer(client, cid)
    ok = years_from_now(9.9)  # within the ten years: set
    r = await client.put(url, json={"final_at": ok}, headers=auth(admin_token))
    assert r.status == 200 and (await r.json())["final_at"] == ok


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "far-future"])
async def test_an_odd_deadline_in_the_admins_form_shows_the_page_again_as_typed(
    service: Service, admin_token: str, when: str
) -> None:
    when = years_from_now(11) if when == "far-future" else when
    client = await service()
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": league_text()}, headers=auth(admin_token)
    )
    cid = int((await r.json())["id"])
    csrf = await signed_in(client, admin_token)
    final_at = years_from_now(1)
    r = await client.post(
        f"/admin/c/{cid}/deadlines",
        data={"csrf": csrf, "freeze_at": when, "final_at": final_at},
        allow_redirects=False,
    )
    page = await r.text()
    assert r.status == 422, page
    assert 'id="deadlines-error"' in page
    assert html.escape(f"'freeze_at': {when} is out of range: a deadline is a time from 1970") in page
    assert f'name="freeze_at" value="{html.escape(when)}"' in page  # as typed
    assert f'name="final_at" value="{html.escape(final_at)}"' in page
    r = await client.get(f"/api/competitions/{cid}/deadlines")
    assert await r.json() == {"freeze_at": None, "final_at": None, "source": "league"}
    await pages_answer(client, cid)


@pytest.mark.parametrize("when", [*ODD, "far-future"])
async def test_an_odd_deadline_in_the_leagues_competition_table_is_refused_naming_its_line(
    service: Service, admin_token: str, when: str
) -> None:
    when = years_from_now(10.1) if when == "far-future" else when
    client = await service()
    text = league_text() + f"\n[competition]\nfreeze_at = {when}\n"
    line = text.splitlines().index(f"freeze_at = {when}") + 1
    r = await client.post("/api/competitions", json={"name": "c", "league": text}, headers=auth(admin_token))
    err = await error_of(r, 422)
    assert err["field"] == "league"
    assert f"league:{line}: [competition] 'freeze_at': " in err["error"]
    assert (
        "is out of range: a deadline is a time from 1970-01-01 00:00:00 UTC to ten years from now"
        in err["error"]
    )
    assert await competitions(client) == []


async def test_an_odd_deadline_stored_before_or_restored_leaves_the_leaderboard_answering(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Times stored before they were refused (or in a restored database): the
    admin's override and a league file's. No page can show them: they are no
    deadline, and every page answers 200 (500 before, until deleted)."""
    client = await service()
    r = await client.post(
        "/api/competitions", json={"name": "c", "league": league_text()}, headers=auth(admin_token)
    )
    cid = int((await r.json())["id"])
    year_10000 = datetime.datetime.fromisoformat("9999-12-31T23:59:59-14:00").timestamp()
    year_0 = datetime.datetime.fromisoformat("0001-01-01T00:00:00+14:00").timestamp()
    db = ServiceDB(db_path)
    try:
        db.set_deadlines(cid, (year_0, year_10000))
        old = db.add_competition(
            "old", league_text() + "\n[competition]\nfreeze_at = 9999-12-31T23:59:59-14:00\n"
        )
    finally:
        db.close()
    await pages_answer(client, cid)
    r = await client.get(f"/api/competitions/{cid}/deadlines")
    assert await r.json() == {"freeze_at": None, "final_at": None, "source": "admin"}
    await pages_answer(client, old.id)
    csrf = await signed_in(client, admin_token)
    assert (await client.get(f"/admin/c/{cid}")).status == 200
    assert csrf
