"""Changing a competition from the admin's pages in a real browser (Debian's
Chromium through Playwright; issue 25, items 4 and 6): the league file
edited from its form (a bad one shown with its line, nothing saved), its
versions listed; a team's page with its submissions and their reports, its
rename, new token and withdrawal; the team's session ends at once.
Screenshots go to /tmp/referee-screens/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, league_text, new_admin_token, sample_bot_app

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

SCREENS = Path("/tmp/referee-screens")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The service with a competition (a house bot) and team "ada", whose URL bot was accepted."""
    bg = Background()
    try:
        house = bg.serve(lambda: sample_bot_app("greedy"))
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Class", league_text(name="class", house={"house-greedy": house}))
        team, token = db.add_team(comp.id, "ada")
        db.add_submission(
            team.id, kind="url", url=house, image=None, secret=None, note="ada v1", status="accepted"
        )
        db.close()
        base = bg.serve(lambda: make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK)))
        yield {"base": base, "admin": admin, "cid": comp.id, "tid": team.id, "token": token, "db": db_path}
    finally:
        bg.close()


def test_the_admin_edits_the_league_and_changes_a_team(page: Any, browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    SCREENS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": 1280, "height": 900})
    base, cid, tid = site["base"], site["cid"], site["tid"]
    # the team is signed in, in a browser of its own
    team_ctx = browser.new_context()
    team = team_ctx.new_page()
    team.goto(f"{base}/login")
    team.fill("input[name=token]", site["token"])
    team.click("form[action='/login'] button[type=submit]")
    expect(team).to_have_url(f"{base}/team")
    # its session reaches no admin page
    team.goto(f"{base}/admin/c/{cid}/teams/{tid}")
    expect(team).to_have_url(f"{base}/admin/login")

    page.goto(f"{base}/admin/login")
    page.fill("input[name=token]", site["admin"])
    page.click("form[action='/admin/login'] button[type=submit]")
    expect(page).to_have_url(f"{base}/admin")
    page.goto(f"{base}/admin/c/{cid}")
    box = page.locator("#edit-league textarea[name=league]")
    assert "move_ms = 2000" in box.input_value() and "house-greedy" in box.input_value()  # the current text
    expect(page.locator("#edit-rule")).to_contain_text("an open ladder plays it from its next games")
    # a bad league: the error names the line, the text stays, nothing is saved
    text = box.input_value()
    box.fill(text.replace("table_size = 2", "table_size = 9"))
    page.click("#edit-league button[type=submit]")
    expect(page.locator("#league-error")).to_contain_text("league:4:")
    expect(page.locator("#edit-league textarea[name=league]")).to_have_value(
        text.replace("table_size = 2", "table_size = 9")
    )
    expect(page.locator("#versions tr[data-version]")).to_have_count(1)
    # a good one: version 2, newest first
    page.locator("#edit-league textarea[name=league]").fill(text.replace("move_ms = 2000", "move_ms = 1200"))
    page.click("#edit-league button[type=submit]")
    expect(page.locator("#versions tr[data-version]")).to_have_count(2)
    expect(page.locator("#versions tr[data-version]").first).to_contain_text("admin (page)")
    expect(page.locator("#edit-league textarea[name=league]")).to_have_value(
        text.replace("move_ms = 2000", "move_ms = 1200")
    )
    page.screenshot(path=str(SCREENS / "admin-league-versions.png"), full_page=True)

    # the team's page, as the admin sees it
    page.click(f"#teams a[href='/admin/c/{cid}/teams/{tid}']")
    expect(page.locator("#team-name")).to_have_text("ada")
    expect(page.locator("#submissions")).to_contain_text("ada v1")
    expect(page.locator("#submissions")).to_contain_text("accepted")
    page.click("#submissions td a")
    expect(page.locator("h1")).to_contain_text("accepted")
    page.click(f"a[href='/admin/c/{cid}/teams/{tid}']")
    # rename: the same checks as a new team's
    page.fill("#rename input[name=name]", "house-greedy")
    page.click("#rename button[type=submit]")
    expect(page.locator("#error")).to_contain_text("house bot")
    page.fill("#rename input[name=name]", "ada lovelace")
    page.click("#rename button[type=submit]")
    expect(page.locator("#team-name")).to_have_text("ada lovelace")
    team.goto(f"{base}/team")
    expect(team.locator("h1")).to_have_text("ada lovelace")  # the session survives a rename
    # a new token: shown once; the team's session ends at once
    page.click("#token-form button[type=submit]")
    new = page.locator("#token").inner_text()
    assert new and new != site["token"]
    page.screenshot(path=str(SCREENS / "admin-team-new-token.png"), full_page=True)
    team.goto(f"{base}/team")
    expect(team).to_have_url(f"{base}/login")
    team.fill("input[name=token]", site["token"])
    team.click("form[action='/login'] button[type=submit]")
    expect(team.locator("body")).to_contain_text("unknown token")
    team.fill("input[name=token]", new)
    team.click("form[action='/login'] button[type=submit]")
    expect(team).to_have_url(f"{base}/team")
    # withdraw: the session ends, the page keeps its history
    page.goto(f"{base}/admin/c/{cid}/teams/{tid}")
    page.click("#withdraw button[type=submit]")
    expect(page.locator("#withdrawn")).to_be_visible()
    expect(page.locator("#submissions")).to_contain_text("ada v1")
    team.goto(f"{base}/team")
    expect(team).to_have_url(f"{base}/login")
    page.goto(f"{base}/admin/c/{cid}")
    expect(page.locator("#teams")).to_contain_text("withdrawn")
    page.screenshot(path=str(SCREENS / "admin-team-withdrawn.png"), full_page=True)
    team_ctx.close()
    assert errors == []
