"""Ids a request writes (issue 24, item 7): every route that takes an id in
its path (``{cid}``, ``{rid}``, ``{tid}``, ``{sid}``, ``{idx}``) or its query
(``?run=``) answers an id beyond SQLite's 64-bit integers as it answers any
id that names nothing (404), never 500 (``OverflowError`` in the driver)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.support.api import auth, new_competition, new_team, play_run, submit

Service = Callable[..., Awaitable[Any]]

#: 20 digits: past 2**63 - 1, the largest integer SQLite stores.
HUGE = "99999999999999999999"
MAX_ID = 2**63 - 1
IDS = ("cid", "rid", "tid", "sid", "idx", "pid")


def test_an_id_is_ascii_digits_within_sqlites_range() -> None:
    from referee.web.validation import MAX_ID as LARGEST
    from referee.web.validation import parse_id

    assert LARGEST == MAX_ID
    assert parse_id("0") == 0 and parse_id("42") == 42 and parse_id("007") == 7
    assert parse_id(str(MAX_ID)) == MAX_ID
    for text in (
        str(MAX_ID + 1),
        HUGE,
        "9" * 5000,
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1_0",
        "1.0",
        "\u0663",
        "0x1",
        None,
    ):
        assert parse_id(text) is None, text


async def test_every_route_answers_an_oversized_id_as_a_missing_one(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Attack: ``/c/1?run=99999999999999999999`` was a 500. Walk every
    route of the app: each id, in turn, oversized (the others real: a
    played run, its team, its submission, its game 0) answers exactly as an
    id that is in range but names nothing (``2**63 - 1``), and under 500; a
    GET answers 404. And every GET of a competition with ``?run=`` too."""
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    sid = (await submit(client, cid, tid, token, {"url": bot_urls["greedy"]}))["submission"]["id"]
    tid2, token2 = await new_team(client, admin_token, cid, "grace")
    await submit(client, cid, tid2, token2, {"url": bot_urls["random"]})
    data = await play_run(client, cid, admin_token)
    real = {
        "cid": str(cid),
        "rid": str(data["run"]["id"]),
        "tid": str(tid),
        "sid": str(sid),
        "idx": "0",
        "bot": "ada",
        "action": "open",
        "pid": "1",
    }  # pid: a practice game (none played here)
    # both sessions too, so the pages reach their ids
    origin = {"Origin": str(client.make_url("")).rstrip("/")}
    r = await client.post("/admin/login", data={"token": admin_token}, headers=origin, allow_redirects=False)
    assert r.status == 303, await r.text()
    r = await client.post("/login", data={"token": token}, headers=origin, allow_redirects=False)
    assert r.status == 303, await r.text()

    async def status(method: str, url: str) -> int:
        who = token if "/teams/" in url and method == "GET" else admin_token  # a team's own reads are its own
        r = await client.request(
            method, url, headers={**auth(who), **origin}, allow_redirects=False, data=b""
        )
        if r.content_type == "text/event-stream":  # a live stream: its status is what counts
            r.close()
            return r.status
        text = await r.text()
        assert r.status < 500, f"{method} {url}: {r.status} {text[:300]}"
        return r.status

    walked: list[str] = []
    for route in client.server.app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        formatter = info.get("formatter")
        if formatter is None or route.method == "HEAD":
            continue
        params = re.findall(r"\{(\w+)\}", formatter)
        for key in (p for p in params if p in IDS):

            def url(value: str, key: str = key, formatter: str = formatter) -> str:
                return formatter.format(**{**real, key: value})

            huge, missing = (
                await status(route.method, url(HUGE)),
                await status(route.method, url(str(MAX_ID))),
            )
            assert huge == missing, (
                f"{route.method} {url(HUGE)}: {huge}, but {missing} for an id that is missing"
            )
            if route.method == "GET":
                assert huge == 404, f"GET {url(HUGE)}: {huge}"
            walked.append(f"{route.method} {formatter} {key}")
        if route.method == "GET" and params and set(params) <= set(real):
            page = formatter.format(**real)
            for run in (HUGE, str(MAX_ID), "-1", "x"):
                sep = "&" if "?" in page else "?"
                got = await status("GET", f"{page}{sep}run={run}")
                if got != 404:  # a page that reads no ?run= shows what it shows without it
                    assert got == await status("GET", page), f"GET {page}?run={run}: {got}"
            walked.append(f"GET {formatter}?run=")
    assert len(walked) >= 30, walked
    for must in (
        "GET /c/{cid}?run=",
        "GET /api/competitions/{cid}?run=",
        "GET /c/{cid}/bots/{bot}?run=",
        "GET /api/competitions/{cid}/teams/{tid}/diagnostics?run=",
    ):
        assert must in walked
    # The one from the issue, with its message.
    r = await client.get(f"/c/{cid}?run={HUGE}", headers={"Accept": "application/json"})
    assert r.status == 404 and HUGE in await r.text()


def test_referee_start_says_no_competition_for_an_oversized_id(db_path: Path, admin_token: str) -> None:
    """``referee start --db DB 99999999999999999999``: no competition has
    it (it was an OverflowError's traceback)."""
    from click.testing import CliRunner

    from referee.cli import main

    r = CliRunner().invoke(main, ["start", "--db", str(db_path), HUGE])
    assert r.exit_code == 2 and f"no competition '{HUGE}'" in r.output, (r.exit_code, r.output, r.exception)
