"""The browser tests' steps (Playwright on Debian's Chromium): signing in,
submitting through the form, waiting for a submission to settle, and the
clean-up of a service instance's images."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from referee.service.store import ServiceDB

SCREENS = Path("/tmp/referee-screens")


PENDING = ("queued", "building", "checking")


#: How long one submission may take from the form to accepted or refused.
SETTLE_S = 120.0


#: Playwright's waits (ms): generous, as builds and other suites may load the machine.
EXPECT_MS = 15_000


ACTION_MS = 30_000


#: The statuses seen on the team page, by submission (printed at the end).
WATCHED: dict[int, list[str]] = {}


def docker_or_skip() -> Any:
    from referee.bots.sandbox import docker_daemon

    try:
        return docker_daemon.docker_client()
    except docker_daemon.DockerUnavailable as e:
        reason = f"the team-page browser test needs a Docker daemon (source builds, image bots): {e}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so this test must run, but: {reason}", pytrace=False)
        print(f"\nSKIP: {reason}")
        pytest.skip(reason)


def sign_in(page: Any, base: str, token: str, team: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/team")  # not signed in: sent to the form
    expect(page).to_have_url(f"{base}/login")
    page.fill("input[type=password][name=token]", token)
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(f"{base}/team")
    expect(page.locator("h1")).to_have_text(team)
    assert token not in page.url


def newest_id(page: Any) -> int:
    """The id of the newest submission in the table (its first row)."""
    href = page.locator("#submissions tr[class^='status-'] td a").first.get_attribute("href")
    return int(href.rsplit("/", 1)[1])


def submit_form(page: Any, *, kind: str, note: str, file: Path | None = None, url: str | None = None) -> int:
    """Fill the page's form, send it, and return the new submission's id."""
    from playwright.sync_api import expect

    before = newest_id(page) if page.locator("#submissions").count() else 0
    form = page.locator("form#submit")
    form.locator(f"input[type=radio][name=kind][value={kind}]").check()
    if file is not None:
        form.locator("input[type=file][name=file]").set_input_files(str(file))
    if url is not None:
        form.locator("input[name=url]").fill(url)
    form.locator("input[name=note]").fill(note)
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/team")
    expect(page.locator("#submissions")).to_be_visible()
    sid = newest_id(page)
    assert sid > before, (sid, before)
    return sid


def settle(page: Any, sid: int, timeout_s: float = SETTLE_S) -> list[str]:
    """Watch submission `sid`'s status on the team page, which reloads itself
    every 3 s while something is pending (no reload here), until it is
    accepted or refused: the statuses seen, in order."""
    from playwright.sync_api import Error

    status = page.locator(f"#submissions tr:has(td a[href='/team/submissions/{sid}']) .status")
    seen: list[str] = WATCHED.setdefault(sid, [])
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            text = status.inner_text(timeout=5000).strip()
        except Error:  # the page is reloading itself
            text = ""
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        if text and text not in PENDING:
            return seen
        assert time.monotonic() < deadline, f"submission {sid} still pending after {timeout_s:.0f} s: {seen}"
        page.wait_for_timeout(200)


def open_submission(page: Any, base: str, sid: int) -> None:
    from playwright.sync_api import expect

    page.click(f"#submissions a[href='/team/submissions/{sid}']")
    expect(page).to_have_url(f"{base}/team/submissions/{sid}")
    expect(page.locator("h1")).to_contain_text(re.compile(r"^Version v\d+: "))  # the team's own numbering


def remove_team_images(db_path: Path) -> None:
    """The images this test's service made: every tag of its instance (its
    teams', its base and SDK images), children first; best effort."""
    if not db_path.exists():
        return
    from referee.bots.sandbox.docker_daemon import docker_client
    from referee.service.pipeline import service_instance
    from tests.support.containers import remove_instance_images

    db = ServiceDB(db_path)
    try:
        inst = service_instance(db)
    finally:
        db.close()
    try:
        remove_instance_images(docker_client(), inst)
    except Exception:
        pass
