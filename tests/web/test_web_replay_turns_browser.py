"""The replay viewer and the bot agree on turn numbers (issue 35, item 5): a
bot records ``request.turn`` (PROTOCOL.md's ``turn``, what the docs tell a
bot to print) at each of its moves; the game is played and its replay
opened in Chromium; at each of that bot's moves the viewer says the same
turn. The viewer once showed the state's turn counter after the move,
which has moved on to the next turn when the move ends one."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from protocol import ActRequest, Rules, Timeouts
from referee.bots import HttpBot
from referee.match import play_match
from referee.replay import frames
from referee.replay import read as read_replay
from referee.web.viewer import standalone_html
from tests.support.web import serve

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")


async def play_recorded(replay: Path) -> list[int]:
    """A game of a bot that records each request's turn (seat 0) against greedy: those turns."""
    from sample_bots import greedy
    from sample_bots.sdk import make_app

    turns: list[int] = []

    def decide(request: ActRequest) -> Any:
        turns.append(request.turn)
        return greedy.decide(request)

    runners = []
    try:
        urls = []
        for app in (make_app(decide, greedy.INFO), make_app(greedy.decide, greedy.INFO)):
            runner, url = await serve(app)
            runners.append(runner)
            urls.append(url)
        async with aiohttp.ClientSession() as session:
            bots = [HttpBot(u, session=session) for u in urls]
            timeouts = Timeouts(move_ms=2000, start_ms=2000, end_ms=2000)
            await play_match(bots, 7, rules=Rules(), timeouts=timeouts, replay=replay)
    finally:
        for r in runners:
            await r.cleanup()
    return turns


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_viewer_labels_each_move_with_the_turn_its_bot_was_asked_at(
    browser_type_launch_args: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    replay = tmp_path / "game.jsonl.gz"
    turns = asyncio.run(play_recorded(replay))
    data = frames(read_replay(replay))
    mine = [i for i, f in enumerate(data["frames"]) if f["seat"] == 0]
    # the frames carry the protocol's turn: one frame per request, in order
    assert [data["frames"][i]["turn"] for i in mine] == turns
    # a move that ends a turn: the state after it counts the next turn already (what the viewer showed)
    ends = [i for i in mine if data["frames"][i]["full"]["turn"] != data["frames"][i]["turn"]]
    assert ends, "no move of seat 0 ended its turn: the game shows nothing"
    page_file = tmp_path / "replay.html"
    page_file.write_text(standalone_html(data))

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            expect(page.locator("#turn")).to_have_text("before turn 0")  # the deal
            slider = page.locator("#slider")
            for i, turn in zip(mine, turns, strict=True):
                slider.fill(str(i))
                expect(page.locator("#step")).to_have_text(f"step {i} / {len(data['frames']) - 1}")
                expect(page.locator("#turn")).to_have_text(f"turn {turn}")
                # and no other turn number on the page for this move
                assert "turn " not in page.locator("#centre").inner_text()
        finally:
            browser.close()
    assert not errors, errors
