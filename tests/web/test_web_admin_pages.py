"""The admin's pages (issue 15, part): sign in, a competition from a form with
its league's errors, teams in bulk with their tokens shown once."""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.support.api import auth, signed_in
from tests.support.web import league_text

Service = Any


async def test_the_admin_signs_in_with_the_token_only(service: Service, admin_token: str) -> None:
    client = await service()
    assert (await client.get("/admin", allow_redirects=False)).headers["Location"] == "/admin/login"
    for wrong in ("", "nope", admin_token[:-1]):
        r = await client.post("/admin/login", data={"token": wrong}, allow_redirects=False)
        assert r.status == 401 and "not the admin token" in await r.text()
    # a team's token is not the admin's
    await signed_in(client, admin_token)
    page = await (await client.get("/admin")).text()
    assert "New competition" in page


async def test_a_competition_from_the_form_names_the_leagues_line_and_keeps_the_text(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    csrf = await signed_in(client, admin_token)
    bad = league_text().replace("table_size = 2", "table_size = 9")
    r = await client.post(
        "/admin/competitions", data={"csrf": csrf, "name": "class", "league": bad}, allow_redirects=False
    )
    page = await r.text()
    assert r.status == 422
    assert "league:4:" in page and "table_size" in page  # the field and its line
    assert "table_size = 9" in page  # what was typed is kept
    assert sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM competitions").fetchone()[0] == 0
    r = await client.post(
        "/admin/competitions",
        data={"csrf": csrf, "name": "class", "league": league_text()},
        allow_redirects=False,
    )
    assert r.status == 303 and r.headers["Location"] == "/admin/c/1"
    # without the CSRF token, or from another site's page: refused
    for data, headers in (
        ({"name": "x", "league": league_text()}, {}),
        ({"csrf": csrf, "name": "y", "league": league_text()}, {"Origin": "https://evil.example"}),
    ):
        r = await client.post("/admin/competitions", data=data, headers=headers, allow_redirects=False)
        assert r.status == 403
    assert sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM competitions").fetchone()[0] == 1


async def test_teams_in_bulk_all_or_none_with_their_tokens_shown_once(
    service: Service, admin_token: str, db_path: Path
) -> None:
    client = await service()
    csrf = await signed_in(client, admin_token)
    await client.post("/admin/competitions", data={"csrf": csrf, "name": "class", "league": league_text()})
    r = await client.post("/admin/c/1/teams", data={"csrf": csrf, "names": "ada\nbea\n\nada\n" + "x" * 41})
    page = await r.text()
    assert r.status == 422
    text = html.unescape(page)
    assert "line 4: 'ada' is on line 1 already" in text and "line 5:" in text and "too long" in text
    assert sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM teams").fetchone()[0] == 0
    r = await client.post("/admin/c/1/teams", data={"csrf": csrf, "names": "ada\n  bea <b>\n"})
    page = await r.text()
    assert r.status == 200 and r.headers["Cache-Control"] == "no-store"
    tokens = re.findall(r"<code>([A-Za-z0-9_-]{43})</code>", page)
    assert len(tokens) == 2
    href = re.search(r'href="(data:text/csv;charset=utf-8,[^"]+)"', page).group(1)  # type: ignore[union-attr]
    rows = unquote(href.split(",", 1)[1]).splitlines()
    assert rows[0] == "team_id,team,token" and rows[1] == f"1,ada,{tokens[0]}" and rows[2].endswith(tokens[1])
    assert "bea &lt;b&gt;" in page  # escaped
    # each token is that team's
    for tid, token in ((1, tokens[0]), (2, tokens[1])):
        assert (await client.get(f"/api/competitions/1/teams/{tid}/bot", headers=auth(token))).status == 200
    # shown once: the page does not show them again
    again = await (await client.get("/admin/c/1")).text()
    assert tokens[0] not in again and tokens[1] not in again
    assert "ada" in again and "none" in again  # no version in play yet
