"""Issue 32, items 2, 10 and 11, through the service over HTTP: who a bot is
is its team's id and version, never its name (two teams' names swapped
mid-ladder change labels only); a withdrawn team's bot is gone from
practice; an upload whose team's token is replaced while it streams is
refused at its end; an earlier version whose image was pruned is neither
offered nor accepted for practice."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from referee.service.errors import Conflict
from referee.service.store import ServiceDB
from referee.tournament.ladder import ladder_entries
from tests.support.api import auth, error_of, login, new_team, play_run, room_of, submit, url_of
from tests.support.ladder import competition, ladder_dir, until
from tests.support.practice import base
from tests.support.practice import competition as practice_competition
from tests.support.web import serve, turncoat_app

Service = Any


async def rename(client: Any, admin: str, cid: int, tid: int, name: str) -> None:
    r = await client.patch(f"/api/competitions/{cid}/teams/{tid}", json={"name": name}, headers=auth(admin))
    assert r.status == 200, await r.text()


async def swap(client: Any, admin: str, cid: int, a: int, b: int, name_a: str, name_b: str) -> None:
    """Team `a` (named `name_a`) takes `name_b` and team `b` takes `name_a`."""
    await rename(client, admin, cid, a, "swapping")
    await rename(client, admin, cid, b, name_a)
    await rename(client, admin, cid, a, name_b)


async def diagnostics(client: Any, cid: int, tid: int, token: str) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}/teams/{tid}/diagnostics", headers=auth(token))
    assert r.status == 200, await r.text()
    return dict(await r.json())


def csv_rows(text: str) -> dict[str, dict[str, str]]:
    return {row["bot"]: row for row in csv.DictReader(io.StringIO(text))}


def versions_table(page: str) -> str:
    """The team page's table of its own versions."""
    table = page[page.index('id="versions"') :]
    return table[: table.index("</table>")]


