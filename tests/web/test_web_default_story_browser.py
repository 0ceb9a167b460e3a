"""The default story in a real browser (Debian's Chromium through Playwright),
issue 34's "done when", as docs/teacher.md tells it: a new competition from
the admin page's *New competition* form (pre-filled with the default league
and its built-in house bots; the only edit: tables of 6, so that two teams
and three house bots are fewer than the seats) → two teams sign in and
submit their bots → practice against a built-in house bot → the ladder plays
with its seats filled → freeze → a final that fills its seats → *Extend the
final* → its standings as CSV.

The teams' bots are the sample bots served on loopback and submitted as URLs
(the kits as source zips need Docker builds, minutes on a loaded machine;
tests/web/test_web_team_browser.py and tests/containers upload them); the
built-in house bots play as the service's own programs (``house_images`` off:
their images are tests/containers' business).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.web import Settings, make_app
from tests.support.browser import settle, submit_form
from tests.support.layout import api, sign_in
from tests.support.web import LOOPBACK, Background, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")


@pytest.fixture
def story(tmp_path: Path) -> Iterator[dict[str, Any]]:
    bg = Background()
    try:
        bots = bg.serve_bots({"ada": "greedy", "bea": "random"})
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        settings = Settings(
            poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK, validation_games=2, house_images=False
        )
        base = bg.serve(lambda: make_app(db_path, settings))
        yield {"base": base, "admin": admin, "bots": bots}
    finally:
        bg.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_default_story_from_a_new_competition_to_the_final_csv(
    browser_type_launch_args: dict[str, Any], story: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, admin = story["base"], story["admin"]
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)

        def new_page() -> Any:
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            ctx.set_default_timeout(30_000)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            return page

        try:
            # ---- the teacher: a new competition from the default league
            teacher = new_page()
            sign_in(teacher, base, admin, "/admin/login")
            teacher.goto(f"{base}/admin")
            league = teacher.locator("#new-competition textarea[name=league]")
            text = league.input_value()
            for house in ("house-random", "house-greedy", "house-tactician"):
                assert f'name = "{house}"' in text, text
            assert "table_size = 4" in text, text
            # tables of 6: two teams and three house bots are fewer than the seats;
            # a small game budget, so that the final ends unsettled and can be extended
            league.fill(text.replace("table_size = 4", "table_size = 6") + "\n[stop]\nmax_games = 12\n")
            teacher.fill("#new-competition input[name=name]", "Class")
            teacher.click("#new-competition button[type=submit]")
            expect(teacher).to_have_url(re.compile(r"/admin/c/\d+$"))
            cid = int(teacher.url.rsplit("/", 1)[1])
            teacher.fill("#add-teams textarea[name=names]", "ada\nbea")
            teacher.click("#add-teams button[type=submit]")
            tokens = teacher.locator("#tokens tr:has(td code)")
            expect(tokens).to_have_count(2)
            token = {
                tokens.nth(i).locator("td").nth(1).inner_text(): tokens.nth(i).locator("code").inner_text()
                for i in range(2)
            }

            # ---- two teams submit their bots, admitted against the house bots
            teams = {}
            for name in ("ada", "bea"):
                page = new_page()
                sign_in(page, base, token[name])
                expect(page).to_have_url(f"{base}/team")
                sid = submit_form(page, kind="url", note="first", url=story["bots"][name])
                seen = settle(page, sid)
                assert seen[-1] == "accepted", (name, seen)
                teams[name] = page

            # ---- practice against a built-in house bot
            ada = teams["ada"]
            ada.goto(f"{base}/team/practice")
            selects = ada.locator("#practice-form select[name=opponent]")
            expect(selects).to_have_count(5)  # tables of 6
            labels = selects.first.locator("option").all_inner_texts()
            assert "house bot house-tactician" in labels, labels
            for i in range(5):
                selects.nth(i).select_option(label="house bot house-tactician")
            ada.click("#practice-form button[type=submit]")
            expect(ada).to_have_url(f"{base}/team/practice")
            expect(ada.locator("#practice-games tr.status-finished").first).to_contain_text(
                "house-tactician", timeout=60_000
            )

            # ---- the ladder: 5 players at tables of 6, the seats filled
            teacher.goto(f"{base}/admin/c/{cid}")
            teacher.click("#open button[type=submit]")
            board = new_page()
            board.goto(f"{base}/c/{cid}")
            rows = board.locator("table.standings tr[data-bot]")
            expect(rows.filter(has_text="ada v1")).to_have_count(1)
            expect(rows.filter(has_text="house-tactician")).to_have_count(1)
            # the leaderboard follows the run live: wait on what it shows
            progress = board.locator("#progress")
            expect(progress).to_have_attribute("data-kind", "ladder")
            expect(progress).to_have_attribute("data-done", re.compile(r"^[1-9]"))  # games played
            ladder = api(base, "GET", f"/api/competitions/{cid}", "")["run"]["id"]

            # ---- freeze, then the final: it fills its seats too
            teacher.goto(f"{base}/admin/c/{cid}")
            teacher.click("#freeze button[type=submit]")
            expect(teacher.locator("#final button[type=submit]")).to_be_visible()
            # the frozen ladder's games are public: 5 players at tables of 6, the seats filled
            game = api(base, "GET", f"/api/competitions/{cid}/runs/{ladder}/games/0", "")
            assert len(game["names"]) == 6, sorted(game)  # 5 players and a filled seat
            teacher.click("#final button[type=submit]")
            ended = board.locator("#progress[data-kind=final][data-status=finished]")
            expect(ended).to_have_attribute("data-done", "12", timeout=120_000)  # its budget
            final = api(base, "GET", f"/api/competitions/{cid}", "")["run"]["id"]
            game = api(base, "GET", f"/api/competitions/{cid}/runs/{final}/games/0", "")
            assert len(game["names"]) == 6, sorted(game)  # 5 players and a filled seat

            # ---- extend the unsettled final from the admin page
            teacher.goto(f"{base}/admin/c/{cid}")
            expect(teacher.locator("#estimates")).to_be_visible()
            teacher.fill("#extend input[name=games]", "6")
            teacher.click("#extend button[type=submit]")
            # the same run plays on: 6 more games
            expect(ended).to_have_attribute("data-done", "18", timeout=120_000)

            # ---- its standings as CSV
            teacher.goto(f"{base}/admin/c/{cid}")
            link = teacher.locator("#final-csv")
            expect(link).to_be_visible()
            answer = teacher.request.get(f"{base}{link.get_attribute('href')}")
            assert answer.status == 200, answer.status
            table = list(csv.DictReader(io.StringIO(answer.text())))
            rows_by_bot = {r["bot"]: r for r in table}
            assert {"ada", "bea", "house-tactician"} <= set(rows_by_bot), table
            assert rows_by_bot["ada"]["games"] == "18", table  # the budget of 12, then the extension
        finally:
            browser.close()
    assert not errors, errors
