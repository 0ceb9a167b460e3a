"""A service fault in a real browser (Debian's Chromium through Playwright),
against a real service on loopback (issue 25, item 1): with the service's
Docker client pointed at a dead socket, a team's upload waits; the team's
submission page says that nothing is wrong with its bot and when it is tried
again, and ``/admin`` shows the banner with the exact cause; once Docker is
back the banner goes by itself. Screenshots go to /tmp/referee-screens/."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.builds import make_zip, python_bot_files
from tests.support.web import Background, league_text, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

pytestmark = pytest.mark.slow

SCREENS = Path("/tmp/referee-screens")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from tests.support.browser import docker_or_skip

    docker_or_skip()
    db_path = tmp_path / "service.sqlite"
    admin = new_admin_token(db_path)
    db = ServiceDB(db_path)
    try:
        comp = db.add_competition("Class", league_text(name="class"))
        team, token = db.add_team(comp.id, "ada")
    finally:
        db.close()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nothing.sock'}")
    bg = Background()
    try:
        base = bg.serve(
            lambda: make_app(db_path, Settings(validation_games=2, fault_retry_s=0.5, fault_retry_max_s=2.0))
        )
        yield {
            "base": base,
            "admin": admin,
            "cid": comp.id,
            "tid": team.id,
            "token": token,
            "monkeypatch": monkeypatch,
            "tmp": tmp_path,
        }
    finally:
        bg.close()
        monkeypatch.delenv("DOCKER_HOST", raising=False)
        from tests.support.browser import remove_team_images

        remove_team_images(db_path)


def test_the_admin_sees_the_banner_and_the_team_that_nothing_is_wrong_with_its_bot(
    browser_type_launch_args: dict[str, Any], site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENS.mkdir(parents=True, exist_ok=True)
    base, cid, tid, token = site["base"], site["cid"], site["tid"], site["token"]
    zipped = make_zip(site["tmp"] / "bot.zip", python_bot_files())
    req = urllib.request.Request(
        f"{base}/api/competitions/{cid}/teams/{tid}/uploads?kind=source",
        data=zipped.read_bytes(),
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        import json

        sid = json.loads(r.read())["id"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**browser_type_launch_args)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            ctx.set_default_timeout(30_000)
            page = ctx.new_page()
            # the team: its submission waits, and the page says why, plainly
            page.goto(f"{base}/login")
            page.fill("input[type=password][name=token]", token)
            page.click("form[action='/login'] button[type=submit]")
            expect(page).to_have_url(f"{base}/team")
            page.goto(f"{base}/team/submissions/{sid}")
            expect(page.locator("h1 .status")).to_have_text("waiting", timeout=30_000)
            reason = page.locator("#reason")
            expect(reason).to_contain_text(
                "Waiting, not refused: nothing is wrong with your bot: the server "
                "could not check it (Docker is not reachable"
            )
            expect(reason).to_contain_text("it will be retried at")
            page.screenshot(path=str(SCREENS / "faults-team-waiting.png"), full_page=True)
            # the admin: the banner, with the exact cause
            admin = ctx.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            admin.goto(f"{base}/admin/login")
            admin.fill("input[name=token]", site["admin"])
            admin.click("form button[type=submit]")
            expect(admin).to_have_url(f"{base}/admin")
            banner = admin.locator("#service-banner")
            expect(banner).to_be_visible()
            expect(banner).to_contain_text("The service is degraded since")
            expect(banner).to_contain_text("Docker is not reachable")
            expect(banner).to_contain_text("1 submission(s) wait")
            admin.screenshot(path=str(SCREENS / "faults-admin-banner.png"), full_page=True)
            # the public pages show no banner
            page.goto(f"{base}/")
            expect(page.locator("#service-banner")).to_have_count(0)
            # Docker back: the banner goes by itself (the next ping), the submission goes on
            site["monkeypatch"].delenv("DOCKER_HOST")
            deadline = time.monotonic() + 60
            while True:
                admin.goto(f"{base}/admin")
                if admin.locator("#service-banner").count() == 0:
                    break
                assert time.monotonic() < deadline, "the banner is still there 60 s after Docker came back"
                time.sleep(0.5)
            page.goto(f"{base}/team/submissions/{sid}")
            expect(page.locator("h1 .status")).to_have_text("accepted", timeout=180_000)
        finally:
            browser.close()
