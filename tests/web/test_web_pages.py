"""The pages: names from users escaped on every page that shows them (the
templates autoescape), and no SQLite query on the event loop's thread, from
any page or API endpoint."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from referee.replay import frames
from referee.replay import read as read_replay
from referee.service.store import ServiceDB
from referee.web.viewer import standalone_html
from tests.support.api import board_until, read_events, settled

Service = Callable[..., Awaitable[Any]]

#: A team's name and a house bot's, as an attacker would choose them.
TEAM = "<script>alert(1)</script>"
HOUSE = """ho"use' <b>&"""
COMPETITION = "</title><script>alert(2)</script>"
ESCAPED = {
    TEAM: "&lt;script&gt;alert(1)&lt;/script&gt;",
    HOUSE: "ho&quot;use&#x27; &lt;b&gt;&amp;",
    COMPETITION: "&lt;/title&gt;&lt;script&gt;alert(2)&lt;/script&gt;",
}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def league(house_url: str, house: str = "house") -> str:
    escaped = house.replace("\\", "\\\\").replace('"', '\\"')
    return "\n".join(
        [
            "[tournament]",
            'name = "pages"',
            "seed = 3",
            "table_size = 2",
            "rounds = 1",
            "concurrency = 2",
            "",
            "[timeouts]",
            "move_ms = 2000",
            "",
            "[[bots]]",
            f'name = "{escaped}"',
            f'url = "{house_url}"',
            "",
        ]
    )


async def wait_finished(client: Any, cid: int) -> dict[str, Any]:
    return await board_until(client, cid, lambda d: d["run"] is not None and d["run"]["status"] != "running")


def assert_escaped(html: str, where: str, shown: tuple[str, ...]) -> None:
    for raw in ESCAPED:
        assert raw not in html, f"{where}: {raw!r} is not escaped"
    for raw in shown:
        assert ESCAPED[raw] in html, f"{where}: {raw!r} is not shown"
    assert "<script>alert" not in html and 'ho"use' not in html, where


async def test_names_are_escaped_on_every_page(
    service: Service, admin_token: str, db_path: Path, bot_urls: dict[str, str]
) -> None:
    db = ServiceDB(db_path)
    comp = db.add_competition(COMPETITION, league(bot_urls["greedy"], HOUSE))
    team, _ = db.add_team(comp.id, TEAM)  # (the API refuses '/' in team names: the database does not)
    db.add_submission(
        team.id, kind="url", url=bot_urls["random"], image=None, secret=None, note="", status="accepted"
    )
    db.close()
    client = await service()
    cid = comp.id
    # Before the run, and with its data.
    pages = {"/": (COMPETITION,), f"/c/{cid}": (COMPETITION, TEAM, HOUSE), f"/c/{cid}/live": (TEAM, HOUSE)}
    for path, shown in pages.items():
        r = await client.get(path)
        assert r.status == 200, path
        assert_escaped(await r.text(), path, shown)
    r = await client.post(f"/api/competitions/{cid}/runs", headers=auth(admin_token))
    assert r.status == 202, await r.text()
    final = await wait_finished(client, cid)
    assert final["run"]["status"] == "finished" and final["games"] == 2
    rid = final["run"]["id"]
    pages.update(
        {
            f"/c/{cid}?run={rid}": (COMPETITION, TEAM, HOUSE),
            f"/c/{cid}/bots/{quote(TEAM, safe='')}": (COMPETITION, TEAM, HOUSE),
            f"/c/{cid}/bots/{quote(HOUSE, safe='')}?run={rid}": (COMPETITION, TEAM, HOUSE),
            f"/c/{cid}/runs/{rid}/games/0": (COMPETITION, TEAM, HOUSE),
            f"/c/{cid}/runs/{rid}/games/1": (COMPETITION, TEAM, HOUSE),
        }
    )
    for path, shown in pages.items():
        r = await client.get(path)
        assert r.status == 200, path
        html = await r.text()
        assert_escaped(html, path, shown)
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    # In attributes and links too: the row of each bot, the link to its page.
    html = await (await client.get(f"/c/{cid}")).text()
    assert f'data-bot="{ESCAPED[HOUSE]}"' in html and f'data-bot="{ESCAPED[TEAM]}"' in html
    assert f'href="/c/{cid}/bots/{quote(HOUSE, safe="")}?run={rid}"' in html
    # The replay's data is JSON that cannot leave its <script> element.
    html = await (await client.get(f"/c/{cid}/runs/{rid}/games/0")).text()
    embedded = re.search(r'<script type="application/json" id="replay-data">(.*?)</script>', html, re.S)
    assert embedded and "<" not in embedded.group(1) and "\\u003cscript\\u003ealert(1)" in embedded.group(1)
    # An error page repeats what was asked for: escaped too.
    r = await client.get(f"/c/{cid}/bots/{quote('<img src=x onerror=alert(3)>', safe='')}")
    assert r.status == 404 and "text/html" in r.content_type
    text = await r.text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(3)&gt;" in text
    # The self-contained replay file.
    db = ServiceDB(db_path)
    run = db.run(rid)
    db.close()
    assert run is not None
    game = next((Path(run.out_dir) / "replays").glob("game-*.jsonl.gz"))
    html = standalone_html(frames(read_replay(game)), title=f"replay of {TEAM}")
    assert_escaped(html, "the replay file", (TEAM, HOUSE))


