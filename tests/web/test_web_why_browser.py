"""Issue 26, items 4 and 5, in a real browser (Debian's Chromium through
Playwright) against the real service on loopback: a team uploads a source
bot that prints ``turn N`` on every ``/act``; its accepted check lists the
validation games; the replay from its seat shows, next to its move, what its
bot printed at that turn; the public replay of a game shows none of it.

Needs a Docker daemon (the source build, the container): without one the
test skips, unless ``CI=true``, when it fails.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support import PROGRAMS
from tests.support.browser import SCREENS, open_submission, settle, sign_in, submit_form

# isort: split
from tests.support.builds import make_zip

pytestmark = pytest.mark.slow

TALKER = (PROGRAMS / "talker.py").read_text()


def test_the_replay_from_the_teams_seat_shows_its_bots_lines_at_their_turn(
    browser_type_launch_args: dict[str, Any],
    site: dict[str, Any],
    patient_expect: None,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENS.mkdir(parents=True, exist_ok=True)
    base, tmp = site["base"], site["tmp"]
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            ctx.set_default_timeout(30_000)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            sign_in(page, base, site["ada"], "ada")
            sid = submit_form(
                page, kind="source", note="talker", file=make_zip(tmp / "talker.zip", {"bot.py": TALKER})
            )
            assert settle(page, sid)[-1] == "accepted"
            open_submission(page, base, sid)
            rows = page.locator("#validation-games tr[data-game]")
            expect(rows).to_have_count(2)
            expect(rows.first.locator("pre.output")).to_contain_text("turn ")
            rows.first.locator("a.replay").click()
            expect(page).to_have_url(re.compile(rf"/team/submissions/{sid}/games/1\?seat=\d"))
            said = page.locator("#bot-output-text")
            expect(said).to_be_visible()
            # step forward to the team's moves: what it printed at each, by the turn the request named
            matched = 0
            for _ in range(80):
                page.click("#next")
                turn = said.get_attribute("data-turn")
                if turn:
                    text = said.inner_text()
                    printed = re.findall(r"^turn (\d+) of ", text, re.M)
                    assert all(int(t) <= int(turn) for t in printed), (turn, text)
                    matched += turn in printed
                    expect(page.locator("#label")).to_contain_text("ada")
                if matched >= 3:
                    break
            assert matched >= 3
            page.screenshot(path=str(SCREENS / "why-replay-output.png"), full_page=True)
            # a line of the bot's output is text, never markup
            assert page.locator("#bot-output-text *").count() == 0
        finally:
            browser.close()
    assert not errors, errors
