"""Labels that tell the truth (issue 34, item 8), one test a label: the
admission games name who really played each seat; "accepted" is when it was
accepted; a frozen competition on the home page is frozen, not "finished
0/0"; after the freeze a team's ladder entry is not "active"."""

from __future__ import annotations

import html
import re
from typing import Any

from referee.web.app_state import ROOM
from referee.web.pages import FILTERS
from tests.support.api import new_competition, new_team, signed_in, submit

Service = Any


async def test_the_admission_games_name_the_bot_that_played_each_seat(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    # tables of 3: both names bea's tables could seat (house-greedy, ada v1) sit at every deal,
    # where tables of 2 would draw one of them a deal, and miss ada v1 by chance
    cid = await new_competition(client, admin_token, table_size=3, house={"house-greedy": bot_urls["random"]})
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bea, bea_token = await new_team(client, admin_token, cid, "bea")
    await submit(client, cid, ada, ada_token, {"url": bot_urls["greedy"]})
    await client.app[ROOM].open(cid)  # ada v1 plays: bea's check may seat it
    done = await submit(client, cid, bea, bea_token, {"url": bot_urls["random"]})
    assert done["submission"]["status"] == "accepted", done
    games = done["report"]["validation"]
    seated = {n for g in games for n in g["names"]}
    assert all(g["house"] == "house-greedy" for g in games)
    await signed_in(client, admin_token)
    page = html.unescape(
        await (await client.get(f"/admin/c/{cid}/teams/{bea}/submissions/{done['submission']['id']}")).text()
    )
    cells = re.findall(r'<td class="l players">(.*?)</td>', page)
    assert cells and all("<b>your bot</b>" in c for c in cells)
    # the other seats: named by the bots it could meet, played by the house bot
    assert "ada v1" in seated, seated
    assert any('house-greedy <span class="muted">in the seat of ada v1</span>' in c for c in cells), cells
    line = next(x for x in done["report"]["lines"] if x["what"].startswith("validation games"))
    assert "house-greedy played every other seat" in line["detail"]


async def test_accepted_shows_when_it_was_accepted(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["random"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    done = await submit(client, cid, tid, token, {"url": bot_urls["greedy"]})
    sub = done["submission"]
    assert sub["decided_at"] is not None and sub["decided_at"] >= sub["created_at"]
    await signed_in(client, admin_token)
    page = await (await client.get(f"/admin/c/{cid}/teams/{tid}")).text()
    shown = re.search(r'accepted <span id="accepted-at">([^<]+)</span>', page)
    assert shown is not None and shown[1] == FILTERS["when"](sub["decided_at"])


async def test_a_frozen_competition_is_frozen_on_the_home_page_and_its_entries_are_not_active(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, house={"house-greedy": bot_urls["random"]})
    tid, token = await new_team(client, admin_token, cid, "ada")
    await submit(client, cid, tid, token, {"url": bot_urls["greedy"]})
    room = client.app[ROOM]
    await room.open(cid)
    await room.freeze(cid)
    home = await (await client.get("/")).text()
    row = re.search(rf'<tr><td class="l"><a href="/c/{cid}">.*?</tr>', home)
    assert row is not None
    assert "frozen: the final is next" in row[0] and "finished" not in row[0] and "/0<" not in row[0]
    listing = await (await client.get("/api/competitions")).json()
    assert listing[0]["stage"] == "frozen: the final is next"
    await signed_in(client, admin_token)
    page = await (await client.get(f"/admin/c/{cid}")).text()
    cell = re.search(r'<tr data-team="ada">.*?<td class="l ladder">(.*?)</td>', page, re.S)
    assert cell is not None and "played until the freeze" in cell[1] and ">active<" not in cell[1]
