"""Issue 24, item 6: one team stalls every admission check.

The attacks, with real HTTP bots on loopback and the service's own queue:
a bot that is slow only in admission games (it can no longer tell them from
the ladder's games); a team whose bot is slow in every game (its check is cut
by the time budget and refused with its figures, and another team's check
does not wait for it); a team that submits again and again while the worker
is busy (only its newest is checked); a restart with several teams' queued
submissions (the same fairness).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from aiohttp import web

from protocol.messages import ActRequest
from referee.service.store import ServiceDB
from referee.web.app_state import ROOM
from sample_bots import greedy
from tests.support.api import auth, new_competition, new_team, settled, submit
from tests.support.ladder import LEAGUE
from tests.support.web import league_text, serve

Service = Any

#: A budget that keeps the tests short (the slow bot's check would take ~40 s
#: without it), and leaves a fast bot's check (~1 s) room on a busy machine.
BUDGET_S = 5.0
#: Validation games in the budget tests.
GAMES = 2
#: What a slow bot spends on each move: legal (the league's move_ms is 2000).
SLOW_S = 0.25
HEX_ID = re.compile(r"[0-9a-f]{24}")
REQUEST_ID = re.compile(r"[0-9a-f]{24}\.[0-9]+")


class Spy:
    """A bot that plays the greedy move, keeps every body it is sent, and is
    slow in the games it takes for admission games (`slow_if`)."""

    def __init__(self, slow_if: Any = lambda body: False, delay_s: float = SLOW_S) -> None:
        self.starts: list[tuple[float, dict[str, Any]]] = []
        self.acts: list[tuple[float, dict[str, Any]]] = []
        self.slow_if = slow_if
        self.delay_s = delay_s
        self.slowed = 0
        #: Notified at each request the bot is sent (:meth:`until`).
        self._heard = asyncio.Condition()

    async def _hear(self) -> None:
        async with self._heard:
            self._heard.notify_all()

    async def until(self, ready: Callable[[], bool], what: str) -> None:
        """Until `ready()` is true, asked again at each request the bot is sent."""
        try:
            async with asyncio.timeout(120):  # a bound for a broken test, never a wait
                async with self._heard:
                    await self._heard.wait_for(ready)
        except TimeoutError:
            raise AssertionError(f"the bot never saw it: {what}") from None

    def app(self) -> web.Application:
        async def info(request: web.Request) -> web.Response:
            return web.json_response({"name": "spy", "version": "1", "author": "x", "apiversion": "1"})

        async def start(request: web.Request) -> web.Response:
            self.starts.append((time.monotonic(), await request.json()))
            await self._hear()
            return web.json_response({})

        async def end(request: web.Request) -> web.Response:
            return web.json_response({})

        async def act(request: web.Request) -> web.Response:
            raw = await request.read()
            body = msgspec.json.decode(raw)
            self.acts.append((time.monotonic(), body))
            await self._hear()
            if self.slow_if(body):
                self.slowed += 1
                await asyncio.sleep(self.delay_s)
            req = msgspec.json.decode(raw, type=ActRequest)
            return web.json_response({"request_id": req.request_id, "index": greedy.decide(req)})

        app = web.Application()
        app.router.add_get("/", info)
        app.router.add_post("/start", start)
        app.router.add_post("/act", act)
        app.router.add_post("/end", end)
        return app


async def _serve_spy(spy: Spy) -> tuple[web.AppRunner, str]:
    return await serve(spy.app())


async def _status(client: Any, cid: int, tid: int, token: str, sid: int) -> dict[str, Any]:
    r = await client.get(f"/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=auth(token))
    assert r.status == 200, await r.text()
    return dict((await r.json())["submission"])


def _start_shape(body: dict[str, Any]) -> dict[str, Any]:
    """What a bot can read from a /start body, save the values that differ from game to game."""
    return {
        "keys": sorted(body),
        "apiversion": body["apiversion"],
        "game_id": bool(HEX_ID.fullmatch(body["game_id"])),
        "rules": body["rules"],
        "timeouts": body["timeouts"],
        "players": len(body["players"]),
        "own": body["players"][body["seat"]],
    }


def _act_shape(body: dict[str, Any]) -> dict[str, Any]:
    players = body["state"]["players"]
    return {
        "keys": sorted(body),
        "apiversion": body["apiversion"],
        "game_id": bool(HEX_ID.fullmatch(body["game_id"])),
        "request_id": bool(REQUEST_ID.fullmatch(body["request_id"]))
        and body["request_id"].startswith(body["game_id"] + "."),
        "deadline_ms": body["deadline_ms"],
        "bank_ms": body["bank_ms"],
        "players": len(players),
        "own": players[body["seat"]]["name"],
    }


# ------------------------------------------------------------ (a) admission games look like ladder games


async def test_a_bot_cannot_tell_its_admission_games_from_the_ladders(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """The attack: slow (or careful) only in games whose id says admission-.
    Now the /start and /act bodies of the admission check and of the ladder
    have the same fields, id scheme, seat names, rules and timing."""
    spy = Spy(slow_if=lambda body: str(body["game_id"]).startswith(("admission-", "check-")))
    runner, url = await _serve_spy(spy)
    try:
        client = await service(submissions_per_window=20, check_budget_s=60.0)
        r = await client.post(
            "/api/competitions",
            json={"name": "class", "league": LEAGUE.format(house=bot_urls["greedy"])},
            headers=auth(admin_token),
        )
        assert r.status == 201, await r.text()
        cid = int((await r.json())["id"])
        assert (
            await client.post(
                f"/api/competitions/{cid}/open", json={"concurrency": 2}, headers=auth(admin_token)
            )
        ).status == 202
        tid, token = await new_team(client, admin_token, cid, "ada")
        done = await submit(client, cid, tid, token, {"url": url})
        assert done["submission"]["status"] == "accepted", done["submission"]
        accepted_at = time.monotonic()
        admission_starts = [b for t, b in spy.starts if t < accepted_at]
        admission_acts = [b for t, b in spy.acts if t < accepted_at]
        # the ladder plays the accepted version at once
        await spy.until(
            lambda: len([t for t, _ in spy.starts if t > accepted_at]) >= 3, "three ladder games of ada v1"
        )
    finally:
        await runner.cleanup()
    ladder_starts = [b for t, b in spy.starts if t > accepted_at]
    ladder_acts = [b for t, b in spy.acts if t > accepted_at]
    # the detection no longer works: every admission move was answered at full speed
    assert spy.slowed == 0, (
        f"{spy.slowed} admission moves were told apart (ids {admission_starts[0]['game_id']!r})"
    )
    # field by field, the same /start as the ladder's: the id scheme, the seat name, the table, rules, timeouts
    ladder_shapes = {msgspec.json.encode(_start_shape(b)) for b in ladder_starts}
    assert len(ladder_shapes) == 1, ladder_shapes
    assert len(admission_starts) >= 5  # the compliance check's and 4 validation games'
    for body in admission_starts:
        assert _start_shape(body) == _start_shape(ladder_starts[0]), (body, ladder_starts[0])
    # the opponents are named as the ladder's tables name them
    ladder_names = {n for b in ladder_starts for n in b["players"]}
    assert ladder_names == {"ada v1", "house"}
    assert {n for b in admission_starts for n in b["players"]} <= ladder_names
    # and every /act but the one that tests unknown fields (by its nature) is shaped as the ladder's
    act_shape = _act_shape(ladder_acts[0])
    assert all(_act_shape(b) == act_shape for b in ladder_acts)
    plain = [b for b in admission_acts if "future_field" not in b]
    assert len(plain) >= len(admission_acts) - 1 and len(plain) > 20
    for body in plain:
        assert _act_shape(body) == act_shape, (body["request_id"], _act_shape(body), act_shape)


# ------------------------------------------------------------ (b) a slow team, the time budget, turns


@pytest.mark.slow
async def test_a_slow_team_is_cut_by_the_budget_and_the_next_team_does_not_wait_for_it(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Team A's bot is legal but slow in every move (a full check would take a
    minute); B submits a fast bot right after A's check began, and A submits
    again before B. One worker: A's check is cut at the budget and refused with
    A's figures; B goes next (A was served last), and waits about one budget."""
    slow = Spy(slow_if=lambda body: True)
    runner, slow_url = await _serve_spy(slow)
    try:
        client = await service(
            submissions_per_window=20, check_budget_s=BUDGET_S, admission_workers=1, validation_games=GAMES
        )
        cid = await new_competition(client, admin_token)
        a, a_token = await new_team(client, admin_token, cid, "ada")
        b, b_token = await new_team(client, admin_token, cid, "bo")
        began = time.monotonic()
        a1 = (await submit(client, cid, a, a_token, {"url": slow_url}, wait=False))["id"]
        await slow.until(lambda: bool(slow.acts), "A's check under way")
        a2 = (await submit(client, cid, a, a_token, {"url": slow_url, "note": "again"}, wait=False))["id"]
        b_at = time.monotonic()
        b1 = (await submit(client, cid, b, b_token, {"url": bot_urls["greedy"]}, wait=False))["id"]
        b_done = await settled(client, cid, b, b_token, b1, timeout=BUDGET_S + 25)
        b_wait = time.monotonic() - b_at
        a_done = await settled(client, cid, a, a_token, a1, timeout=BUDGET_S + 25)
        a2_done = await settled(client, cid, a, a_token, a2, timeout=BUDGET_S + 25)
        ended = {
            sid: (await client.app[ROOM].db.call(ServiceDB.submission, sid)).updated_at  # type: ignore[union-attr]
            for sid in (a1, b1, a2)
        }
    finally:
        await runner.cleanup()
    assert b_done["submission"]["status"] == "accepted", b_done
    sub = a_done["submission"]
    assert sub["status"] == "refused", sub
    reason = sub["reason"]
    assert reason.startswith(
        f"time budget: too slow in total: the check was stopped at its budget of {BUDGET_S:g} s"
    )
    moves = int(re.search(r"after (\d+) moves", reason).group(1))  # type: ignore[union-attr]
    per_move = int(re.search(r"(\d+) ms a move on average", reason).group(1))  # type: ignore[union-attr]
    assert moves >= 3 and SLOW_S * 1000 <= per_move < SLOW_S * 1000 + 500, reason
    line = next(x for x in a_done["report"]["lines"] if not x["ok"])
    assert line["what"] == "time budget" and "answer faster" in line["fix"]
    a_seconds = a_done["report"]["seconds"]
    assert BUDGET_S <= a_seconds < BUDGET_S + 3, a_seconds
    # B waited for A's first check at most, not for A's second: A was served last
    assert a2_done["submission"]["status"] == "refused"
    assert ended[a1] < ended[b1] < ended[a2], ended
    assert b_wait < BUDGET_S + 12, f"B waited {b_wait:.1f} s"
    print(
        f"\nA's check: {a_seconds} s ({moves} moves, {per_move} ms a move); B waited {b_wait:.1f} s; "
        f"all in {time.monotonic() - began:.1f} s"
    )


