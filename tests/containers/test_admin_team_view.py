"""The teacher sees what a team sees (issue 25, item 6), for an upload: a
team's Python source zip is built and checked for real, and the admin's
page of that submission shows its build log and report; the team's own
token and session never reach it."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import auth, new_competition, new_team, signed_in
from tests.support.builds import make_zip, python_bot_files
from tests.support.containers import upload_settled

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(service_client: Callable[..., Awaitable[Any]]) -> Any:
    return await service_client()


async def test_the_admin_sees_an_uploads_build_log_and_report(client: Any, tmp_path: Path) -> None:
    cid = await new_competition(client, client.admin)
    tid, token = await new_team(client, client.admin, cid, "ada")
    zipped = make_zip(tmp_path / "bot.zip", python_bot_files())
    done = await upload_settled(client, cid, tid, token, zipped.read_bytes(), note="zipped v1")
    assert done["submission"]["status"] == "accepted" and done["log"], done
    path = f"/admin/c/{cid}/teams/{tid}/submissions/{done['submission']['id']}"
    r = await client.get(path, headers=auth(token), allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/admin/login"
    await signed_in(client, client.admin)
    page = html.unescape(await (await client.get(path)).text())
    assert 'id="log"' in page and 'id="report"' in page
    assert done["log"].strip().splitlines()[-1] in page  # the very log the team reads
    listing = html.unescape(await (await client.get(f"/admin/c/{cid}/teams/{tid}")).text())
    assert "zipped v1" in listing and "source" in listing
