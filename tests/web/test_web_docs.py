"""The rules and the protocol served by the service, a competition's own
settings above its rules, the starter kits behind the team's session
(issue 26, items 1 and 2). Real HTTP on loopback against the real app."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from referee.web.handlers.docs import render_markdown
from tests.support.api import auth, new_team

ROOT = Path(__file__).resolve().parents[2]
Service = Callable[..., Awaitable[Any]]

HOSTILE = "<script>alert(1)</script> class"
LEAGUE = """\
[tournament]
name = "<script>alert(2)</script>"
table_size = 3

[rules]
deck = "italian"
reverses = true
one_draw_per_clear2 = true
turn_limit = 400

[timeouts]
move_ms = 1500
bank_ms = 3000
start_ms = 4000

[faults]
strikes = 2
"""


async def new_competition(client: Any, admin: str, name: str = "class", league: str = LEAGUE) -> int:
    r = await client.post("/api/competitions", json={"name": name, "league": league}, headers=auth(admin))
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])


def assert_safe_page(html: str, where: str) -> None:
    """No inline script or style (the CSP forbids them), no script but the app's."""
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/app.js">'], where
    assert " style=" not in html and "<style" not in html, where
    assert "<script>alert" not in html, where


async def test_the_rules_and_the_protocol_are_pages_of_the_service(service: Service) -> None:
    client = await service()
    r = await client.get("/rules")
    assert r.status == 200 and r.content_type == "text/html"
    assert "script-src" in r.headers["Content-Security-Policy"]
    html = await r.text()
    assert_safe_page(html, "/rules")
    assert "<h1>3UP 3DOWN — the rules the referee enforces</h1>" in html
    assert "<h2>9. Variants (all off by default)</h2>" in html
    assert "<strong>V1 Play for places</strong>" in html and "<strong>[D17]</strong>" in html
    assert "project's copy" in html  # the note saying where the authority came from
    r = await client.get("/protocol")
    assert r.status == 200
    html = await r.text()
    assert_safe_page(html, "/protocol")
    assert "<h1>The bot protocol, version 1 — the core</h1>" in html
    assert "<code>X-Referee-Signature" in html
    # every page links both
    assert 'href="/rules"' in html and 'href="/protocol"' in html


def test_the_docs_are_the_projects_copies_of_the_shared_ones() -> None:
    for name in ("rules", "protocol"):
        text = (ROOT / "docs" / f"{name}.md").read_text()
        assert f"The project's copy of `{name.upper()}.md`" in text
        assert "not part of the repository" in text  # where the authority came from
        assert "../" not in text  # no page points outside the repository (tests/test_docs.py)


def test_markdown_is_rendered_with_raw_html_escaped_and_unsafe_links_refused() -> None:
    html = render_markdown(
        "# T\n\n<script>alert(1)</script> <b onclick=x>b</b>\n\n"
        "[click](javascript:alert(1)) [ok](https://example.org/)\n"
    )
    assert "<script" not in html and "<b onclick" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "javascript:" not in html.replace("[click](javascript:alert(1))", "")
    assert 'href="javascript' not in html and '<a href="https://example.org/">ok</a>' in html


