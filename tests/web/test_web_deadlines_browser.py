"""The deadlines in a real browser (Debian's Chromium through Playwright;
issue 25, item 5): the teacher sets them on the admin page, the leaderboard
and the team page show a countdown that ticks (the page's script, no inline
script under the CSP), and the competition freezes by itself at the time.
Screenshots go to /tmp/referee-screens/."""

from __future__ import annotations

import datetime
import os
import re
import time
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
    """The service on loopback: a competition of two house bots and team "ada" (no bot yet)."""
    bg = Background()
    try:
        house = {
            "house-greedy": bg.serve(lambda: sample_bot_app("greedy")),
            "house-random": bg.serve(lambda: sample_bot_app("random")),
        }
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        comp = db.add_competition("Timed", league_text(name="timed", concurrency=1, house=house))
        _, ada = db.add_team(comp.id, "ada")
        db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        )
        yield {"base": base, "admin": admin, "cid": comp.id, "ada": ada, "db": db_path}
    finally:
        bg.close()


def utc(seconds: float) -> str:
    when = datetime.datetime.fromtimestamp(time.time() + seconds, datetime.UTC).replace(microsecond=0)
    return when.isoformat().replace("+00:00", "Z")


@pytest.mark.slow
def test_the_teacher_sets_deadlines_and_the_pages_count_down(browser: Any, site: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    base, cid = site["base"], site["cid"]
    SCREENS.mkdir(exist_ok=True)
    errors: list[str] = []
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    teacher = ctx.new_page()
    teacher.on("pageerror", lambda e: errors.append(str(e)))
    teacher.goto(f"{base}/admin/login")
    teacher.fill("input[type=password][name=token]", site["admin"])
    teacher.click("form[action='/admin/login'] button[type=submit]")
    expect(teacher).to_have_url(f"{base}/admin")
    teacher.goto(f"{base}/admin/c/{cid}")
    form = teacher.locator("form#deadlines-form")
    # a time without its zone: refused, naming the field
    form.locator("input[name=freeze_at]").fill("2030-06-01T17:00:00")
    form.locator("button[type=submit]").first.click()
    expect(teacher.locator("body")).to_contain_text("'freeze_at'")
    expect(teacher.locator("body")).to_contain_text("no time zone")

    teacher.goto(f"{base}/admin/c/{cid}")
    freeze, final = utc(12), utc(3600 + 120)
    form.locator("input[name=freeze_at]").fill(freeze)
    form.locator("input[name=final_at]").fill(final)
    form.locator("button[type=submit]").first.click()
    expect(teacher).to_have_url(f"{base}/admin/c/{cid}")
    expect(teacher.locator("#deadlines input[name=freeze_at]")).to_have_value(freeze)
    expect(teacher.locator("#deadlines")).to_contain_text("Set here")
    expect(teacher.locator("#deadlines [data-kind=final] .countdown-text")).to_have_text(
        re.compile(r"^The final starts in 1 h 0[12] min$")
    )
    teacher.click("form#open button[type=submit]")
    expect(teacher.locator("#phase")).to_have_attribute("data-phase", "open")
    teacher.screenshot(path=str(SCREENS / "deadlines-admin.png"), full_page=True)

    # the public leaderboard: the countdown ticks
    public = ctx.new_page()
    public.on("pageerror", lambda e: errors.append(str(e)))
    public.goto(f"{base}/c/{cid}")
    clock = public.locator("#countdown [data-kind=freeze] .countdown-text")
    expect(clock).to_have_text(re.compile(r"^Submissions close in \d+ s$"))
    first = clock.inner_text()
    expect(clock).not_to_have_text(first, timeout=3000)  # a second later, by the page's script
    expect(public.locator("#countdown [data-kind=final]")).to_contain_text("(20")  # its time in UTC
    public.screenshot(path=str(SCREENS / "deadlines-leaderboard.png"), full_page=True)

    # the team's page: the same countdown
    team = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    team.on("pageerror", lambda e: errors.append(str(e)))
    team.goto(f"{base}/login")
    team.fill("input[type=password][name=token]", site["ada"])
    team.click("form[action='/login'] button[type=submit]")
    expect(team).to_have_url(f"{base}/team")
    expect(team.locator("#countdown [data-kind=freeze] .countdown-text")).to_have_text(
        re.compile(r"^Submissions close in \d+ s$")
    )

    # at the time: it freezes by itself; the countdown says so, the next page shows the phase
    expect(clock).to_have_text("Submissions are closing now", timeout=20_000)
    deadline = time.monotonic() + 30
    while True:
        db = ServiceDB(site["db"])
        comp = db.competition(cid)
        db.close()
        assert comp is not None
        if comp.phase == "frozen":
            break
        assert time.monotonic() < deadline, comp.phase
        time.sleep(0.1)
    team.reload()
    expect(team.locator("#closed")).to_contain_text("Submissions are closed")
    expect(team.locator("#countdown [data-kind=freeze]")).to_have_count(0)
    expect(team.locator("#countdown [data-kind=final] .countdown-text")).to_contain_text(
        "The final starts in"
    )
    team.screenshot(path=str(SCREENS / "deadlines-team.png"), full_page=True)

    # back to the league file's (none): no countdown
    teacher.goto(f"{base}/admin/c/{cid}")
    teacher.click("#deadlines-reset")
    expect(teacher.locator("#deadlines")).to_contain_text("From the league file")
    public.reload()
    expect(public.locator("#countdown")).to_have_count(0)
    assert errors == []