async def test_two_teams_names_swapped_mid_ladder_change_labels_only(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """Issue 32, item 2: after the admin swapped two teams' names, team 2's
    token saw team 1's faults and opened team 1's games from its seat, team 1
    saw none of its own, and standings.csv credited team 1's row to team 2.
    Every team-private route and the CSV, as each team and as the admin,
    find a team's bots by its id."""
    client = await service(submissions_per_window=20)
    cid = await competition(client, admin_token, bot_urls["greedy"])
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bo, bo_token = await new_team(client, admin_token, cid, "bo")
    state = {"bad": False}
    runner, url = await serve(turncoat_app(state))
    try:
        ada_v1 = await submit(client, cid, ada, ada_token, {"url": url})
        assert ada_v1["submission"]["status"] == "accepted", ada_v1
        bo_v1 = await submit(client, cid, bo, bo_token, {"url": bot_urls["random"]})
        assert bo_v1["submission"]["status"] == "accepted", bo_v1
        state["bad"] = True  # ada's bot faults in the ladder's games; bo's never does
        r = await client.post(
            f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(admin_token)
        )
        assert r.status == 202, await r.text()
        await until(
            client,
            cid,
            lambda d: {"ada v1", "bo v1"} <= {s["bot"] for s in d["standings"] if s["games"] >= 4},
        )
        before = await diagnostics(client, cid, ada, ada_token)
        assert before["bot"] == "ada v1" and before["fault_count"] >= 1, before

        await swap(client, admin_token, cid, ada, bo, "ada", "bo")  # ada is now named "bo", bo "ada"

        # the diagnostics: each team its own bot's, whatever its name now
        mine = await diagnostics(client, cid, ada, ada_token)
        theirs = await diagnostics(client, cid, bo, bo_token)
        assert mine["bot"] == "ada v1" and mine["fault_count"] >= before["fault_count"], mine["bot"]
        assert theirs["bot"] == "bo v1" and theirs["fault_count"] == 0, (theirs["bot"], theirs["fault_count"])
        # the games from its own seat: ada's as ada and the admin, none of them as bo
        run = (await (await client.get(f"/api/competitions/{cid}")).json())["run"]["id"]
        bo_games = {g["game"] for g in theirs["games"]}
        ada_only = [g["game"] for g in mine["games"] if g["game"] not in bo_games and g["has_replay"]]
        assert ada_only, mine["games"]
        idx = ada_only[0]
        own = f"/api/competitions/{cid}/teams/{{}}/runs/{run}/games/{idx}"
        for tid, token in ((ada, ada_token), (ada, admin_token)):
            r = await client.get(own.format(tid), headers=auth(token))
            assert r.status in (200, 403), await r.text()  # 403: its deal's rotations not all played yet
            if r.status == 200:
                assert (await r.json())["names"][(await r.json())["output_seat"]] == "ada v1"
        for tid, token in ((bo, bo_token), (bo, admin_token)):
            r = await client.get(own.format(tid), headers=auth(token))
            assert r.status in (404, 403), await r.text()
            if r.status == 404:
                assert "did not play game" in (await r.json())["error"]

        # a new version of ada (named "bo" now) replaces ada's v1, never bo's
        ada_v2 = await submit(client, cid, ada, ada_token, {"url": bot_urls["greedy"]})
        assert ada_v2["submission"]["status"] == "accepted", ada_v2
        await until(client, cid, lambda d: any(s["bot"] == "bo v2" for s in d["standings"]))
    finally:
        await runner.cleanup()
    entries = {e.name: e for e in ladder_entries(ladder_dir(db_path, cid))}
    assert entries["bo v1"].status == "active", entries["bo v1"]  # bo's version plays on
    assert entries["ada v1"].status == "retired" and entries["bo v2"].status == "active"
    assert {entries[n].team_id for n in ("ada v1", "bo v2")} == {ada} and entries["bo v1"].team_id == bo

    # the team pages, each team's session: its own versions, its own submissions
    await login(client, ada_token)
    page = await (await client.get("/team")).text()
    mine = versions_table(page)  # its versions (its head-to-head names the others' as opponents)
    assert "ada v1" in mine and "bo v2" in mine and "bo v1" not in mine
    assert 'data-bot="bo v1"' not in page  # no head-to-head of another team's version
    diag_page = await (await client.get("/team/diagnostics")).text()
    assert "bo v1" not in diag_page and "ada v1" in diag_page
    assert (await client.get(f"/team/submissions/{ada_v1['submission']['id']}")).status == 200
    assert (await client.get(f"/team/submissions/{bo_v1['submission']['id']}")).status == 404
    await login(client, bo_token)
    page = await (await client.get("/team")).text()
    mine = versions_table(page)
    assert "bo v1" in mine and "ada v1" not in mine and "bo v2" not in mine
    assert 'data-bot="ada v1"' not in page and 'data-bot="bo v2"' not in page
    diag_page = await (await client.get("/team/diagnostics")).text()
    assert "ada v1" not in diag_page and "illegal" not in diag_page
    # practice: each team's own listing (its own earlier versions only)
    listing = await (await client.get(base(cid, ada), headers=auth(ada_token))).json()
    assert f"version:{ada_v1['submission']['id']}" in [c["value"] for c in listing["choices"]]
    listing = await (await client.get(base(cid, bo), headers=auth(bo_token))).json()
    assert not any(c["value"].startswith("version:") for c in listing["choices"]), listing["choices"]
    # the bot pages: each version is its team's (its submission's version)
    data = await (await client.get(f"/api/competitions/{cid}/bots/ada%20v1")).json()
    assert data["team"] and data["submission"]["version"] == 1 and data["in_run"]

    # the admin's pages of each team: that team's versions
    from tests.support.api import signed_in

    await signed_in(client, admin_token)
    for tid, its, not_its in ((ada, "ada v1", "bo v1"), (bo, "bo v1", "ada v1")):
        page = await (await client.get(f"/admin/c/{cid}/teams/{tid}/diagnostics")).text()
        assert its in page and not_its not in page, (tid, its)
        page = await (await client.get(f"/admin/c/{cid}/teams/{tid}")).text()
        assert its in page and not_its not in page, (tid, its)


async def test_a_runs_standings_csv_after_a_swap_credits_each_row_by_id(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Issue 32, item 2, a run's CSV: its bots played under the teams' names
    then; after the swap each row is still its team's."""
    from tests.support.api import new_competition

    client = await service(submissions_per_window=20)
    cid = await new_competition(client, admin_token, house={"house": bot_urls["greedy"]})
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bo, bo_token = await new_team(client, admin_token, cid, "bo")
    await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})
    await submit(client, cid, bo, bo_token, {"url": bot_urls["signed"], "secret": "s3cret"})
    data = await play_run(client, cid, admin_token)
    await swap(client, admin_token, cid, ada, bo, "ada", "bo")
    r = await client.get(f"/api/competitions/{cid}/runs/{data['run']['id']}/standings.csv")
    assert r.status == 200, await r.text()
    rows = csv_rows(await r.text())
    assert (rows["ada"]["team_id"], rows["ada"]["team"]) == (str(ada), "bo"), rows["ada"]
    assert (rows["bo"]["team_id"], rows["bo"]["team"]) == (str(bo), "ada"), rows["bo"]
    # each team's diagnostics of the run: its own bot's, under the name it played under
    assert (await diagnostics(client, cid, ada, ada_token))["bot"] == "ada"
    assert (await diagnostics(client, cid, bo, bo_token))["bot"] == "bo"


