"""Alerts on the pages (issue 34, item 3): what the core raised shows at
the top of the admin page with its action, in public words on the
leaderboard (nothing private), as a count on /admin; a refused *Start the
final* answers with the competition's page saying why and what to do."""

from __future__ import annotations

import html
import re
from typing import Any

from referee.service import alerts, deadlines
from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from tests.support.api import auth, new_competition, signed_in
from tests.support.web import league_text

Service = Any


async def test_a_final_that_cannot_start_says_why_on_every_page(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    room = client.app[ROOM]
    house = {"house-a": bot_urls["greedy"], "house-b": bot_urls["random"]}
    league = league_text(table_size=4, house=house) + '\n[ladder]\nfill = "none"\n'  # no seat filled
    r = await client.post(
        "/api/competitions", json={"name": "class", "league": league}, headers=auth(admin_token)
    )
    assert r.status == 201, await r.text()
    cid = int((await r.json())["id"])
    csrf = await signed_in(client, admin_token)
    await room.open(cid)
    await room.freeze(cid)

    # --- Start the final by hand, refused: the page itself says why and what to do (not a bare 409)
    r = await client.post(f"/admin/c/{cid}/final", data={"csrf": csrf}, allow_redirects=False)
    page = html.unescape(await r.text())
    assert r.status == 409 and 'id="phase-error"' in page
    assert "only 2 bots" in page and "What to do:" in page and "add a house bot" in page
    assert 'id="phase"' in page and 'id="final"' in page  # the competition's page, its buttons still there

    # --- final_at passes: the deadline watch's step raises an alert, shown with its action
    now = room.clock.time()
    await room.db.call(ServiceDB.set_deadlines, cid, (now - 120, now - 60))
    await deadlines.apply_due(room)
    page = html.unescape(await (await client.get(f"/admin/c/{cid}")).text())
    section = re.search(r'<section class="panel alerts" id="alerts".*?</section>', page, re.S)
    assert section is not None, page
    assert 'data-step="final"' in section[0] and "only 2 bots" in section[0]
    assert "What to do:" in section[0] and "add a house bot" in section[0]
    home = await (await client.get("/admin")).text()
    assert f'href="/admin/c/{cid}#alerts"' in home and "1 alert" in home

    # --- the leaderboard: the public words, no path, no cause
    board = html.unescape(await (await client.get(f"/c/{cid}")).text())
    assert alerts.PUBLIC["final"] in board
    assert "only 2 bots" not in board and str(room.db.data_dir) not in board

    # --- resolved when it goes on: two more house bots: the final starts, the alert is gone
    text = (await room.competition(cid)).league_toml + "".join(
        f'\n[[bots]]\nname = "{n}"\nurl = "{bot_urls["greedy"]}"\n' for n in ("house-c", "house-d")
    )
    await room.db.call(ServiceDB.set_league, cid, text, "admin (test)")
    await deadlines.apply_due(room)
    assert (await room.competition(cid)).phase == "final"
    page = await (await client.get(f"/admin/c/{cid}")).text()
    assert 'id="alerts"' not in page
    assert alerts.PUBLIC["final"] not in await (await client.get(f"/c/{cid}")).text()


async def test_a_refusal_page_names_what_kind_of_refusal_it_is(service: Service, admin_token: str) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    csrf = await signed_in(client, admin_token)
    r = await client.post(f"/admin/c/{cid}/freeze", data={"csrf": csrf}, allow_redirects=False)
    page = html.unescape(await r.text())
    assert r.status == 409
    assert "Refused:" in page and "only an open competition freezes" in page
    r = await client.get("/c/999")
    page = await r.text()
    assert r.status == 404 and "<h1>Not found" in page and 'id="error-message"' in page
