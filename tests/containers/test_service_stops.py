"""Uploads survive every stop (issue 25, item 2), for real: a ``referee
serve`` subprocess is stopped by SIGTERM, SIGINT or kill -9 while a team's
source upload is ``building`` (the first build of an instance also builds its
base and SDK images: a long stage) and again while it is ``checking`` (the
bot is slow on purpose: its validation games take seconds). After each
restart the submission resumes and is accepted in the end; nothing says "the
uploaded file is gone"; and the start-up sweep leaves no orphan of this
instance: no image labelled for the submission but the one it recorded, no
container, no temporary build folder, no stray upload."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots import free_port
from referee.bots.sandbox.instance import INSTANCE_LABEL
from referee.service.store import ServiceDB
from tests.support.builds import PY_BOT, make_zip
from tests.support.web import league_text, new_admin_token, referee_cli, wait_for_http

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: The greedy play, 50 ms a move: 4 validation games last seconds (a stage a signal can hit).
SLOW_BOT = PY_BOT.replace(
    "def decide(request: ActRequest) -> int:\n",
    "def decide(request: ActRequest) -> int:\n    import time\n    time.sleep(0.05)\n",
)
#: Every wait of the test is bounded by this (seconds).
STAGE_S = 240.0


class Service:
    """``referee serve`` over `db`, its stderr appended to a log file."""

    def __init__(self, tmp: Path, db: Path) -> None:
        self.port = free_port()
        self.log = tmp / "serve.err"
        self._err = self.log.open("ab")
        self.proc = subprocess.Popen(
            referee_cli("serve", "--db", str(db), "--port", str(self.port)),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=self._err,
        )
        wait_for_http(
            self.proc, f"http://127.0.0.1:{self.port}/", self.log, what="referee serve", within_s=60
        )

    def stop(self, how: str) -> None:
        sig = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "kill -9": signal.SIGKILL}[how]
        self.proc.send_signal(sig)
        try:
            self.proc.wait(120)  # a graceful stop waits for the build thread: bounded
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"referee serve did not end within 120 s of {how}") from None
        finally:
            self._err.close()

    def api(self, method: str, path: str, token: str, data: bytes | None = None) -> Any:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())


def status(svc: Service, cid: int, tid: int, token: str, sid: int) -> dict[str, Any]:
    return dict(svc.api("GET", f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", token)["submission"])


def until(svc: Service, cid: int, tid: int, token: str, sid: int, wanted: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + STAGE_S
    seen = []
    while True:
        sub = status(svc, cid, tid, token, sid)
        if not seen or seen[-1] != sub["status"]:
            seen.append(sub["status"])
        if sub["status"] in wanted:
            return sub
        assert sub["status"] not in ("accepted", "refused", "superseded"), (sub, seen)
        assert time.monotonic() < deadline, (f"not {wanted} within {STAGE_S} s", seen)
        time.sleep(0.05)


@pytest.fixture
def site(tmp_path: Path, docker_client: Any) -> Iterator[dict[str, Any]]:
    db_path = tmp_path / "service.sqlite"
    admin = new_admin_token(db_path)
    db = ServiceDB(db_path)
    try:
        comp = db.add_competition("Class", league_text(name="class"))
        team, token = db.add_team(comp.id, "ada")
        instance = db.instance_id()
    finally:
        db.close()
    yield {
        "db": db_path,
        "admin": admin,
        "cid": comp.id,
        "tid": team.id,
        "token": token,
        "instance": instance,
    }
    from tests.support.browser import remove_team_images

    remove_team_images(db_path)


def orphans(client: Any, instance: str, sid: int, image_id: str) -> list[str]:
    """What of this instance is left that nothing needs."""
    left = []
    for image in client.images.list(
        all=True, filters={"label": [f"{INSTANCE_LABEL}={instance}", "referee.submission"]}
    ):
        if image.id != image_id:
            left.append(f"image {image.id} {image.tags} {image.labels.get('referee.submission')}")
    for c in client.containers.list(all=True, filters={"label": f"{INSTANCE_LABEL}={instance}"}):
        left.append(f"container {c.name}")
    return left


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "kill -9"])
def test_a_submission_stopped_while_building_and_while_checking_resumes_and_leaves_no_orphan(
    how: str, site: dict[str, Any], tmp_path: Path, docker_client: Any
) -> None:
    cid, tid, token = site["cid"], site["tid"], site["token"]
    zipped = make_zip(tmp_path / "bot.zip", {"bot.py": SLOW_BOT, "helper.py": "NAME = 'slow'\n"})
    svc = Service(tmp_path, site["db"])
    stages = []
    try:
        sid = svc.api(
            "POST", f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source", token, zipped.read_bytes()
        )["id"]
        stages.append(until(svc, cid, tid, token, sid, ("building",))["status"])
        time.sleep(0.5)
        assert status(svc, cid, tid, token, sid)["status"] == "building"  # still: the base images build
    finally:
        svc.stop(how)
    assert [p for p in tmp_path.rglob("upload-*") if p.is_file()], "the upload survived the stop"
    if how == "kill -9":  # nothing of the build's clean-up ran: its temporary folder is left, for the sweep
        assert list(tmp_path.rglob("referee-build-*")), "a kill -9 mid-build leaves its build folder"

    svc = Service(tmp_path, site["db"])
    try:
        sub = until(svc, cid, tid, token, sid, ("checking",))
        stages.append(sub["status"])
        time.sleep(1.0)
        assert status(svc, cid, tid, token, sid)["status"] == "checking"
    finally:
        svc.stop(how)
    if how == "kill -9":  # the check's container outlives its referee: the sweep's
        left = docker_client.containers.list(
            all=True, filters={"label": f"{INSTANCE_LABEL}={site['instance']}"}
        )
        assert left, "a kill -9 mid-check leaves the bot's container"

    svc = Service(tmp_path, site["db"])
    try:
        done = until(svc, cid, tid, token, sid, ("accepted", "refused"))
        assert done["status"] == "accepted", done
        assert done["image_id"] == sub["image_id"], "the check resumed with the image it recorded"
        log = svc.log.read_text()
        assert "the uploaded file is gone" not in json.dumps(done) + log
        assert not orphans(docker_client, site["instance"], sid, done["image_id"])
        assert not list(tmp_path.rglob("referee-build-*")), "no temporary build folder is left"
        assert not [p for p in tmp_path.rglob("upload-*") if p.is_file()], (
            "the upload goes with its image made"
        )
    finally:
        svc.stop("SIGTERM")