# ---------------------------------------------------------------- item 10: withdrawn means gone


async def test_a_withdrawn_teams_bot_is_no_practice_opponent(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """Issue 32, item 10: a withdrawn team's bot was still offered and
    accepted as a practice opponent; a game queued against it played."""
    client = await service(submissions_per_window=20)
    cid = await practice_competition(
        client, admin_token, bot_urls["greedy"], extra="practice_against_teams = true"
    )
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bo, bo_token = await new_team(client, admin_token, cid, "bo")
    await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})
    await submit(client, cid, bo, bo_token, {"url": bot_urls["greedy"]})
    listing = await (await client.get(base(cid, ada), headers=auth(ada_token))).json()
    assert f"team:{bo}" in [c["value"] for c in listing["choices"]]
    r = await client.post(f"/api/competitions/{cid}/teams/{bo}/withdraw", headers=auth(admin_token))
    assert r.status == 200, await r.text()
    listing = await (await client.get(base(cid, ada), headers=auth(ada_token))).json()
    assert f"team:{bo}" not in [c["value"] for c in listing["choices"]], listing["choices"]
    why = await error_of(
        await client.post(base(cid, ada), json={"opponents": [f"team:{bo}"]}, headers=auth(ada_token)), 409
    )
    assert "withdrawn" in why["error"] and "'bo'" in why["error"], why


async def test_a_game_asked_before_the_withdrawal_does_not_seat_the_withdrawn_bot(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    from referee.service.practice import practice_league
    from referee.service.store import ServiceDB
    from referee.service.store.practice import Seat, add_game

    client = await service(submissions_per_window=20)
    cid = await practice_competition(
        client, admin_token, bot_urls["greedy"], extra="practice_against_teams = true"
    )
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    bo, bo_token = await new_team(client, admin_token, cid, "bo")
    a = await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})
    b = await submit(client, cid, bo, bo_token, {"url": bot_urls["greedy"]})
    assert (
        await client.post(f"/api/competitions/{cid}/teams/{bo}/withdraw", headers=auth(admin_token))
    ).status == 200
    db = ServiceDB(db_path)
    try:
        team = db.team(ada)
        assert team is not None
        seats = [
            Seat(kind="self", name="ada v1", pick="self", submission=a["submission"]["id"]),
            Seat(kind="team", name="bo v1", pick=f"team:{bo}", submission=b["submission"]["id"]),
        ]
        game = add_game(db, team, seats, 0.0)
        try:
            practice_league(db, game, None, {})
        except Conflict as e:
            assert "withdrawn" in str(e), e
        else:
            raise AssertionError("a withdrawn team's bot was seated")
    finally:
        db.close()


