"""The head-to-head table in Chromium at a phone's width, 390 px (issue 35,
item 3): on a bot's page and its team's page nothing runs wider than the
window, and the filter form narrows the games to one opponent."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from tests.support.layout import api, sign_in, site, until

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

__all__ = ["site"]  # the fixture: a competition with a house bot and teams on loopback

WIDTH = 390


def fits(page: Any, what: str) -> None:
    """Neither the page nor the head-to-head table is wider than the window."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{what}: the page is {width} px wide at a {WIDTH} px window"
    table = page.evaluate(
        "(() => { const t = document.querySelector('table.h2h');"
        " return [t.getBoundingClientRect().right, t.scrollWidth, t.clientWidth]; })()"
    )
    assert table[0] <= WIDTH and table[1] <= table[2], f"{what}: the table overflows: {table}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_head_to_head_table_fits_a_390_px_window(
    browser_type_launch_args: dict[str, Any], site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, cid = site["base"], site["cid"]
    api(base, "POST", f"/api/competitions/{cid}/open", site["admin"])
    until(base, cid, lambda d: sum(s["games"] for s in d["standings"] if s["bot"] == "ada v2") >= 6)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            ctx = browser.new_context(viewport={"width": WIDTH, "height": 844})
            ctx.set_default_timeout(20_000)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/c/{cid}/bots/ada%20v2")
            expect(page.locator("table.h2h tr[data-opponent]").first).to_be_visible()
            expect(page.locator("p.help").first).to_contain_text("finished ahead of it")
            fits(page, "the bot page")
            opponent = page.locator("table.h2h tr[data-opponent]").first.get_attribute("data-opponent")
            assert opponent is not None
            page.select_option("#games-filter select[name=opponent]", opponent)
            page.click("#games-filter button[type=submit]")
            expect(page).to_have_url(re.compile(r"opponent="))
            seats = page.locator("table.games tr td:nth-child(2)")
            expect(seats.first).to_be_visible()
            assert all(opponent in s for s in seats.all_inner_texts())
            fits(page, "the bot page, filtered")
            sign_in(page, base, site["ada"])
            expect(page.locator("#who-you-lose-to")).to_be_visible()
            fits(page, "the team page")
        finally:
            browser.close()
    assert not errors, errors
