"""A team's practice page in a real browser (Debian's Chromium through
Playwright), against the service on loopback (issue 26): the team page
links to it, the form picks the opponent, the game is played, and its
replay opens from the team's seat. Screenshots go to /tmp/referee-screens/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, league_text, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

SCREENS = Path("/tmp/referee-screens")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A house bot and team "ada" with two accepted versions, on loopback."""
    bg = Background()
    try:
        urls = bg.serve_bots({"house": "greedy", "v1": "random", "v2": "greedy"})
        db_path = tmp_path / "service.sqlite"
        new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Class", league_text(name="class", house={"house-greedy": urls["house"]}))
        team, token = db.add_team(comp.id, "ada")
        for v in ("v1", "v2"):
            db.add_submission(
                team.id, kind="url", url=urls[v], image=None, secret=None, note=v, status="accepted"
            )
        db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        )
        yield {"base": base, "token": token}
    finally:
        bg.close()


@pytest.mark.slow
def test_the_practice_form_plays_a_game_and_opens_its_replay_from_the_teams_seat(
    page: Any, site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    base = site["base"]
    SCREENS.mkdir(exist_ok=True)
    page.goto(f"{base}/login")
    page.fill("input[type=password][name=token]", site["token"])
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(f"{base}/team")
    page.click("a#practice")
    expect(page).to_have_url(f"{base}/team/practice")
    select = page.locator("#practice-form select[name=opponent]")
    expect(select).to_have_count(1)  # a table of 2: one opponent
    labels = select.locator("option").all_inner_texts()
    assert labels == ["house bot house-greedy", "your earlier version v1"], labels
    select.select_option(label="your earlier version v1")
    page.click("#practice-form button[type=submit]")
    expect(page).to_have_url(f"{base}/team/practice")
    links = page.locator("#practice-games a.replay")
    expect(links).to_have_count(2, timeout=30_000)  # the page refreshes until it is played: a deal at 2 seats
    link = links.first
    row = page.locator("#practice-games tr.status-finished")
    expect(row).to_contain_text("ada v1")
    page.screenshot(path=str(SCREENS / "practice.png"), full_page=True)
    link.click()
    expect(page.locator("h1")).to_contain_text("Replay")
    assert "?game=0&seat=" in page.url
    seat = page.url.rsplit("=", 1)[1]
    expect(page.locator("#mode")).to_have_value(seat)
    expect(page.locator("#mode option:checked")).to_contain_text("ada v2's view")
    page.screenshot(path=str(SCREENS / "practice-replay.png"), full_page=True)
    page.click("a[href='/team/practice']")
    expect(page).to_have_url(f"{base}/team/practice")
