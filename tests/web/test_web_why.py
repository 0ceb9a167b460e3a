"""Issue 26, items 4 to 6, through the service over HTTP: diagnostics of
every version of a team's bot (a version selector). The validation games
and the bot's output by turn: tests/containers/test_service_output.py,
tests/web/test_web_why_browser.py, tests/match/test_admission_output.py."""

from __future__ import annotations

import asyncio
import html
import re
from typing import Any

from tests.support.api import auth, login, new_team, room_of, submit
from tests.support.ladder import competition, until
from tests.support.web import serve, turncoat_app

Service = Any


async def test_a_team_sees_the_faults_of_an_earlier_version_through_the_version_selector(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    client = await service()
    cid = await competition(client, admin_token, bot_urls["greedy"])
    tid, token = await new_team(client, admin_token, cid, "ada")
    state = {"bad": False}
    runner, url = await serve(turncoat_app(state))
    try:
        v1 = await submit(client, cid, tid, token, {"url": url, "note": "v1"})
        assert v1["submission"]["status"] == "accepted", v1
        state["bad"] = True  # it goes wrong in the ladder's games
        r = await client.post(
            f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(admin_token)
        )
        assert r.status == 202, await r.text()
        diag_url = f"/api/competitions/{cid}/teams/{tid}/diagnostics"
        diag: dict[str, Any] = {}

        async def faulted() -> bool:
            diag.update(await (await client.get(diag_url, headers=auth(token))).json())
            return bool(diag["bot"] == "ada v1" and diag["fault_count"] >= 1)

        async with asyncio.timeout(120):  # a bound for a broken test
            await room_of(client).until(faulted)
        assert diag["fault_count"] >= 1, diag
        v2 = await submit(client, cid, tid, token, {"url": bot_urls["random"], "note": "v2"})
        assert v2["submission"]["status"] == "accepted", v2
        await until(
            client, cid, lambda d: any(s["bot"] == "ada v2" and s["games"] >= 2 for s in d["standings"])
        )
    finally:
        await runner.cleanup()
    await login(client, token)
    page = await (await client.get("/team/diagnostics")).text()
    assert "ada v2" in page and '<b class="version current">ada v2</b>' in page
    assert "illegal" not in page  # v2 plays well: the newest version is shown first
    links = dict(
        (html.unescape(text), html.unescape(href))
        for href, text in re.findall(r'<a class="version" href="([^"]+)">([^<]+)</a>', page)
    )
    assert "ada v1" in links, page
    old = await client.get(links["ada v1"])
    assert old.status == 200
    text = await old.text()
    assert '<b class="version current">ada v1</b>' in text
    assert "illegal" in text and "the request that caused it" in text.lower()
