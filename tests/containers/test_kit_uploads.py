"""The starter kits, downloaded from the team page and uploaded unchanged
through the service's upload API, are built, pass the admission check and
are accepted (issue 26, item 2). Real Docker; the Node kit only where
``node`` is on the machine (the Node base image is made from it)."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.api import auth, new_competition, new_team
from tests.support.containers import upload_settled

pytestmark = [
    pytest.mark.slow,
    pytest.mark.runtime_sensitive,
]  # its result can differ under gVisor: the runsc pass of .ci/run runs it again


@pytest.fixture
async def client(service_client: Callable[..., Awaitable[Any]]) -> Any:
    return await service_client()


KITS = [
    "python",
    pytest.param(
        "node", marks=pytest.mark.skipif(shutil.which("node") is None, reason="no node on this machine")
    ),
]


@pytest.mark.parametrize("kit", KITS)
async def test_the_starter_kit_uploaded_unchanged_is_accepted(client: Any, kit: str) -> None:
    cid = await new_competition(client, client.admin)
    tid, token = await new_team(client, client.admin, cid, f"kit {kit}")
    origin = {"Origin": str(client.make_url("")).rstrip("/")}
    r = await client.post("/login", data={"token": token}, headers=origin, allow_redirects=False)
    assert r.status == 303, await r.text()
    r = await client.get(f"/team/kit/{kit}.zip")  # what the team page's link gives
    assert r.status == 200, await r.text()
    archive = await r.read()
    done = await upload_settled(client, cid, tid, token, archive, note="the starter kit, unchanged")
    assert done["submission"]["status"] == "accepted", done
    assert all(line["ok"] for line in done["report"]["lines"]), done["report"]
    own = await (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(token))).json()
    assert own["playing"]["id"] == done["submission"]["id"]
