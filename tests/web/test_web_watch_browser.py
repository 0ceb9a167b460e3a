"""A ladder game watched live in a real browser (issue 36): from the
leaderboard's "playing now" list to the game's page, move by move while the
test lets the bots answer, and no card that was hidden at that point of the
game ever reaches the page: neither its DOM nor any message its stream
delivered, checked against the game's record once it is over. Then the TV
page shows a game and the standings, and moves to the next game when it
ends. Its screenshot is ``docs/tv.png`` (the teacher's guide shows it)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from referee.replay import read as read_replay
from referee.service.store import ServiceDB
from referee.tournament.results import replay_path
from referee.web import Settings, make_app
from referee.web.app_state import ROOM
from tests.support.api import auth, submit
from tests.support.watch import Gate, gated_app, leaks
from tests.support.web import LOOPBACK, Background, new_admin_token

if os.environ.get("CI") != "true":
    pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[test]')")

LEAGUE = """
[tournament]
name = "ladder class"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[timeouts]
move_ms = 30000

[ladder]
concurrency = 2
catch_up = 4

[[bots]]
name = "house"
url = "{house}"
"""

#: Every stream the page opens, and each event it delivers, kept for the test to read.
CAPTURE = """
(function () {
  var Original = window.EventSource;
  window.__frames = [];
  var Capturing = function (url, options) {
    var source = new Original(url, options);
    ["frame", "over"].forEach(function (kind) {
      source.addEventListener(kind, function (ev) {
        window.__frames.push({url: String(url), kind: kind, data: JSON.parse(ev.data)});
      });
    });
    return source;
  };
  Capturing.prototype = Original.prototype;
  Capturing.CONNECTING = Original.CONNECTING; Capturing.OPEN = Original.OPEN; Capturing.CLOSED = Original.CLOSED;
  window.EventSource = Capturing;
}());
"""

#: What the page holds now: the events received so far and the cards its table shows.
LOOK = """() => ({
  frames: window.__frames.length,
  last: window.__frames.length ? window.__frames[window.__frames.length - 1] : null,
  cards: Array.from(document.querySelectorAll("#watch-game .watch-table .card")).map(function (e) { return e.textContent; }),
})"""


@pytest.fixture
def ladder(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An open ladder of a house bot and two teams, every bot's move held by one gate (closed)."""
    bg = Background()
    gate = Gate()
    try:
        house, ada, bob = (bg.serve(lambda: gated_app(gate)) for _ in range(3))
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        app = make_app(db_path, Settings(poll_s=0.05, min_update_s=0.05, bot_policy=LOOPBACK))
        base = bg.serve(lambda: app)

        async def setup() -> int:
            async with aiohttp.ClientSession(base) as client:
                r = await client.post(
                    "/api/competitions",
                    json={"name": "class", "league": LEAGUE.format(house=house)},
                    headers=auth(admin),
                )
                cid = int((await r.json())["id"])
                for name, url in (("ada", ada), ("bob", bob)):
                    r = await client.post(
                        f"/api/competitions/{cid}/teams", json={"name": name}, headers=auth(admin)
                    )
                    team = await r.json()
                    made = await submit(client, cid, team["id"], team["token"], {"url": url}, wait=False)
                    # the service is on this loop (the Background's): its pipeline says when the check is over
                    done = await app[ROOM].pipeline.wait_for(made["id"])
                    assert done.status == "accepted", done
                gate.open = False  # the ladder's moves wait for the test
                assert (await client.post(f"/api/competitions/{cid}/open", headers=auth(admin))).status == 202
                return cid

        cid = bg.call(setup, timeout=180)
        yield {"bg": bg, "gate": gate, "base": base, "cid": cid, "db": db_path}
    finally:
        bg.call(_release(gate))
        bg.close()


def _release(gate: Gate) -> Any:
    async def go() -> None:
        gate.release_all()

    return go


def step(bg: Background, gate: Gate) -> None:
    """Let the held requests be answered, and wait until a new one reaches a bot."""

    async def go() -> None:
        gate.moved.clear()
        gate.allow_held()
        await gate.moved.wait()

    bg.call(go)


@pytest.mark.slow
def test_a_ladder_game_watched_live_shows_no_hidden_card_and_the_tv_follows_the_games(
    browser: Any, ladder: dict[str, Any], docs_screenshot: Callable[[str], Path]
) -> None:
    from playwright.sync_api import expect

    bg, gate, base, cid = ladder["bg"], ladder["gate"], ladder["base"], ladder["cid"]
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.add_init_script(CAPTURE)
    page.goto(f"{base}/c/{cid}")
    link = page.locator("#playing a.watch-link").first
    expect(link).to_be_visible(timeout=30_000)
    link.click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/live/\d+$"))
    rid, idx = (int(x) for x in page.url.rsplit("/runs/", 1)[1].split("/live/"))

    looks: list[dict[str, Any]] = []
    seen = 0
    while True:
        page.wait_for_function("n => window.__frames.length > n", arg=seen, timeout=30_000)
        look = page.evaluate(LOOK)
        seen = look["frames"]
        looks.append(look)
        if look["last"]["kind"] == "over":
            break
        step(bg, gate)
    frames = [f["data"] for f in page.evaluate("window.__frames")]
    assert len(frames) > 5, "the game was followed move by move"
    assert all("you" not in f["state"] for f in frames)
    expect(page.locator("#watch-replay")).to_be_visible()
    expect(page.locator("#watch-game")).to_have_attribute("data-state", "over")

    db = ServiceDB(ladder["db"])
    try:
        run = db.run(rid)
    finally:
        db.close()
    assert run is not None

    async def recorded() -> Path:
        path = replay_path(run.out_dir, idx)
        while path is None or not path.exists():  # the ladder writes it once the game is over
            gate.moved.clear()
            gate.allow_held()
            await gate.moved.wait()
            path = replay_path(run.out_dir, idx)
        return path

    record = read_replay(bg.call(recorded))
    assert frames[-1]["places"] == record.result.places  # type: ignore[union-attr]
    assert leaks(frames, record) == [], "a message held a hidden card"
    # the DOM at each look: the table's cards as the game stood at the last frame received
    dom = [
        {
            "since": l["last"]["data"]["since"],
            "state": {"table": l["cards"], "events": l["last"]["data"]["state"]["events"]},
        }
        for l in looks
    ]
    assert leaks(dom, record) == [], "the page showed a hidden card"

    # the TV page: a game and the standings, then the next game
    tv = browser.new_page(viewport={"width": 1400, "height": 850})
    tv.goto(f"{base}/c/{cid}/tv")
    screen = tv.locator("#tv")
    expect(screen).to_have_attribute("data-state", "watching", timeout=30_000)
    first = screen.get_attribute("data-game")
    expect(tv.locator("#tv .tv-standings table.standings")).to_be_visible()
    for _ in range(12):
        step(bg, gate)
    expect(tv.locator("#tv-game .watch-table .player")).to_have_count(2)
    tv.screenshot(path=str(docs_screenshot("tv.png")))  # docs/tv.png with --update-golden
    bg.call(_release(gate))
    expect(screen).not_to_have_attribute("data-game", first or "", timeout=60_000)
