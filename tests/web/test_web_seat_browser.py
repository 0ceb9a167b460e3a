"""A team member takes a seat at a practice game in a real browser (issue 36):
from the practice page, against a house bot, each move chosen from the legal
actions the page offers (cards played together by selecting them), to the
game's end, then its replay. Another team's session can neither open the
seat's page nor its WebSocket. The screenshot of the table is
``docs/seat.png`` (the student's guide shows it), rewritten with
``--update-golden`` only."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, league_text, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

#: The states of the page in which the test acts: a move to make, or the game over.
_MOVE_OR_DONE = re.compile("^(move|over|recorded)$")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A house bot, team "ada" (no bot yet: a person may still play) and team "bob"."""
    bg = Background()
    try:
        urls = bg.serve_bots({"house": "greedy"})
        db_path = tmp_path / "service.sqlite"
        new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Class", league_text(name="class", house={"house-greedy": urls["house"]}))
        _, token = db.add_team(comp.id, "ada")
        _, other = db.add_team(comp.id, "bob")
        db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        )
        yield {"base": base, "token": token, "other": other, "db": db_path}
    finally:
        bg.close()


def sign_in(page: Any, base: str, token: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/login")
    page.fill("input[type=password][name=token]", token)
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(f"{base}/team")


@pytest.mark.slow
def test_a_person_plays_a_whole_practice_game_in_the_browser_and_opens_its_replay(
    browser: Any, site: dict[str, Any], docs_screenshot: Callable[[str], Path]
) -> None:
    from playwright.sync_api import expect

    base = site["base"]
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    sign_in(page, base, site["token"])
    page.click("a#practice")
    form = page.locator("#seat-form")
    labels = form.locator("select[name=opponent] option").all_inner_texts()
    assert labels == ["house bot house-greedy"], labels
    form.locator("button[type=submit]").click()
    expect(page).to_have_url(f"{base}/team/practice/1/play")
    play_url = page.url

    # another team's session can neither see the table nor drive the seat
    intruder = browser.new_page()
    sign_in(intruder, base, site["other"])
    answer = intruder.goto(play_url)
    assert answer is not None and answer.status == 404
    refused = intruder.evaluate(
        """url => new Promise(done => {
             const ws = new WebSocket(url);
             ws.onmessage = () => done("message");
             ws.onopen = () => setTimeout(() => done("open"), 300);
             ws.onerror = () => done("refused");
           })""",
        play_url.replace("http", "ws").replace("/play", "/seat"),
    )
    assert refused == "refused", refused
    intruder.close()

    root = page.locator("#seat")
    moves = together = 0
    shot = False
    while True:
        expect(root).to_have_attribute("data-state", _MOVE_OR_DONE, timeout=30_000)
        if root.get_attribute("data-state") in ("over", "recorded"):
            break
        seen = root.get_attribute("data-request")
        buttons = page.locator("#seat-actions button.action")
        assert buttons.count() >= 1
        plays = page.locator("#seat-actions button.action[data-type=play]")
        if plays.count() and together < 3:
            # cards played together: select them in the hand or the 3UP, then "play the selected cards"
            cards = plays.first.inner_text().removeprefix("play ").split()
            for c in cards:
                page.locator(f"#seat-you [data-card='{c}']").first.click()
            expect(page.locator("#play-selected")).to_be_enabled()
            if not shot:
                page.screenshot(path=str(docs_screenshot("seat.png")))
                shot = True
            page.click("#play-selected")
            together += 1
        else:
            buttons.first.click()
        moves += 1
        page.wait_for_function(
            """seen => { const r = document.getElementById("seat");
                         return r.dataset.request !== seen || r.dataset.state !== "move"; }""",
            arg=seen,
            timeout=30_000,
        )
    expect(root).to_have_attribute("data-state", "recorded", timeout=30_000)
    assert moves > 3 and together >= 1, (moves, together)
    assert "game over: you placed" in page.locator("#seat-status").inner_text()
    page.click("#seat-replay")
    expect(page.locator("h1")).to_contain_text("Replay")
    assert "?game=0&seat=" in page.url
    db = ServiceDB(site["db"])
    try:
        from referee.service.store.practice import get_game

        game = get_game(db, 1)
    finally:
        db.close()
    assert game is not None and game.status == "finished", game
    assert game.seats[0].kind == "human" and len(game.results) == 1
    page.goto(f"{base}/team/practice")
    expect(page.locator("#practice-games tr.status-finished")).to_contain_text("you played")
