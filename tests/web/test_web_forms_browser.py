"""The deadlines form in a real browser (Debian's Chromium; issue 34, item 7):
a time typed without its zone is refused with the message beside its field,
and both times stay as typed, ready to be corrected."""

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


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    bg = Background()
    try:
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Forms", league_text(name="forms"))
        db.close()
        base = bg.serve(lambda: make_app(db_path, Settings(bot_policy=LOOPBACK)))
        yield {"base": base, "admin": admin, "cid": comp.id}
    finally:
        bg.close()


@pytest.mark.slow
def test_a_deadline_without_its_zone_stays_as_typed_with_the_message_beside_it(
    browser: Any, site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    base, cid = site["base"], site["cid"]
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{base}/admin/login")
    page.fill("input[type=password][name=token]", site["admin"])
    page.click("form[action='/admin/login'] button[type=submit]")
    page.goto(f"{base}/admin/c/{cid}")
    form = page.locator("form#deadlines-form")
    form.locator("input[name=freeze_at]").fill("2030-06-01T17:00:00")
    form.locator("input[name=final_at]").fill("2030-06-02T17:00:00Z")
    form.locator("button[type=submit]").first.click()
    freeze = page.locator("form#deadlines-form input[name=freeze_at]")
    expect(freeze).to_have_value("2030-06-01T17:00:00")
    expect(page.locator("form#deadlines-form input[name=final_at]")).to_have_value("2030-06-02T17:00:00Z")
    expect(freeze).to_have_attribute("aria-invalid", "true")
    error = page.locator("form#deadlines-form #deadlines-error")
    expect(error).to_contain_text("no time zone")
    # beside its field: just below the freeze_at input, above the final_at one
    f, e, n = (
        freeze.bounding_box(),
        error.bounding_box(),
        page.locator("form#deadlines-form input[name=final_at]").bounding_box(),
    )
    assert f is not None and e is not None and n is not None
    assert f["y"] < e["y"] < n["y"]
    # corrected in place: accepted
    freeze.fill("2030-06-01T17:00:00+02:00")
    page.locator("form#deadlines-form button[type=submit]").first.click()
    expect(page.locator("#deadlines")).to_contain_text("Set here")
    expect(page.locator("#deadlines-error")).to_have_count(0)