# ------------------------------------------------------ off the event loop


class LoopGuard:
    """Every SQLite connection made while installed refuses to work on the
    event loop's thread (and notes who tried)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.violations: list[str] = []
        guard = self
        connect = sqlite3.connect

        def check(what: str) -> None:
            if threading.get_ident() == guard.loop_thread:
                stack = "".join(traceback.format_stack(limit=12)[:-2])
                guard.violations.append(f"{what} on the event loop thread:\n{stack}")
                raise RuntimeError(f"SQLite {what} on the event loop thread")

        class Guarded(sqlite3.Connection):
            def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
                check("execute")
                return super().execute(*args, **kwargs)

            def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
                check("executemany")
                return super().executemany(*args, **kwargs)

            def executescript(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
                check("executescript")
                return super().executescript(*args, **kwargs)

            def cursor(self, *args: Any, **kwargs: Any) -> Any:
                check("cursor")
                return super().cursor(*args, **kwargs)

            def commit(self) -> None:
                check("commit")
                super().commit()

        def guarded_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            check("connect")
            kwargs.setdefault("factory", Guarded)
            return connect(*args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", guarded_connect)


async def test_no_sqlite_query_runs_on_the_event_loop(
    service: Service,
    admin_token: str,
    db_path: Path,
    bot_urls: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guard = LoopGuard(monkeypatch)
    with pytest.raises(RuntimeError, match="event loop thread"):
        sqlite3.connect(":memory:")  # the guard works
    guard.violations.clear()
    client = await service(submissions_per_window=2)
    admin = auth(admin_token)

    async def ok(method: str, path: str, status: int = 200, **kw: Any) -> Any:
        r = await client.request(method, path, **kw)
        assert r.status == status, f"{method} {path}: {r.status} {await r.text()}"
        return await r.json() if r.content_type == "application/json" else await r.text()

    body = {"name": "loop", "league": league(bot_urls["greedy"])}
    cid = (await ok("POST", "/api/competitions", 201, json=body, headers=admin))["id"]
    await ok("POST", "/api/competitions", 422, json=body, headers=admin)  # the name exists
    await ok("POST", "/api/competitions", 401, json=body, headers=auth("nobody"))
    team = await ok("POST", f"/api/competitions/{cid}/teams", 201, json={"name": "ada"}, headers=admin)
    tid, token = team["id"], team["token"]
    await ok("POST", f"/api/competitions/{cid}/teams", 403, json={"name": "b"}, headers=auth(token))
    bot = f"/api/competitions/{cid}/teams/{tid}/bot"
    await ok("PUT", bot, 403, json={"url": bot_urls["random"]}, headers=admin)
    await ok("PUT", bot, 201, json={"url": "http://127.0.0.1:9"}, headers=auth(token))
    await ok("PUT", bot, 201, json={"url": bot_urls["random"]}, headers=auth(token))
    await ok("PUT", bot, 429, json={"url": bot_urls["random"]}, headers=auth(token))
    await ok("GET", bot, headers=auth(token))
    assert (await settled(client, cid, tid, token, 2))["submission"]["status"] == "accepted"
    await ok("GET", f"/api/competitions/{cid}/teams/{tid}/submissions/1", headers=auth(token))
    await ok("GET", f"/api/competitions/{cid}/teams", headers=admin)
    for path in (
        "/",
        f"/c/{cid}",
        f"/c/{cid}/live",
        f"/c/{cid}/bots/ada",
        "/api/competitions",
        f"/api/competitions/{cid}",
        f"/api/competitions/{cid}/bots/house",
        f"/api/competitions/{cid}/runs",
    ):
        await ok("GET", path)
    events = await client.get(f"/api/competitions/{cid}/events")
    assert events.status == 200
    run = await ok("POST", f"/api/competitions/{cid}/runs", 202, headers=admin)
    await ok("POST", f"/api/competitions/{cid}/runs", 409, headers=admin)
    await wait_finished(client, cid)
    first = await asyncio.wait_for(events.content.readuntil(b"\n\n"), 10)
    assert first.startswith(b"event: update")
    # the live updates' poller looked at the finished run, computed its board and sent it
    await read_events(events, lambda d: d["run"] is not None and d["run"]["status"] == "finished")
    events.close()
    rid = run["id"]
    await ok("POST", f"/api/competitions/{cid}/runs/{rid}/stop", 409, headers=admin)
    for path in (
        f"/c/{cid}",
        f"/c/{cid}?run={rid}",
        f"/c/{cid}/live?run={rid}",
        f"/c/{cid}/bots/ada",
        f"/c/{cid}/bots/house?run={rid}",
        f"/c/{cid}/runs/{rid}/games/0",
        f"/api/competitions/{cid}",
        f"/api/competitions/{cid}/bots/ada",
        f"/api/competitions/{cid}/runs/{rid}/games",
        f"/api/competitions/{cid}/runs/{rid}/games?bot=ada",
        f"/api/competitions/{cid}/runs/{rid}/games/1",
        "/",
        "/api/competitions",
    ):
        await ok("GET", path)
    for path in (
        f"/c/{cid}/bots/nobody",
        f"/c/{cid}/runs/{rid}/games/99",
        f"/c/{cid + 1}",
        f"/api/competitions/{cid}/runs/{rid + 1}/games",
    ):
        await ok("GET", path, 404)
    await ok("POST", f"/api/competitions/{cid}/runs", 409, json={"resume": True}, headers=admin)
    await client.close()
    assert guard.violations == [], "\n\n".join(guard.violations)


def test_every_template_autoescapes_and_none_opts_out() -> None:
    from referee.web import pages

    env = pages.environment()
    names = env.list_templates()
    assert "base.html" in names and "replay.html" in names
    root = Path(pages.__file__).parent
    for name in names:
        assert callable(env.autoescape) and env.autoescape(name) is True, name
        source = (root / "templates" / name).read_text()
        assert "|safe" not in source.replace(" ", "") and "autoescape" not in source, name
    # Markup is made in one module only (the JSON for <script>, the inline assets).
    makers = sorted(p.name for p in root.rglob("*.py") if "Markup(" in p.read_text())
    assert makers == ["pages.py"]
    escaped = env.from_string("{{ name }}").render(name=TEAM)  # strings too
    assert escaped == ESCAPED[TEAM]
