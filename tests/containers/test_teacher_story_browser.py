"""Issue 25's acceptance test: a class runs unattended, the teacher's side,
walked end to end in a real browser (Debian's Chromium through Playwright)
against a real ``referee serve`` subprocess and the real Docker daemon.

The teacher works on the admin pages; the teams act through the API (their
uploads) and their own pages. The story:

1. the admin signs in, creates a competition from a league file with a house
   bot, adds three teams (their tokens shown once);
2. two teams upload source bots; one of them has a syntax error: refused with
   its reason, which the admin reads on that team's page (the submission, its
   report and build log);
3. **a service fault**: the service is restarted with Docker unreachable
   (``DOCKER_HOST`` at a dead socket): the third team's upload is
   ``waiting``, ``/admin`` shows the banner with the cause, the team's page
   says nothing is wrong with its bot; then **the restart** with the real
   Docker: the waiting submission goes on by itself and is accepted, and the
   banner is gone;
4. the admin opens the competition (the ladder plays: games on the
   leaderboard), edits the league file (a new version listed), renames a
   team, and sets the deadlines on the Deadlines panel (the countdown shows);
5. the deadlines pass: the competition freezes and starts its final by
   itself; the final's page reads the settled ranks and the adjudicated line;
   the standings CSV has team id, team, version, submission and house columns
   (house flagged, ``?house=0`` leaves it out, the first row's
   ``separated_above`` empty);
6. ``referee backup`` of the running service makes a folder with a manifest.

Every wait is bounded but generous (the machine is shared); the images and
containers of this test's instance are removed at the end. Screenshots go to
/tmp/referee-screens/."""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots import free_port
from referee.bots.sandbox.instance import INSTANCE_LABEL
from referee.service.store import ServiceDB
from tests.support.builds import make_zip, python_bot_files
from tests.support.web import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    Background,
    new_admin_token,
    referee_cli,
    sample_bot_app,
    wait_for_http,
)

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCREENS = Path("/tmp/referee-screens")
#: The longest any one step may take (seconds): the first build of an
#: instance also builds its base and SDK images, on a shared machine.
STEP_S = 420.0


