"""The team page's starter kit in a real browser (Debian's Chromium through
Playwright), against the real service on loopback (issue 26, items 1 and 2):
a signed-in team sees the three steps and the two download links, downloads
the Python kit (a zip with bot.py and the competition's SETTINGS.md), and
follows the link to its competition's rules, where the competition's
variant flags and timeouts come first."""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

LEAGUE = '[tournament]\nname = "class"\n\n[rules]\nreverses = true\n\n[timeouts]\nmove_ms = 1500\n'


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    bg = Background()
    try:
        db_path = tmp_path / "service.sqlite"
        new_admin_token(db_path)
        db = ServiceDB(db_path)
        try:
            comp = db.add_competition("Class <b>1</b>", LEAGUE)
            _, token = db.add_team(comp.id, "ada")
        finally:
            db.close()
        base = bg.serve(lambda: make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK)))
        yield {"base": base, "cid": comp.id, "token": token}
    finally:
        bg.close()


def test_the_team_page_shows_the_three_steps_and_the_kits(
    page: Any, site: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    base = site["base"]
    page.goto(f"{base}/team")
    expect(page).to_have_url(f"{base}/login")
    page.fill("input[type=password][name=token]", site["token"])
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(f"{base}/team")
    steps = page.locator("#kit-steps li")
    expect(steps).to_have_count(4)  # the SDK's install, run, check, submit
    expect(steps.nth(0)).to_contain_text("pip install referee-sdk --find-links")
    expect(steps.nth(1)).to_contain_text("python bot.py --port 8001")
    expect(steps.nth(2)).to_contain_text("referee check http://127.0.0.1:8001")
    # zip and upload; where the server takes no uploads (no Docker), its URL
    expect(steps.nth(3)).to_contain_text(re.compile(r"zip -r \.\./my-bot\.zip \.|submit its URL"))
    expect(page.locator("#kit-python")).to_have_attribute("href", "/team/kit/python.zip")
    expect(page.locator("#kit-node")).to_have_attribute("href", "/team/kit/node.zip")
    with page.expect_download() as got:
        page.click("#kit-python")
    download = got.value
    assert download.suggested_filename == "my-python-bot.zip"
    saved = tmp_path / "kit.zip"
    download.save_as(saved)
    with zipfile.ZipFile(saved) as z:
        names = set(z.namelist())
        settings = z.read("my-python-bot/SETTINGS.md").decode()
    assert {"my-python-bot/bot.py", "my-python-bot/README.md", "my-python-bot/SETTINGS.md"} <= names
    assert "| V3 | reverses (a play with 1s turns the direction) | on |" in settings
    page.screenshot(path="/tmp/referee-screens/team-kit.png", full_page=True)
    # the competition's rules: its settings first, then the rules
    page.click(f"#kit a[href='/c/{site['cid']}/rules']")
    expect(page).to_have_url(f"{base}/c/{site['cid']}/rules")
    expect(page.locator("h1").first).to_contain_text("Class <b>1</b>")
    table = page.locator("#settings")
    expect(table.locator("tr", has_text="V3")).to_contain_text("on")
    expect(table.locator("tr", has_text="V2")).to_contain_text("off")
    expect(table.locator("tr", has_text="move_ms")).to_contain_text("1500 ms")
    expect(page.locator("article.doc h2").first).to_contain_text("1. Cards")
    page.screenshot(path="/tmp/referee-screens/competition-rules.png", full_page=True)
