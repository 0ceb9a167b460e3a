"""Forms keep what was typed (issue 34, item 7): every admin form refused
(the deadlines, a new competition, the league edit, the teams' paste, a
phase's button, a team's rename) answers with its page again, what was typed
kept and the message beside the field it names, never a bare error page."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.support.api import new_competition, new_team, signed_in
from tests.support.web import league_text

Service = Any


def beside(page: str, field: str, error_id: str) -> bool:
    """Whether the element `error_id` comes right after the input named `field` (its label, then it)."""
    found = re.search(
        rf'name="{field}"[^>]*>(?:</label>)?\s*<span class="error field-error" role="alert" id="{error_id}"',
        page,
    )
    return found is not None


async def test_the_deadlines_form_keeps_a_time_without_zone_and_says_so_beside_it(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    csrf = await signed_in(client, admin_token)
    r = await client.post(
        f"/admin/c/{cid}/deadlines",
        data={"csrf": csrf, "freeze_at": "2030-06-01T17:00:00", "final_at": "2030-06-02T17:00:00Z"},
    )
    page = await r.text()
    assert r.status == 422 and 'id="deadlines-form"' in page
    assert 'value="2030-06-01T17:00:00"' in page and 'value="2030-06-02T17:00:00Z"' in page
    assert beside(page, "freeze_at", "deadlines-error") and "no time zone" in page
    r = await client.post(
        f"/admin/c/{cid}/deadlines", data={"csrf": csrf, "freeze_at": "", "final_at": "friday"}
    )
    page = await r.text()
    assert r.status == 422 and beside(page, "final_at", "deadlines-error") and 'value="friday"' in page


async def test_a_new_competition_keeps_its_name_and_league_and_says_which_is_wrong(
    service: Service, admin_token: str
) -> None:
    client = await service()
    await new_competition(client, admin_token, name="taken")
    csrf = await signed_in(client, admin_token)
    r = await client.post(
        "/admin/competitions", data={"csrf": csrf, "name": "taken", "league": league_text()}
    )
    page = html.unescape(await r.text())
    assert r.status == 422 and beside(page, "name", "error") and "exists already" in page
    assert 'value="taken"' in page and 'name = "class"' in page
    r = await client.post(
        "/admin/competitions", data={"csrf": csrf, "name": "new", "league": "[tournament]\ntable_size = 99\n"}
    )
    page = html.unescape(await r.text())
    assert r.status == 422 and 'value="new"' in page and "table_size = 99" in page
    assert re.search(r'id="error">[^<]*table_size[^<]*</span><textarea name="league"', page), page


async def test_the_league_edit_and_the_teams_paste_keep_their_text(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    csrf = await signed_in(client, admin_token)
    r = await client.post(
        f"/admin/c/{cid}/league", data={"csrf": csrf, "league": "[tournament]\nseats = 3\n"}
    )
    page = html.unescape(await r.text())
    assert r.status == 422 and re.search(r'id="league-error">[^<]+</span><textarea name="league"', page)
    assert "seats = 3" in page
    r = await client.post(f"/admin/c/{cid}/teams", data={"csrf": csrf, "names": "ada\nada\n"})
    page = html.unescape(await r.text())
    assert r.status == 422 and re.search(r'id="error">[^<]*line 2[^<]*</span><textarea name="names"', page)
    assert ">ada\nada\n</textarea>" in page


async def test_a_refused_open_keeps_the_games_at_once_typed(service: Service, admin_token: str) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/open", data={"csrf": csrf, "concurrency": "999"})
    page = await r.text()
    assert r.status == 422 and 'id="phase"' in page  # the competition's page, not a bare error
    assert 'value="999"' in page and beside(page, "concurrency", "phase-error")
    assert "'concurrency'" in html.unescape(page)


async def test_a_refused_rename_keeps_the_name_typed(service: Service, admin_token: str) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    await new_team(client, admin_token, cid, "ada")
    bea, _ = await new_team(client, admin_token, cid, "bea")
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/teams/{bea}/rename", data={"csrf": csrf, "name": "ada"})
    page = html.unescape(await r.text())
    assert r.status == 422 and 'value="ada"' in page and beside(page, "name", "error")
    assert "exists already" in page