@pytest.fixture
def chromium(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Playwright's launch arguments for Debian's Chromium (skips without it; fails under CI=true)."""
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: apt-get install -y chromium (browser tests need Debian's Chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_FLAGS],
    }


class Service:
    """``referee serve`` over `db` in a subprocess with its own environment
    (``docker_host`` None: the real daemon), stderr appended to a log."""

    def __init__(self, tmp: Path, db: Path, *, docker_host: str | None, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = tmp / "serve.err"
        self._err = self.log.open("ab")
        env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        if docker_host is not None:
            env["DOCKER_HOST"] = docker_host
        env["PYTHONPATH"] = str(ROOT)
        self.proc = subprocess.Popen(
            referee_cli(
                "serve", "--db", str(db), "--port", str(port), "--house-urls-anywhere", "--fault-retry", "1"
            ),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
        )
        wait_for_http(
            self.proc,
            f"{self.base}/",
            self.log,
            what="referee serve",
            within_s=90,
            request_timeout_s=5,
            pause_s=0.3,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("referee serve did not end within 120 s of SIGTERM") from None
        self._err.close()

    def api(self, method: str, path: str, token: str | None = None, data: bytes | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def raw(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"{self.base}{path}", timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


def poll(what: str, probe: Callable[[], Any], timeout: float = STEP_S, every: float = 0.5) -> Any:
    """`probe()` until it is truthy, at most `timeout` seconds (then fail naming `what` and the last value)."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s (last: {got!r})"
        time.sleep(every)


def visit(page: Any, url: str) -> Any:
    """``page.goto(url)``, again when a page's own refresh (``<meta http-equiv=refresh>`` while a
    submission is pending) aborted it: at most 5 tries."""
    from playwright.sync_api import Error

    for attempt in range(5):
        try:
            return page.goto(url)
        except Error as e:
            if "ERR_ABORTED" not in str(e) or attempt == 4:
                raise
            time.sleep(0.5)
    return None


def utc(seconds: float) -> str:
    when = datetime.datetime.fromtimestamp(time.time() + seconds, datetime.UTC).replace(microsecond=0)
    return when.isoformat().replace("+00:00", "Z")


def league(house_url: str, move_ms: int = 1000) -> str:
    return "\n".join(
        [
            "[tournament]",
            'name = "story"',
            "seed = 5",
            "table_size = 2",
            "rounds = 1",
            "concurrency = 2",
            "",
            "[timeouts]",
            f"move_ms = {move_ms}",
            "",
            "[[bots]]",
            'name = "house-greedy"',
            f'url = "{house_url}"',
            "",
        ]
    )


@pytest.fixture
def story(tmp_path: Path, docker_client: Any) -> Iterator[dict[str, Any]]:
    """A fresh service database (its admin token), a house bot on loopback;
    afterwards every image and container of this service's instance is removed."""
    db_path = tmp_path / "class.sqlite"
    admin = new_admin_token(db_path)
    db = ServiceDB(db_path)
    try:
        instance = db.instance_id()
    finally:
        db.close()
    bg = Background()
    services: list[Service] = []
    try:
        house = bg.serve(lambda: sample_bot_app("greedy"))
        yield {
            "db": db_path,
            "admin": admin,
            "house": house,
            "tmp": tmp_path,
            "services": services,
            "port": free_port(),
        }
    finally:
        for svc in services:
            try:
                svc.stop()
            except AssertionError:
                pass
        bg.close()
        from referee.bots.sandbox import docker_daemon
        from tests.support.browser import remove_team_images

        left = docker_daemon.cleanup_containers({INSTANCE_LABEL: instance})
        remove_team_images(db_path)
        assert not left, f"containers left behind: {left}"


def test_a_class_runs_unattended_from_the_first_upload_to_the_grade(
    chromium: dict[str, Any], story: dict[str, Any]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    SCREENS.mkdir(parents=True, exist_ok=True)
    tmp, db_path, services = story["tmp"], story["db"], story["services"]
    t0 = time.monotonic()
    marks: dict[str, float] = {}

    def start(docker_host: str | None) -> Service:
        svc = Service(tmp, db_path, docker_host=docker_host, port=story["port"])
        services.append(svc)
        return svc

    def submission(svc: Service, cid: int, tid: int, token: str, sid: int) -> dict[str, Any]:
        return dict(
            svc.api("GET", f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", token)["submission"]
        )

    def settled(svc: Service, cid: int, tid: int, token: str, sid: int) -> dict[str, Any]:
        return dict(
            poll(
                f"submission {sid} checked",
                lambda: (
                    s
                    if (s := submission(svc, cid, tid, token, sid))["status"] in ("accepted", "refused")
                    else None
                ),
            )
        )

    def upload(svc: Service, cid: int, tid: int, token: str, zipped: Path) -> int:
        return int(
            svc.api(
                "POST", f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source", token, zipped.read_bytes()
            )["id"]
        )

    svc = start(None)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**chromium)
        try:
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            ctx.set_default_timeout(60_000)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            base = svc.base

            # 1. the admin signs in, creates the competition, adds three teams
            visit(page, f"{base}/admin/login")
            page.fill("input[name=token]", story["admin"])
            page.click("form[action='/admin/login'] button[type=submit]")
            expect(page).to_have_url(f"{base}/admin")
            expect(page.locator("#service-banner")).to_have_count(0)
            text = league(story["house"])
            page.fill("#new-competition input[name=name]", "Story class")
            page.fill("#new-competition textarea[name=league]", text)
            page.click("#new-competition button[type=submit]")
            expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/admin/c/\d+$"))
            cid = int(page.url.rsplit("/", 1)[1])
            page.fill("#add-teams textarea[name=names]", "ada\nbo\ncy")
            page.click("#add-teams button[type=submit]")
            rows = page.locator("#tokens table tr")
            expect(rows).to_have_count(4)
            teams: dict[str, tuple[int, str]] = {}
            for i in range(1, 4):
                cells = rows.nth(i).locator("td")
                teams[cells.nth(1).inner_text()] = (int(cells.nth(0).inner_text()), cells.nth(2).inner_text())
            assert set(teams) == {"ada", "bo", "cy"}
            page.screenshot(path=str(SCREENS / "story-1-tokens.png"), full_page=True)
            page.reload()
            expect(page.locator("#tokens")).to_have_count(0)  # shown once
            marks["1 created"] = time.monotonic() - t0

            # 2. ada uploads a good bot, bo one with a syntax error: refused, the admin reads why
            (ada, ada_token), (bo, bo_token), (cy, cy_token) = teams["ada"], teams["bo"], teams["cy"]
            good = make_zip(tmp / "good.zip", python_bot_files("story-greedy"))
            broken = make_zip(tmp / "broken.zip", {"bot.py": "def act(:\n    pass\n"})
            ada_sid = upload(svc, cid, ada, ada_token, good)
            bo_sid = upload(svc, cid, bo, bo_token, broken)
            assert settled(svc, cid, ada, ada_token, ada_sid)["status"] == "accepted"
            refused = settled(svc, cid, bo, bo_token, bo_sid)
            assert refused["status"] == "refused" and "Python could not compile" in refused["reason"], refused
            visit(page, f"{base}/admin/c/{cid}")
            page.click(f"#teams a[href='/admin/c/{cid}/teams/{bo}']")
            expect(page.locator("#team-name")).to_have_text("bo")
            expect(page.locator("#submissions")).to_contain_text("refused")
            page.click("#submissions td a")
            expect(page.locator("h1")).to_contain_text("refused")
            expect(page.locator("#reason")).to_contain_text("Python could not compile")
            expect(page.locator("#log")).to_contain_text(
                "SyntaxError: invalid syntax"
            )  # the build log, line 1
            # and ada's accepted one: its admission report, line by line
            visit(page, f"{base}/admin/c/{cid}/teams/{ada}/submissions/{ada_sid}")
            expect(page.locator("h1")).to_contain_text("accepted")
            expect(page.locator("#report")).to_be_visible()
            expect(page.locator("#log")).to_be_visible()
            visit(page, f"{base}/admin/c/{cid}/teams/{bo}/submissions/{bo_sid}")
            page.screenshot(path=str(SCREENS / "story-2-refused.png"), full_page=True)
            marks["2 uploads checked"] = time.monotonic() - t0

            # 3. a service fault: restarted with Docker unreachable, cy's upload waits
            svc.stop()
            svc = start(f"unix://{tmp / 'nothing.sock'}")
            cy_sid = upload(svc, cid, cy, cy_token, good)
            waiting = poll(
                "cy's upload waiting",
                lambda: (
                    s if (s := submission(svc, cid, cy, cy_token, cy_sid))["status"] == "waiting" else None
                ),
                120,
            )
            assert waiting["reason"].startswith(
                "nothing is wrong with your bot: the server could not check it"
            ), waiting
            visit(page, f"{base}/admin")  # the admin's cookie outlives the restart
            expect(page).to_have_url(f"{base}/admin")
            banner = page.locator("#service-banner")
            expect(banner).to_be_visible()
            expect(banner).to_contain_text("Docker is not reachable")
            expect(banner).to_contain_text("1 submission(s) wait")
            page.screenshot(path=str(SCREENS / "story-3-banner.png"), full_page=True)
            team_ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            team_ctx.set_default_timeout(60_000)
            team = team_ctx.new_page()
            team.on("pageerror", lambda e: errors.append(str(e)))
            visit(team, f"{base}/login")
            team.fill("input[name=token]", cy_token)
            team.click("form[action='/login'] button[type=submit]")
            expect(team).to_have_url(f"{base}/team")
            visit(team, f"{base}/team/submissions/{cy_sid}")
            expect(team.locator("h1 .status")).to_have_text("waiting")
            expect(team.locator("#reason")).to_contain_text(
                "Waiting, not refused: nothing is wrong with your bot"
            )
            expect(team.locator("#reason")).to_contain_text("it will be retried at")
            team.screenshot(path=str(SCREENS / "story-3-team-waiting.png"), full_page=True)
            marks["3 fault seen"] = time.monotonic() - t0

            # ... the restart, with the real Docker: it goes on by itself, the banner goes
            svc.stop()
            svc = start(None)
            assert settled(svc, cid, cy, cy_token, cy_sid)["status"] == "accepted"
            poll(
                "the banner gone",
                lambda: (visit(page, f"{base}/admin"), page.locator("#service-banner").count() == 0)[1],
                120,
                every=1,
            )
            visit(team, f"{base}/team/submissions/{cy_sid}")
            expect(team.locator("h1 .status")).to_have_text("accepted")
            marks["3 after the restart, accepted"] = time.monotonic() - t0

            # 4. the admin opens it: the ladder plays; edits the league file; renames a team
            visit(page, f"{base}/admin/c/{cid}")
            page.click("form#open button[type=submit]")
            expect(page.locator("#phase")).to_have_attribute("data-phase", "open")
            board = ctx.new_page()
            board.on("pageerror", lambda e: errors.append(str(e)))
            visit(board, f"{base}/c/{cid}")
            expect(board.locator("#progress .count")).not_to_have_text("0 games", timeout=int(STEP_S * 1000))
            expect(board.locator("#standings, table").first).to_contain_text("house-greedy")
            marks["4 ladder games"] = time.monotonic() - t0
            visit(page, f"{base}/admin/c/{cid}")
            page.locator("#edit-league textarea[name=league]").fill(league(story["house"], move_ms=800))
            page.click("#edit-league button[type=submit]")
            expect(page.locator("#versions tr[data-version]")).to_have_count(2)
            visit(page, f"{base}/admin/c/{cid}/teams/{ada}")
            page.fill("#rename input[name=name]", "ada lovelace")
            page.click("#rename button[type=submit]")
            expect(page.locator("#team-name")).to_have_text("ada lovelace")
            # the deadlines, on the Deadlines panel: the pages count down
            visit(page, f"{base}/admin/c/{cid}")
            form = page.locator("form#deadlines-form")
            form.locator("input[name=freeze_at]").fill(utc(25))
            form.locator("input[name=final_at]").fill(utc(40))
            form.locator("button[type=submit]").first.click()
            expect(page.locator("#deadlines")).to_contain_text("Set here")
            visit(board, f"{base}/c/{cid}")
            expect(board.locator("#countdown [data-kind=freeze] .countdown-text")).to_contain_text(
                "Submissions close"
            )
            board.screenshot(path=str(SCREENS / "story-4-ladder.png"), full_page=True)

            # 5. the deadlines pass: it freezes and starts its final by itself
            def final_run() -> Any:
                data = svc.api("GET", f"/api/competitions/{cid}")
                finals = [r for r in data["runs"] if r.get("kind") == "final"]
                return finals[-1] if finals and finals[-1]["status"] == "finished" else None

            run = poll("the final, started by itself and finished", final_run, STEP_S * 2, every=2)
            rid = run["id"]
            marks["5 final finished"] = time.monotonic() - t0
            visit(board, f"{base}/c/{cid}?run={rid}")
            expect(board.locator("#reading")).to_contain_text("settled")
            expect(board.locator("#reading")).to_contain_text("Benjamini–Hochberg")
            expect(board.locator("#adjudicated")).to_contain_text("adjudicated")
            expect(board.locator("#settledness")).to_be_visible()
            board.screenshot(path=str(SCREENS / "story-5-final.png"), full_page=True)
            visit(page, f"{base}/admin/c/{cid}")
            expect(page.locator("#phase")).to_have_attribute("data-phase", "final")
            href = page.locator("#final-csv").get_attribute("href")
            teams_href = page.locator("#final-csv-teams").get_attribute("href")
            assert href == f"/api/competitions/{cid}/runs/{rid}/standings.csv", href
            assert teams_href == f"{href}?house=0", teams_href
            status, body = svc.raw(href)
            assert status == 200, body
            rows_csv = list(csv.DictReader(io.StringIO(body)))
            header = list(csv.reader(io.StringIO(body)))[0]
            assert header[-5:] == ["team_id", "team", "version", "submission", "house"], header
            by_team = {r["team"]: r for r in rows_csv}
            assert set(by_team) == {"ada lovelace", "cy", ""}, rows_csv  # bo has no accepted version
            assert by_team["ada lovelace"]["team_id"] == str(ada) and by_team["ada lovelace"]["house"] == ""
            assert by_team["ada lovelace"]["submission"] == str(ada_sid)
            assert by_team["cy"]["version"] == "v1" and by_team["cy"]["submission"] == str(cy_sid)
            assert by_team[""]["bot"] == "house-greedy" and by_team[""]["house"] == "yes"
            assert rows_csv[0]["separated_above"] == "" and rows_csv[-1]["separated_below"] == ""
            status, body = svc.raw(teams_href)
            assert status == 200, body
            teams_only = list(csv.DictReader(io.StringIO(body)))
            assert sorted(r["team"] for r in teams_only) == ["ada lovelace", "cy"], teams_only
            assert errors == []

            # 6. a backup of the running service
            out = tmp / "backups" / "today"
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from referee.cli import main; main()",
                    "backup",
                    "--db",
                    str(db_path),
                    str(out),
                ],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            manifest = json.loads((out / "manifest.json").read_text())
            names = {f["path"] for f in manifest["files"]}
            assert "service.sqlite" in names, names
            assert f"data/competition-{cid}/final-{rid}/tournament.sqlite" in names, (
                names
            )  # the final's games
            for f in manifest["files"]:
                assert (out / f["path"]).stat().st_size == f["size"], f
            marks["6 backup"] = time.monotonic() - t0
        finally:
            browser.close()
    print(
        "\nthe story's steps, seconds from the start: " + "; ".join(f"{k}: {v:.0f}" for k, v in marks.items())
    )