@pytest.mark.slow
async def test_with_two_workers_a_team_has_one_check_running_and_others_start_at_once(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """Two workers: A's second submission waits for A's first to end (a team
    never holds both workers); B's check starts on the free worker at once."""
    budget = 8.0  # A's first check outlasts B's whole check, even on a busy machine
    slow = Spy(slow_if=lambda body: True)
    runner, slow_url = await _serve_spy(slow)
    try:
        client = await service(
            submissions_per_window=20, check_budget_s=budget, admission_workers=2, validation_games=GAMES
        )
        cid = await new_competition(client, admin_token)
        a, a_token = await new_team(client, admin_token, cid, "ada")
        b, b_token = await new_team(client, admin_token, cid, "bo")
        a1 = (await submit(client, cid, a, a_token, {"url": slow_url}, wait=False))["id"]
        await slow.until(lambda: bool(slow.acts), "A's check under way")
        a2 = (await submit(client, cid, a, a_token, {"url": slow_url, "note": "again"}, wait=False))["id"]
        b_at = time.monotonic()
        b1 = (await submit(client, cid, b, b_token, {"url": bot_urls["greedy"]}, wait=False))["id"]
        b_done = await settled(client, cid, b, b_token, b1, timeout=budget + 25)
        b_wait = time.monotonic() - b_at
        assert b_done["submission"]["status"] == "accepted", b_done
        assert (await _status(client, cid, a, a_token, a1))["status"] == "checking"  # B did not wait for it
        assert (await _status(client, cid, a, a_token, a2))["status"] == "queued"  # nor A2 run beside it
        assert b_wait < budget, b_wait
        a1_done = await settled(client, cid, a, a_token, a1, timeout=budget + 25)
        a2_done = await settled(client, cid, a, a_token, a2, timeout=budget + 25)
        assert a1_done["submission"]["status"] == a2_done["submission"]["status"] == "refused"
    finally:
        await runner.cleanup()


# ------------------------------------------------------------ (c) one waiting submission per team


async def test_a_team_submitting_again_and_again_keeps_one_waiting_the_newest(
    service: Service, admin_token: str, bot_urls: dict[str, str]
) -> None:
    """While the worker checks Z's slow bot, A submits 5 times: the first 4 are
    superseded at once, each with the reason (replaced by the next); only the
    newest is checked."""
    slow = Spy(slow_if=lambda body: True)
    runner, slow_url = await _serve_spy(slow)
    try:
        # Twice the budget: Z's check only has to outlast A's five submissions, and
        # A's newest (a fast bot, about 1 s) has room on a machine slowed by others.
        client = await service(
            submissions_per_window=20,
            check_budget_s=2 * BUDGET_S,
            admission_workers=1,
            validation_games=GAMES,
        )
        cid = await new_competition(client, admin_token)
        z, z_token = await new_team(client, admin_token, cid, "zed")
        a, a_token = await new_team(client, admin_token, cid, "ada")
        z1 = (await submit(client, cid, z, z_token, {"url": slow_url}, wait=False))["id"]
        await slow.until(lambda: bool(slow.acts), "Z's check under way")
        ids = [
            (await submit(client, cid, a, a_token, {"url": bot_urls["greedy"], "note": f"v{i}"}, wait=False))[
                "id"
            ]
            for i in range(1, 6)
        ]

        # A's 4 older submissions superseded while Z is checked
        for sid in ids[:4]:
            assert (await client.app[ROOM].pipeline.wait_for(sid, timeout_s=60)).status == "superseded"
        assert (await _status(client, cid, z, z_token, z1))["status"] == "checking"
        for sid, by in zip(ids[:4], ids[1:]):
            detail = await _status(client, cid, a, a_token, sid)
            assert detail["reason"] == f"replaced by #{by} before its check", detail
        newest = await settled(client, cid, a, a_token, ids[4], timeout=2 * BUDGET_S + 25)
        assert newest["submission"]["status"] == "accepted", newest
        listing = await (
            await client.get(f"/api/competitions/{cid}/teams/{a}/submissions", headers=auth(a_token))
        ).json()
        assert [s["status"] for s in listing] == ["accepted"] + ["superseded"] * 4
        # the superseded ones were never checked: the newest's check is the only report
        for sid in ids[:4]:
            r = await client.get(
                f"/api/competitions/{cid}/teams/{a}/submissions/{sid}", headers=auth(a_token)
            )
            assert (await r.json())["report"] is None
    finally:
        await runner.cleanup()


# ------------------------------------------------------------ (d) a restart keeps the fairness


async def test_a_restart_rebuilds_the_fair_queue(
    service: Service, admin_token: str, bot_urls: dict[str, str], db_path: Any
) -> None:
    """Queued when the server stopped: A1, A2 (slow), B3, A4 (slow), C5. At the
    start A1 and A2 are superseded by A4, which keeps A's place; then B, then C,
    each within about one budget of the other."""
    slow = Spy(slow_if=lambda body: True)
    runner, slow_url = await _serve_spy(slow)
    db = ServiceDB(db_path)
    try:
        comp = db.add_competition("class", league_text())
        teams = {name: db.add_team(comp.id, name)[0].id for name in ("ada", "bo", "cy")}
        order = [
            ("ada", slow_url),
            ("ada", slow_url),
            ("bo", bot_urls["greedy"]),
            ("ada", slow_url),
            ("cy", bot_urls["greedy"]),
        ]
        ids = []
        for name, url in order:
            sub = db.add_submission(teams[name], kind="url", url=url, image=None, secret=None, note="")
            assert sub is not None
            ids.append(sub.id)
    finally:
        db.close()
    # Twice the budget, as for the test above: B's and C's fast bots (about 1 s each) have room on a
    # machine slowed by others (.ci/stress's two CPU hogs), and A4's slow bot is still cut by it.
    budget = 2 * BUDGET_S
    try:
        began = time.monotonic()
        client = await service(check_budget_s=budget, admission_workers=1, validation_games=GAMES)
        pipeline = client.app[ROOM].pipeline
        a1, a2, b3, a4, c5 = ids

        for sid in (a1, a2):  # superseded at the start
            assert (await pipeline.wait_for(sid, timeout_s=60)).status == "superseded"
        finished = {sid: await pipeline.wait_for(sid, timeout_s=3 * budget + 30) for sid in (a4, b3, c5)}
        took = time.monotonic() - began
    finally:
        await runner.cleanup()
    for sid in (a1, a2):
        again = await client.app[ROOM].db.call(ServiceDB.submission, sid)
        assert again is not None and again.reason == f"replaced by #{a4} before its check"
    assert finished[a4].status == "refused" and (finished[a4].reason or "").startswith(
        "time budget: too slow"
    )
    assert finished[b3].status == "accepted" and finished[c5].status == "accepted"
    # teams in turn: A (its place is its oldest's), then B, then C
    when = {sid: finished[sid].updated_at or 0.0 for sid in finished}
    assert when[a4] < when[b3] < when[c5], when
    assert took < 3 * budget + 20, took


# ------------------------------------------------------------ the league's table, secret deals


async def test_admission_games_seat_the_leagues_table_and_rotate_secret_deals(tmp_path: Any) -> None:
    """A 3-seat league: the validation games have 3 seats, the bot's name in
    each seat in turn of a deal (duplicate rotations), the opponents' names
    drawn from the names given, a fresh opaque id each game."""
    from protocol.messages import Timeouts
    from referee.admission import AdmissionSettings, admit
    from referee.bots.factory import BotSpec

    spy = Spy()
    runner, url = await _serve_spy(spy)
    try:
        report = await admit(
            BotSpec(name="ada", url=url),
            out_dir=tmp_path,
            settings=AdmissionSettings(timeouts=Timeouts(move_ms=2000), games=6, table_size=3, budget_s=60),
            seat_name="ada v3",
            opponents=["house", "bo v1", "cy v2", "ada v2"],
        )
    finally:
        await runner.cleanup()
    assert report.ok, report.render()
    games = spy.starts[1:]  # after the compliance check's
    assert len(games) == 6 and len({b["game_id"] for _, b in games}) == 6
    assert all(HEX_ID.fullmatch(b["game_id"]) and len(b["players"]) == 3 for _, b in games)
    assert sorted(b["seat"] for _, b in games[:3]) == [0, 1, 2] == sorted(b["seat"] for _, b in games[3:])
    for _, b in games:
        assert b["players"][b["seat"]] == "ada v3"
        assert set(b["players"]) - {"ada v3"} <= {"house", "bo v1", "cy v2", "ada v2"}
    check = spy.starts[0][1]
    assert check["players"][0] == "ada v3" and HEX_ID.fullmatch(check["game_id"])


def test_serve_takes_the_check_budget(db_path: Any, monkeypatch: Any) -> None:
    from click.testing import CliRunner

    from referee.cli.serve import serve
    from referee.web import server
    from referee.web.app_state import ROOM

    apps: list[Any] = []
    monkeypatch.setattr(server, "run", lambda app, **kw: apps.append(app))
    for args, budget in (([], 120.0), (["--check-budget", "42"], 42.0)):
        r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0", *args])
        assert r.exit_code == 0, r.output
        assert apps[-1][ROOM].settings.check_budget_s == budget
    r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0", "--check-budget", "0"])
    assert r.exit_code == 2 and "--check-budget" in r.output


def test_serve_takes_the_admission_workers(db_path: Any, monkeypatch: Any) -> None:
    from click.testing import CliRunner

    from referee.cli.serve import serve
    from referee.web import server
    from referee.web.app_state import ROOM

    apps: list[Any] = []
    monkeypatch.setattr(server, "run", lambda app, **kw: apps.append(app))
    # default: one on this machine (on the cluster, one per node: tests/cluster/test_rush_two_nodes.py)
    for args, asked, workers in (([], None, 1), (["--admission-workers", "3"], 3, 3)):
        r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0", *args])
        assert r.exit_code == 0, r.output
        room = apps[-1][ROOM]
        assert room.settings.admission_workers == asked
        assert room.pipeline.workers == workers
    r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0", "--admission-workers", "0"])
    assert r.exit_code == 2, r.output
    assert "Invalid value for --admission-workers: expected 1 or more submissions" in r.output, r.output
