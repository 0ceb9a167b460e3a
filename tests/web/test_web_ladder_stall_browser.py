"""The ladder never stalls silently (issue 25, item 3), in a real browser
(Debian's Chromium through Playwright) against the real service on
loopback: the public leaderboard of a ladder with one team says, in words,
why it plays nothing and what to do, instead of "playing, 0 games"; once a
second team's bot is accepted the same page (never reloaded) shows the
games, the explanation gone."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

LEAGUE = """\
[tournament]
name = "lonely"
seed = 5
table_size = 2

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2
"""


def call(base: str, method: str, path: str, token: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"{base}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def accepted_team(base: str, admin: str, cid: int, name: str, url: str) -> None:
    team = call(base, "POST", f"/api/competitions/{cid}/teams", admin, {"name": name})
    tid, token = team["id"], team["token"]
    sid = call(base, "PUT", f"/api/competitions/{cid}/teams/{tid}/bot", token, {"url": url})["id"]
    deadline = time.monotonic() + 120
    while True:
        sub = call(base, "GET", f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", token)["submission"]
        if sub["status"] in ("accepted", "refused"):
            assert sub["status"] == "accepted", sub
            return
        assert time.monotonic() < deadline, sub
        time.sleep(0.1)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    bg = Background()
    try:
        bots = bg.serve_bots({"greedy": "greedy", "random": "random"})
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        settings = Settings(poll_s=0.05, min_update_s=0.2, bot_policy=LOOPBACK, validation_games=2)
        base = bg.serve(lambda: make_app(db_path, settings))
        yield {"base": base, "admin": admin, "bots": bots}
    finally:
        bg.close()


@pytest.mark.timeout(300)
def test_a_lonely_ladder_says_why_on_its_page_and_plays_once_a_second_team_comes(
    browser_type_launch_args: dict[str, Any], site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, admin, bots = site["base"], site["admin"], site["bots"]
    cid = call(base, "POST", "/api/competitions", admin, {"name": "lonely", "league": LEAGUE})["id"]
    accepted_team(base, admin, cid, "ada", bots["greedy"])
    call(base, "POST", f"/api/competitions/{cid}/open", admin, {})
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(30_000)
            page.goto(f"{base}/c/{cid}")
            page.evaluate("window.__noReload = 1")
            waiting = page.locator("#waiting")
            expect(waiting).to_be_visible(timeout=30_000)  # live: shown once the ladder found it cannot play
            expect(waiting).to_contain_text(
                "The ladder is waiting: it needs at least 2 players to play (tables of 2) and has 1 (ada v1)."
            )
            expect(waiting).to_contain_text("Add a house bot to the league file")
            expect(page.locator("#progress .status")).to_have_text("waiting")
            accepted_team(base, admin, cid, "bo", bots["random"])
            expect(page.locator("#progress")).not_to_have_attribute("data-done", "0", timeout=60_000)
            expect(page.locator("#waiting")).to_have_count(0, timeout=30_000)
            expect(page.locator("#progress .status")).to_have_text("playing")
            assert page.evaluate("window.__noReload") == 1, "the leaderboard was reloaded"
        finally:
            browser.close()
    assert errors == [], errors
