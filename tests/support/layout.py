"""The pages-in-a-browser tests' site and steps (tests/web/test_web_pages_layout.py
and the other layout tests): a competition with long reports and logs, and
the API and sign-in steps they share."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from referee.admission import AdmissionLine, AdmissionReport
from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.web import LOOPBACK, Background, league_text, new_admin_token, sample_bot_app

WIDTH = 1280
#: A token no browser can break at a space.
LONG = "x" * 3000
#: 64 KiB of build log in lines of 400 characters with no space in them.
LOG = "\n".join(f"Step {i}: " + "y" * 400 for i in range(160))


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A competition with a house bot; ada's v1 (submission 1), bea's v1 and
    v2 (2 and 3), ada's v2 (4, with a long report and build log), all URL
    bots on loopback admitted earlier; cy, with 60 refused submissions."""
    bg = Background()
    try:
        house = bg.serve(lambda: sample_bot_app("greedy"))
        other = bg.serve(lambda: sample_bot_app("random"))
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        try:
            comp = db.add_competition(
                "Class", league_text(name="class", rounds=1, concurrency=2, house={"house-greedy": house})
            )
            ada, ada_token = db.add_team(comp.id, "ada")
            bea, bea_token = db.add_team(comp.id, "bea")
            cy, cy_token = db.add_team(comp.id, "cy")
            sids = []
            for team, url in ((ada, other), (bea, other), (bea, house), (ada, house)):
                sub = db.add_submission(
                    team.id, kind="url", url=url, image=None, secret=None, note="", status="accepted"
                )
                assert sub is not None
                sids.append(sub.id)
            report = AdmissionReport(
                ok=True,
                games=2,
                seconds=1.0,
                lines=[
                    AdmissionLine(ok=True, what="handshake", detail=f"answered {LONG}"),
                    AdmissionLine(ok=True, what=LONG[:200], detail="a\n" + LONG, fix=LONG),
                ],
            )
            db.update_submission(sids[3], report=msgspec.json.encode(report).decode(), log=LOG)
            for i in range(60):
                db.add_submission(
                    cy.id,
                    kind="url",
                    url=f"http://127.0.0.1:9/{i}",
                    image=None,
                    secret=None,
                    note=f"try {i + 1} " + LONG[:400],
                    status="refused",
                )
            db.update_submission(sids[3] + 60, reason="start: " + LONG)  # cy's newest: a long reason
        finally:
            db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK, validation_games=2))
        )
        yield {
            "base": base,
            "admin": admin,
            "cid": comp.id,
            "ada": ada_token,
            "bea": bea_token,
            "cy": cy_token,
            "ada_v2": sids[3],
        }
    finally:
        bg.close()


def api(base: str, method: str, path: str, token: str) -> Any:
    req = urllib.request.Request(
        f"{base}{path}",
        method=method,
        headers={"Authorization": f"Bearer {token}"},
        data=b"" if method == "POST" else None,
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def until(base: str, cid: int, cond: Any, timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        data = api(base, "GET", f"/api/competitions/{cid}", "")
        if cond(data):
            return dict(data)
        assert time.monotonic() < deadline, data
        time.sleep(0.2)


def fits(page: Any, what: str) -> None:
    """The page is no wider than the window, and nothing in its main part
    needs a scroll bar of the main part's own (long lines wrap or scroll in
    their own box)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{what}: {width} px wide at a {WIDTH} px window"
    main = page.evaluate(
        "[document.querySelector('main').scrollWidth, document.querySelector('main').clientWidth]"
    )
    assert main[0] <= main[1], f"{what}: its main part is {main[0]} px wide in {main[1]} px"


def sign_in(page: Any, base: str, token: str, path: str = "/login") -> None:
    page.goto(f"{base}{path}")
    page.fill("input[type=password][name=token]", token)
    page.click(f"form[action='{path}'] button[type=submit]")
    page.wait_for_load_state()
