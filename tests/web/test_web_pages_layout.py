"""The pages in a real browser (Debian's Chromium through Playwright) at a
1,280 × 800 window, against a real service on loopback (issues 25 and 26):

- no page runs wider than the window: a submission with a 64 KiB build log
  of long lines and a report of very long tokens, the team, admin,
  leaderboard, bot and replay pages;
- a favicon at ``/favicon.ico``, linked from every page;
- long lists a page at a time, newest first (a team's 60 submissions, a
  bot's games);
- one numbering: a team's second submission reads "v2" on its team page,
  its submission page, the admin page, the ladder and the bot page, whatever
  other teams submitted in between (its service-wide id is 4).
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from tests.support.layout import WIDTH, api, fits, sign_in, site, until

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

__all__ = ["site"]  # the fixture: the layout site (not tests/web/conftest.py's, which has no "ada v2")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pages_fit_the_window_number_versions_per_team_and_page_long_lists(
    browser_type_launch_args: dict[str, Any], site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, cid = site["base"], site["cid"]
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)

        def new_page() -> Any:
            ctx = browser.new_context(viewport={"width": WIDTH, "height": 800})
            ctx.set_default_timeout(20_000)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            return page

        try:
            # the ladder plays: ada's v2 is in it as "ada v2"
            api(base, "POST", f"/api/competitions/{cid}/open", site["admin"])
            data = until(
                base, cid, lambda d: sum(s["games"] for s in d["standings"] if s["bot"] == "ada v2") >= 25
            )

            # ---- ada's pages: v2 everywhere, the service's id only in the URL
            ada = new_page()
            sign_in(ada, base, site["ada"])
            expect(ada.locator("#playing")).to_contain_text("Version v2 (url")
            links = ada.locator("#submissions tr[class^='status-'] td a")
            expect(links).to_have_text(["v2", "v1"])
            assert links.first.get_attribute("href") == f"/team/submissions/{site['ada_v2']}"
            assert "#4" not in ada.locator("main").inner_text()
            expect(ada.locator("#versions tr[data-version='ada v2']")).to_have_count(1)
            fits(ada, "the team page")
            links.first.click()
            expect(ada.locator("h1")).to_contain_text("Version v2:")
            expect(ada.locator("#log")).to_contain_text("Step 159: yyyy")
            assert ada.evaluate("document.querySelector('#log').scrollWidth") <= WIDTH
            fits(ada, "the submission page with a 64 KiB build log and long tokens in its report")

            # ---- favicon: served, an image, linked from the pages
            icon = ada.request.get(f"{base}/favicon.ico")
            assert icon.status == 200 and icon.headers["content-type"].startswith("image/"), icon.headers
            assert icon.body()[:4] == b"\x00\x00\x01\x00"  # an ICO
            svg = ada.request.get(f"{base}/favicon.svg")
            assert svg.status == 200 and svg.headers["content-type"].startswith("image/svg+xml")
            expect(ada.locator("link[rel=icon][href='/favicon.ico']")).to_have_count(1)

            # ---- the teacher: v2 and the ladder's "ada v2"
            teacher = new_page()
            sign_in(teacher, base, site["admin"], "/admin/login")
            teacher.goto(f"{base}/admin/c/{cid}")
            row = teacher.locator("#teams tr[data-team='ada']")
            expect(row.locator("td").nth(2)).to_contain_text("v2 url")
            expect(row.locator("td").nth(3)).to_have_text("v2")
            expect(row.locator("td.ladder")).to_contain_text("ada v2")
            expect(teacher.locator("#teams tr[data-team='bea'] td").nth(3)).to_have_text("v2")
            fits(teacher, "the admin page")

            # ---- the public pages
            board = new_page()
            board.goto(f"{base}/c/{cid}")
            expect(board.locator("table.standings tr[data-bot='ada v2']")).to_have_count(1)
            fits(board, "the leaderboard")
            board.goto(f"{base}/c/{cid}/bots/ada%20v2")
            expect(board.locator("#who")).to_contain_text("version v2")
            fits(board, "the bot page")

            # freeze: the ladder is finished, its games public
            api(base, "POST", f"/api/competitions/{cid}/freeze", site["admin"])
            data = until(base, cid, lambda d: d["run"]["status"] == "finished")
            board.goto(f"{base}/c/{cid}/runs/{data['run']['id']}/games/0")
            expect(board.locator("main")).to_be_visible()
            fits(board, "the replay page")
            # the bot's games, 20 a page, newest first (the finished ladder's: a list that grows no more)
            board.goto(f"{base}/c/{cid}/bots/ada%20v2")
            games = board.locator("table.games tr td:first-child")
            expect(games).to_have_count(20)
            newest = [int(t) for t in games.all_inner_texts()]
            assert newest == sorted(newest, reverse=True), newest
            expect(board.locator("#games-pages")).to_contain_text("page 1 of")
            board.click("#games-pages a.older")
            expect(board).to_have_url(re.compile(r"/bots/ada%20v2\?page=2$"))
            older = [int(t) for t in games.all_inner_texts()]
            assert older and max(older) < min(newest), (older, newest)

            # ---- cy's 60 submissions, 20 a page, newest first
            cy = new_page()
            sign_in(cy, base, site["cy"])
            rows = cy.locator("#submissions tr[class^='status-'] td a")
            expect(rows).to_have_count(20)
            expect(rows.first).to_have_text("v60")
            expect(rows.last).to_have_text("v41")
            expect(cy.locator("#submissions-pages")).to_contain_text("page 1 of 3 (60 in all)")
            expect(cy.locator("#submissions-pages a.newer")).to_have_count(0)
            fits(cy, "a team page with long notes and a long reason")
            cy.click("#submissions-pages a.older")
            expect(cy).to_have_url(re.compile(r"/team\?page=2$"))
            expect(rows.first).to_have_text("v40")
            expect(rows.last).to_have_text("v21")
            cy.click("#submissions-pages a.older")
            expect(rows).to_have_text([f"v{i}" for i in range(20, 0, -1)])
            expect(cy.locator("#submissions-pages a.older")).to_have_count(0)
            cy.click("#submissions-pages a.newer")
            expect(rows.first).to_have_text("v40")
            cy.goto(f"{base}/team?page=99")  # past the last: the last
            expect(rows.first).to_have_text("v20")
            answer = cy.goto(f"{base}/team?page=x")
            assert answer is not None and answer.status == 400
            expect(cy.locator("body")).to_contain_text("is not a page")
        finally:
            browser.close()
    assert not errors, errors
