"""The pages in a real browser (Debian's Chromium through Playwright):
the leaderboard follows a league live, the bot page draws its chart, the
replay viewer steps and hides what one seat could not see. Screenshots go to
/tmp/referee-screens/."""

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
    """Three sample bots and the service (a house bot and two teams), on loopback."""
    bg = Background()
    try:
        urls = bg.serve_bots({"house": "greedy", "ada": "random", "grace": "greedy"})
        db_path = tmp_path / "service.sqlite"
        token = new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition(
            "Class <3",
            league_text(name="class", rounds=2, concurrency=1, house={"house-greedy": urls["house"]}),
        )
        for name in ("ada", "grace"):
            team, _ = db.add_team(comp.id, name)
            db.add_submission(
                team.id, kind="url", url=urls[name], image=None, secret=None, note="", status="accepted"
            )
        db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        )
        yield {"base": base, "token": token, "cid": comp.id}
    finally:
        bg.close()


@pytest.mark.slow
def test_leaderboard_live_bot_page_and_replay_viewer(page: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    SCREENS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": 1280, "height": 900})
    base, cid = site["base"], site["cid"]

    # The leaderboard, before any run.
    page.goto(f"{base}/c/{cid}")
    expect(page.locator("h1")).to_contain_text("Class <3")
    expect(page.locator("#progress")).to_contain_text("no run yet")
    expect(page.locator("table.standings tr[data-bot]")).to_have_count(3)
    page.evaluate("window.__noReload = 1")

    # Start the league from the page; progress arrives by server-sent events.
    page.fill("form[data-admin-start] input[name=token]", site["token"])
    page.click("form[data-admin-start] button[type=submit]")
    expect(page.locator("form[data-admin-start] .result")).to_contain_text("started: 12 games")
    seen: set[int] = set()
    for _ in range(400):
        progress = page.locator("#progress")
        done = progress.get_attribute("data-done")
        if done is not None:
            seen.add(int(done))
        if progress.get_attribute("data-status") == "finished":
            break
        page.wait_for_timeout(25)
    expect(page.locator("#progress")).to_have_attribute("data-status", "finished", timeout=60_000)
    expect(page.locator("#progress .count")).to_have_text("12 / 12 games")
    assert page.evaluate("window.__noReload") == 1, "the page was reloaded"
    assert len(seen | {12}) >= 3, f"progress did not update as games finished: {sorted(seen)}"
    assert int(page.locator("#live").get_attribute("data-updates") or 0) >= 2
    games = page.locator("table.standings tr[data-bot] td.games")
    expect(games).to_have_count(3)
    assert [games.nth(k).inner_text() for k in range(3)] == ["8", "8", "8"]
    page.screenshot(path=str(SCREENS / "leaderboard.png"), full_page=True)

    # A bot page with its rating history.
    page.click("table.standings a:text-is('ada')")
    expect(page.locator("h1")).to_have_text("ada")
    expect(page.locator("#rating-chart polyline.mu")).to_have_count(1)
    points = page.locator("#rating-chart polyline.mu").get_attribute("points") or ""
    assert len(points.split()) == 8
    page.screenshot(path=str(SCREENS / "bot.png"), full_page=True)

    # A replay: step forward and back, then one seat's view.
    page.goto(f"{base}/c/{cid}")
    page.locator("table.games a:text-is('replay')").first.click()
    expect(page.locator("#step")).to_contain_text("step 0 / ")
    for _ in range(3):
        page.click("#next")
    expect(page.locator("#step")).to_contain_text("step 3 / ")
    page.click("#prev")
    expect(page.locator("#step")).to_contain_text("step 2 / ")
    for _ in range(14):
        page.click("#next")
    expect(page.locator("#step")).to_contain_text("step 16 / ")
    label = page.locator("#label").inner_text()
    assert "seat" in label
    # Full view: every hand's cards are shown.
    for s in (0, 1):
        hand = page.locator(f".seat[data-seat='{s}'] .hand")
        assert hand.locator(".card.face").count() == int(hand.get_attribute("data-count") or -1)
    assert page.locator(".seat .down .card.face").count() > 0
    # Seat 0's view: its own hand, the other hand hidden, every 3DOWN hidden.
    page.select_option("#mode", "0")
    mine = page.locator(".seat[data-seat='0'] .hand")
    other = page.locator(".seat[data-seat='1'] .hand")
    assert mine.locator(".card.face").count() == int(mine.get_attribute("data-count") or -1) > 0
    assert other.locator(".card.face").count() == 0
    assert other.locator(".card.back").count() == int(other.get_attribute("data-count") or -1) > 0
    assert page.locator(".seat .down .card.face").count() == 0
    page.screenshot(path=str(SCREENS / "replay.png"), full_page=True)
    # Back to the full view: the other hand is shown again.
    page.select_option("#mode", "full")
    assert other.locator(".card.face").count() > 0
    assert errors == [], errors


@pytest.mark.slow
def test_a_refused_live_stream_is_asked_again_later(page: Any, tmp_path: Path) -> None:
    """A page whose event stream is refused (503: the server has its limit;
    429 alike) asks again after the server's Retry-After, and follows the
    league once there is room: the browser alone would give up for good."""
    from playwright.sync_api import expect

    from referee.web.app_state import ROOM, STREAM_RETRY_S

    bg = Background()
    try:
        db_path = tmp_path / "service.sqlite"
        db = ServiceDB(db_path)
        comp = db.add_competition("Retry", league_text(name="retry", rounds=1, concurrency=1))
        db.close()
        apps: list[Any] = []

        def make() -> Any:
            apps.append(
                make_app(
                    db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK, max_streams=0)
                )
            )
            return apps[0]

        base = bg.serve(make)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/c/{comp.id}")
        live = page.locator("#live")
        expect(live).to_have_attribute("data-retries", "1", timeout=10_000)  # refused at once
        assert live.get_attribute("data-updates") is None
        apps[0][ROOM].settings.max_streams = 10  # room again
        # the next try comes 1-1.5x Retry-After later, and its stream's first update arrives
        for _ in range(int(STREAM_RETRY_S * 1.5 + 10) * 10):
            if live.get_attribute("data-updates") is not None:
                break
            page.wait_for_timeout(100)
        assert int(live.get_attribute("data-updates") or 0) >= 1, "the page did not ask for its stream again"
        assert live.get_attribute("data-retries") == "1"
        assert errors == [], errors
    finally:
        bg.close()