async def test_a_competitions_rules_show_its_variants_and_timeouts_escaped(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token, HOSTILE)
    r = await client.get(f"/c/{cid}/rules")
    assert r.status == 200
    html = await r.text()
    assert_safe_page(html, f"/c/{cid}/rules")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; class" in html
    settings = html.split('id="settings"', 1)[1].split("</table>", 1)[0]
    rows = dict(
        re.findall(
            r"<td class=\"l\">([^<]+)</td><td class=\"l\">[^<]+</td><td class=\"l[^\"]*\">([^<]+)</td>",
            settings,
        )
    )
    assert rows["V1"] == "on"  # a league file's default: play for places
    assert rows["V2"] == "off" and rows["V4"] == "off" and rows["V5"] == "off" and rows["V6"] == "off"
    assert rows["V3"] == "on" and rows["V8"] == "on"
    assert rows["V7"] == "on" and rows["[D1]"] == "italian: 3 colours (RYG), 74 cards"
    assert rows["[D12]"] == "400 turns" and rows["players"] == "3"
    assert rows["move_ms"] == "1500 ms" and rows["bank_ms"] == "3000 ms" and rows["start_ms"] == "4000 ms"
    assert rows["end_ms"] == "2000 ms" and rows["faults"] == "out at strike 2 of a game"
    # then the rules themselves
    assert html.index('id="settings"') < html.index("<h2>9. Variants (all off by default)</h2>")
    # a competition with the defaults says so
    plain = await new_competition(client, admin_token, "plain", '[tournament]\nname = "plain"\n')
    html = await (await client.get(f"/c/{plain}/rules")).text()
    assert ">V3</td>" in html and "1000 ms" in html and "out at strike 3 of a game" in html
    assert (await client.get("/c/999/rules")).status == 404
    # the leaderboard links its rules
    board = await (await client.get(f"/c/{cid}")).text()
    assert f'href="/c/{cid}/rules"' in board and 'href="/protocol"' in board


async def sign_in(client: Any, token: str) -> None:
    origin = {"Origin": str(client.make_url("")).rstrip("/")}
    r = await client.post("/login", data={"token": token}, headers=origin, allow_redirects=False)
    assert r.status == 303, await r.text()


def kit_files(kit: str) -> dict[str, bytes]:
    folder = ROOT / "starter_kits" / kit
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


async def test_the_kit_download_needs_the_teams_session_and_holds_the_kit_and_its_settings(
    service: Service, admin_token: str
) -> None:
    client = await service()
    cid = await new_competition(client, admin_token)
    _, token = await new_team(client, admin_token, cid, "ada")
    for kit in ("python", "node"):
        r = await client.get(f"/team/kit/{kit}.zip", allow_redirects=False)
        assert r.status == 303 and r.headers["Location"] == "/login"
        r = await client.get(f"/team/kit/{kit}.zip", headers=auth(token), allow_redirects=False)
        assert r.status == 303  # a bearer token is the API's: the page's download is the session's
    await sign_in(client, token)
    for kit, top in (("python", "my-python-bot"), ("node", "my-node-bot")):
        r = await client.get(f"/team/kit/{kit}.zip")
        assert r.status == 200 and r.content_type == "application/zip", await r.text()
        assert r.headers["Content-Disposition"] == f'attachment; filename="{top}.zip"'
        with zipfile.ZipFile(io.BytesIO(await r.read())) as z:
            got = {n: z.read(n) for n in z.namelist()}
        want = {f"{top}/{n}": data for n, data in kit_files(kit).items()}
        settings = got.pop(f"{top}/SETTINGS.md").decode()
        assert got == want
        assert "| V3 | reverses (a play with 1s turns the direction) | on |" in settings
        assert "| move_ms | time for each /act reply, round trip included | 1500 ms |" in settings
        assert f"/c/{cid}/rules" in settings
    assert (await client.get("/team/kit/ruby.zip")).status == 404
    page = await (await client.get("/team")).text()
    assert 'href="/team/kit/python.zip"' in page and 'href="/team/kit/node.zip"' in page
    assert "python bot.py --port 8001" in page and "referee check http://127.0.0.1:8001" in page
    assert f'href="/c/{cid}/rules"' in page


def test_every_decision_tag_of_the_rules_is_cited_by_a_test() -> None:
    """Each [D#] of docs/rules.md is pinned by some test that names it."""
    tags = sorted(
        set(re.findall(r"\[(D\d+)\]", (ROOT / "docs" / "rules.md").read_text())), key=lambda t: int(t[1:])
    )
    assert len(tags) >= 17
    here = Path(__file__).resolve()
    cited = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.resolve() != here)
    # cited as "[D12]" in a docstring or in a test's name: test_D12_turn_limit
    missing = [t for t in tags if not re.search(rf"(?<![A-Za-z0-9]){t}(?![0-9])", cited)]
    assert not missing, f"no test cites {', '.join(missing)}"
