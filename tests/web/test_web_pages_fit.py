"""Every page fits a phone (390 px) and a laptop (1,280 px) in a real browser
(Debian's Chromium through Playwright), issue 34 item 9: the document never
runs wider than the window; a table, a ``pre`` or a textarea stays inside its
box (a long token may scroll inside a box of its own with ``overflow:auto``);
and normal words never break in the middle ("sourc e").

The site (tests/support/layout.py) has long tokens in a report, a 64 KiB
build log, 60 refused submissions with long notes; the ladder plays, freezes,
and a final plays, so the final's standings (with their p95 column) show.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import pytest

from tests.support.layout import api, sign_in, site, until

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

__all__ = ["site"]  # the fixture: the layout site (long reports and logs, 60 refused submissions)

#: A phone's and a laptop's window.
WIDTHS = (390, 1280)

#: What does not fit on the page shown, as sentences ([] when it fits). A
#: table, pre or textarea must end inside its box: the nearest ancestor that
#: scrolls sideways on its own (a wrapper of its own, not ``main``, whose
#: scroll bar would hide the overflow) or else ``main``'s content; a word of
#: letters (at most 24 of them) must sit on one line.
MISFITS_JS = r"""
() => {
  const out = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth)
    out.push(`the document is ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
  const main = document.querySelector('main');
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const mr = main.getBoundingClientRect();
  const mainRight = mr.right - parseFloat(getComputedStyle(main).paddingRight);
  if (main.scrollWidth > main.clientWidth) {
    // name the outermost parts that stick out
    const clipped = (el) => {
      for (let a = el.parentElement; a && a !== main; a = a.parentElement) if (scrolls(a)) return true;
      return false;
    };
    const wide = Array.from(main.querySelectorAll('*')).filter(el =>
      el.getBoundingClientRect().right > mainRight + 1 && !clipped(el) &&
      (el.parentElement === main || el.parentElement.getBoundingClientRect().right <= mainRight + 1));
    out.push(`main is ${main.scrollWidth} px wide in ${main.clientWidth} px: ` +
      wide.slice(0, 3).map(el => `${name(el)} ends at ${Math.round(el.getBoundingClientRect().right)} px`).join(', '));
  }
  for (const el of main.querySelectorAll('table, pre, textarea')) {
    if (!el.getClientRects().length) continue;  // not shown
    let box = el.parentElement;
    while (box && box !== main && !scrolls(box)) box = box.parentElement;
    const right = el.getBoundingClientRect().right;
    const limit = box && box !== main ? box.getBoundingClientRect().right : mainRight;
    if (box && box !== main) {
      // a scrolling box of its own: it must itself fit main
      if (box.getBoundingClientRect().right > mainRight + 1)
        out.push(`${name(box)} (the box of ${name(el)}) ends at ${Math.round(box.getBoundingClientRect().right)} px, past main's ${Math.round(mainRight)} px`);
    } else if (right > limit + 1) {
      out.push(`${name(el)} ends at ${Math.round(right)} px, past main's ${Math.round(limit)} px`);
    }
    // on a laptop a table scrolls only for a long token, never for its columns (the final's p95)
    const own = scrolls(el) ? el : (box && box !== main ? box : null);
    if (window.innerWidth >= 1000 && el.tagName === 'TABLE' && own && own.scrollWidth > own.clientWidth + 1
        && !/\S{40}/.test(el.innerText))
      out.push(`${name(el)} needs a scroll bar (${own.scrollWidth} px in ${own.clientWidth} px) with no long token in it`);
  }
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  let broken = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest('pre, textarea, code, script, style, .card, svg')) continue;
    if (!parent.getClientRects().length) continue;
    const text = node.data;
    for (const m of text.matchAll(/[A-Za-z]{2,}/g)) {
      const before = m.index > 0 ? text[m.index - 1] : ' ';
      const after = text[m.index + m[0].length] || ' ';
      // a plain word: letters between spaces or punctuation, not part of a long token
      if (m[0].length > 24 || /[\w\/.-]/.test(before) || /[\w\/]/.test(after)) continue;
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1 && broken++ < 5)
        out.push(`"${m[0]}" breaks across lines in ${name(parent)}`);
    }
  }
  return out;
}
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_every_page_fits_a_phone_and_a_laptop(
    browser_type_launch_args: dict[str, Any], site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, cid, admin = site["base"], site["cid"], site["admin"]
    # the ladder plays, freezes; the final plays and ends
    api(base, "POST", f"/api/competitions/{cid}/open", admin)
    until(base, cid, lambda d: sum(s["games"] for s in d["standings"] if s["bot"] == "ada v2") >= 8)
    api(base, "POST", f"/api/competitions/{cid}/freeze", admin)
    ladder = until(base, cid, lambda d: d["run"]["status"] == "finished")["run"]["id"]
    api(base, "POST", f"/api/competitions/{cid}/final", admin)
    final = until(base, cid, lambda d: d["run"]["id"] != ladder and d["run"]["status"] == "finished", 240)
    bot = urllib.parse.quote(final["standings"][0]["bot"])
    tid = api(base, "GET", f"/api/competitions/{cid}/teams", admin)[0]["id"]

    public = {
        "the home page": "/",
        "the leaderboard (the final's standings)": f"/c/{cid}",
        "a bot page": f"/c/{cid}/bots/{bot}",
        "a replay": f"/c/{cid}/runs/{ladder}/games/0",
        "the TV page": f"/c/{cid}/tv",
        "the rules": "/rules",
        "the protocol": "/protocol",
        "the competition's rules": f"/c/{cid}/rules",
    }
    team = {
        "the team page": "/team",
        "a submission with its report and build log": f"/team/submissions/{site['ada_v2']}",
        "the team's games (diagnostics)": "/team/diagnostics",
        "practice": "/team/practice",
    }
    teacher = {
        "the admin home": "/admin",
        "the admin competition page": f"/admin/c/{cid}",
        "the admin team page": f"/admin/c/{cid}/teams/{tid}",
    }
    misfits: list[str] = []
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            for width in WIDTHS:
                for who, pages in ((None, public), ("ada", team), ("admin", teacher)):
                    ctx = browser.new_context(viewport={"width": width, "height": 800})
                    ctx.set_default_timeout(20_000)
                    page = ctx.new_page()
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    if who == "ada":
                        sign_in(page, base, site["ada"])
                    elif who == "admin":
                        sign_in(page, base, admin, "/admin/login")
                    for what, path in pages.items():
                        answer = page.goto(f"{base}{path}")
                        assert answer is not None and answer.status == 200, (what, path)
                        expect(page.locator("main")).to_be_visible()
                        misfits += [f"{what} ({path}) at {width} px: {m}" for m in page.evaluate(MISFITS_JS)]
                    ctx.close()
        finally:
            browser.close()
    assert not misfits, "\n".join(misfits)
    assert not errors, errors
