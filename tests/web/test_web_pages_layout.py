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

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers_web import LOOPBACK, Background, league_text, new_admin_token, sample_bot_app

from referee.admission import AdmissionLine, AdmissionReport
from referee.service.store import ServiceDB
from referee.web import Settings, make_app

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

WIDTH = 1280
#: A token no browser can break at a space.
LONG = "x" * 3000
#: 64 KiB of build log in lines of 400 characters with no space in them.
LOG = "\n".join(f"Step {i}: " + "y" * 400 for i in range(160))


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A competition with a house bot; ada's v1 (submission 1), bea's v1 and
    v2 (2 and 3), ada's v2 (4, with a long report and build log), all URL
    bots on loopback admitted earlier; cy, with 60 refused submissions."""
    bg = Background()
    try:
        house = bg.serve(lambda: sample_bot_app("greedy"))
        other = bg.serve(lambda: sample_bot_app("random"))
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        try:
            comp = db.add_competition(
                "Class", league_text(name="class", rounds=1, concurrency=2, house={"house-greedy": house})
            )
            ada, ada_token = db.add_team(comp.id, "ada")
            bea, bea_token = db.add_team(comp.id, "bea")
            cy, cy_token = db.add_team(comp.id, "cy")
            sids = []
            for team, url in ((ada, other), (bea, other), (bea, house), (ada, house)):
                sub = db.add_submission(
                    team.id, kind="url", url=url, image=None, secret=None, note="", status="accepted"
                )
                assert sub is not None
                sids.append(sub.id)
            report = AdmissionReport(
                ok=True,
                games=2,
                seconds=1.0,
                lines=[
                    AdmissionLine(ok=True, what="handshake", detail=f"answered {LONG}"),
                    AdmissionLine(ok=True, what=LONG[:200], detail="a\n" + LONG, fix=LONG),
                ],
            )
            db.update_submission(sids[3], report=msgspec.json.encode(report).decode(), log=LOG)
            for i in range(60):
                db.add_submission(
                    cy.id,
                    kind="url",
                    url=f"http://127.0.0.1:9/{i}",
                    image=None,
                    secret=None,
                    note=f"try {i + 1} " + LONG[:400],
                    status="refused",
                )
            db.update_submission(sids[3] + 60, reason="start: " + LONG)  # cy's newest: a long reason
        finally:
            db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK, validation_games=2))
        )
        yield {
            "base": base,
            "admin": admin,
            "cid": comp.id,
            "ada": ada_token,
            "bea": bea_token,
            "cy": cy_token,
            "ada_v2": sids[3],
        }
    finally:
        bg.close()


def api(base: str, method: str, path: str, token: str) -> Any:
    req = urllib.request.Request(
        f"{base}{path}",
        method=method,
        headers={"Authorization": f"Bearer {token}"},
        data=b"" if method == "POST" else None,
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def until(base: str, cid: int, cond: Any, timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        data = api(base, "GET", f"/api/competitions/{cid}", "")
        if cond(data):
            return dict(data)
        assert time.monotonic() < deadline, data
        time.sleep(0.2)


def fits(page: Any, what: str) -> None:
    """The page is no wider than the window, and nothing in its main part
    needs a scroll bar of the main part's own (long lines wrap or scroll in
    their own box)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{what}: {width} px wide at a {WIDTH} px window"
    main = page.evaluate(
        "[document.querySelector('main').scrollWidth, document.querySelector('main').clientWidth]"
    )
    assert main[0] <= main[1], f"{what}: its main part is {main[0]} px wide in {main[1]} px"


def sign_in(page: Any, base: str, token: str, path: str = "/login") -> None:
    page.goto(f"{base}{path}")
    page.fill("input[type=password][name=token]", token)
    page.click(f"form[action='{path}'] button[type=submit]")
    page.wait_for_load_state()


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