async def pieces(
    first: bytes, rest: bytes, between: asyncio.Event, sent: asyncio.Event
) -> AsyncIterator[bytes]:
    """An upload in two pieces: the second once `between` is set (`sent` once the first is out)."""
    yield first
    sent.set()
    await between.wait()
    yield rest


async def test_an_upload_streaming_when_the_teams_token_is_replaced_is_refused_at_its_end(
    service: Service, admin_token: str, db_path: Path
) -> None:
    """Issue 32, item 10: an upload that was streaming when the admin gave
    the team a new token was stored and queued under the old one."""
    from tests.support.api import new_competition

    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    between, sent = asyncio.Event(), asyncio.Event()
    body = pieces(b"x" * 70_000, b"y" * 70_000, between, sent)
    upload = asyncio.create_task(
        client.post(url_of(cid, tid), data=body, headers={**auth(token), "Content-Length": "140000"})
    )
    await sent.wait()
    await slot_taken(client, tid)  # the server has the upload in hand (its slot taken)
    r = await client.post(f"/api/competitions/{cid}/teams/{tid}/token", headers=auth(admin_token))
    assert r.status == 201, await r.text()
    between.set()
    why = await error_of(await upload, 401)
    assert "token was replaced" in why["error"] and "new token" in why["error"], why
    db = ServiceDB(db_path)
    assert db.count_submissions(tid) == 0
    db.close()
    folder = db_path.parent / "service-data" / "teams" / str(tid) / "uploads"
    assert not any(folder.iterdir()), list(folder.iterdir())  # nothing of it kept


async def slot_taken(client: Any, tid: int) -> None:
    """Until the team's upload slot is taken (the server began the upload):
    taking it is a change of the service's, which wakes the wait."""
    room = room_of(client)

    async def taken() -> bool:
        return bool(await room.db.call(ServiceDB.upload_in_flight, tid))

    async with asyncio.timeout(60):  # a bound for a broken test, never a wait
        await room.until(taken)


# ---------------------------------------------------------------- item 11: only playable versions


async def test_an_earlier_version_whose_image_was_pruned_is_not_offered_for_practice(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Path
) -> None:
    """Issue 32, item 11: an earlier version whose image the service pruned
    was offered for practice, and its game failed telling the student to
    run ``docker build -t sha256:...``. Its image here is one no daemon has
    (a pruned image), recorded as the service records an upload's."""
    client = await service(submissions_per_window=20)
    cid = await practice_competition(client, admin_token, bot_urls["greedy"])
    ada, ada_token = await new_team(client, admin_token, cid, "ada")
    pruned = "sha256:" + "0" * 63 + "1"
    db = ServiceDB(db_path)  # v1: an upload accepted, its image pruned since
    try:
        sub = db.add_submission(
            ada, kind="archive", url=None, image=None, secret=None, note="", status="accepted"
        )
        assert sub is not None
        db.update_submission(sub.id, image_id=pruned)
        v1 = sub.id
    finally:
        db.close()
    await submit(client, cid, ada, ada_token, {"url": bot_urls["random"]})  # v2, in play
    listing = await (await client.get(base(cid, ada), headers=auth(ada_token))).json()
    assert f"version:{v1}" not in [c["value"] for c in listing["choices"]], listing["choices"]
    r = await client.post(base(cid, ada), json={"opponents": [f"version:{v1}"]}, headers=auth(ada_token))
    why = await error_of(r, 409)
    assert "v1 can no longer play" in why["error"] and "removed from the server" in why["error"], why
    assert "docker build" not in why["error"] and "sha256" not in why["error"], why
