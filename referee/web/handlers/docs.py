"""The rules and the protocol as pages of the service, a competition's own
settings above its rules, and the starter kits as downloads (issue 26, items
1 and 2).

- ``/rules`` and ``/protocol``: ``docs/rules.md`` and ``docs/protocol.md``
  of the repository, rendered server-side by markdown-it-py with raw HTML
  **off** (an ``<`` in the text is escaped, never markup) and its link
  validation (no ``javascript:`` link); no inline script or style, so the
  service's CSP holds.
- ``/c/{cid}/rules``: the competition's own variant flags (V1–V8), deck,
  turn limit, time limits and fault policy from its league file, then the
  rules.
- ``/team/kit/python.zip`` and ``/team/kit/node.zip`` (the signed-in team
  only): the files of ``starter_kits/<kit>/`` in one top folder, zipped in
  memory, with a ``SETTINGS.md`` of the team's competition's settings. The
  archive is what the service's source build accepts as it is (``bot.py``,
  or ``package.json`` and ``bot.js``, in its single top folder).
"""

from __future__ import annotations

import asyncio
import functools
import io
import zipfile
from pathlib import Path
from typing import Final

import msgspec
from aiohttp import web
from markupsafe import Markup

from protocol.messages import DECK_PRESETS

from ...service.runs import check_league_text
from ...service.store import Competition, ServiceDB
from ...tournament.league import League, LeagueError
from .. import pages
from ..app_state import ROOM
from ..errors import fail
from .common import competition_of

ROOT: Final = Path(__file__).resolve().parents[3]
#: The project's copies of the rules and the protocol.
DOCS_DIR: Final = ROOT / "docs"
#: The starter kits, one folder each.
KITS_DIR: Final = ROOT / "starter_kits"
#: The kits offered for download: the folder under starter_kits/ -> the top folder in the zip.
KITS: Final = {"python": "my-python-bot", "node": "my-node-bot"}
#: The documents served, by path.
DOCS: Final = {"rules": ("rules.md", "The rules"), "protocol": ("protocol.md", "The bot protocol")}


class Setting(msgspec.Struct, frozen=True):
    """One line of a competition's settings: its tag (V1, [D12], ...), what it is, its value."""

    tag: str
    what: str
    value: str


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def competition_settings(league: League) -> list[Setting]:
    """What a bot author must know of a competition: the variants (RULES §9),
    the deck, the turn limit, the time limits and the fault policy."""
    r, t, f = league.rules, league.timeouts, league.faults
    try:
        deck = r.resolved_deck()
        deck_text = (
            f"{r.deck if isinstance(r.deck, str) else 'its own'}: {len(deck.colours)} colours "
            f"({deck.colours}), {deck.size()} cards"
        )
        smaller = len(deck.colours) < len(DECK_PRESETS["standard"].colours)
    except ValueError as e:  # cannot happen for a checked league; said rather than hidden
        deck_text, smaller = str(e), False
    return [
        Setting("V1", "play for places (go on after the first player is out)", _on(r.play_for_places)),
        Setting("V2", "draw instead of playing", _on(r.draw_instead_of_playing)),
        Setting("V3", "reverses (a play with 1s turns the direction)", _on(r.reverses)),
        Setting("V4", "scoring (the cards still held are scored)", _on(r.scoring)),
        Setting("V5", "pile swap (two random players exchange 3UP and 3DOWN)", _on(r.pile_swap)),
        Setting("V5b", "sabotage (swap a hand card with another's 3UP card)", _on(r.sabotage)),
        Setting("V6", "colour run (4 of one colour on top: may swap own 3UP and hand)", _on(r.colour_run)),
        Setting("V7", "smaller deck (fewer colours)", _on(smaller)),
        Setting("V8", "one draw per Clear+2", _on(r.one_draw_per_clear2)),
        Setting("[D1]", "deck", deck_text),
        Setting("[D12]", "turn limit (then the game is adjudicated)", f"{r.turn_limit} turns"),
        Setting("players", "players per game", str(league.tournament.table_size)),
        Setting("move_ms", "time for each /act reply, round trip included", f"{t.move_ms} ms"),
        Setting(
            "bank_ms",
            "time bank (what is left is sent as bank_ms)",
            f"{t.bank_ms} ms" if t.bank_ms else "none",
        ),
        Setting("start_ms", "time for the /start reply", f"{t.start_ms} ms"),
        Setting("end_ms", "time for the /end reply", f"{t.end_ms} ms"),
        Setting(
            "faults",
            "what faults cost (each is a strike; the referee plays a safe action instead)",
            "out at the first fault"
            if f.forfeit_on_first
            else (f"out at strike {f.strikes} of a game" if f.strikes > 0 else "never out"),
        ),
    ]


def render_markdown(text: str) -> str:
    """`text` as HTML: raw HTML in it escaped, unsafe links (``javascript:``...) left as text."""
    return str(pages.markdown(text))


@functools.cache
def doc_html(name: str) -> Markup:
    """``docs/<name>.md`` as HTML (read and rendered once, by :func:`pages.markdown`)."""
    filename, _ = DOCS[name]
    return pages.markdown((DOCS_DIR / filename).read_text(encoding="utf-8"))


async def _doc(name: str) -> Markup:
    try:
        return await asyncio.to_thread(doc_html, name)
    except FileNotFoundError:  # an install without the repository's docs/ (pip install of a wheel)
        fail(
            404,
            f"docs/{DOCS[name][0]} is not installed with this copy of the referee: it is in the "
            "repository's docs/ folder (run the service from a checkout, or pip install -e)",
        )


async def _league_of(comp: Competition) -> League | None:
    try:
        return await asyncio.to_thread(check_league_text, comp.league_toml)
    except LeagueError:  # checked when it was made: only an older release's league could fail
        return None


async def doc_page(request: web.Request) -> web.Response:
    """``/rules``, ``/protocol``."""
    name = request.path.strip("/")
    _, title = DOCS[name]
    body = await _doc(name)
    return pages.render(request, "docs.html", {"title": title, "body": body, "comp": None, "settings": []})


async def competition_rules_page(request: web.Request) -> web.Response:
    """``/c/{cid}/rules``: the competition's settings, then the rules."""
    comp = await competition_of(request)
    league = await _league_of(comp)
    body = await _doc("rules")
    return pages.render(
        request,
        "docs.html",
        {
            "title": f"{comp.name}: rules",
            "body": body,
            "comp": comp,
            "settings": competition_settings(league) if league is not None else [],
        },
    )


def settings_markdown(comp: Competition, league: League | None) -> str:
    """The ``SETTINGS.md`` of a kit: the competition's settings as a table."""
    lines = [
        f"# {comp.name}: the competition's settings",
        "",
        "What your bot plays under in this competition (from its league file). The full rules",
        "are at /rules on the service (this competition's: /c/%d/rules), the protocol at" % comp.id,
        "/protocol. `referee check` checks a bot against the default settings.",
        "",
    ]
    if league is None:
        return "\n".join([*lines, "(The competition's league file could not be read: ask the teacher.)", ""])
    lines += ["| | setting | value |", "|---|---|---|"]
    lines += [f"| {s.tag} | {s.what} | {s.value} |" for s in competition_settings(league)]
    return "\n".join([*lines, ""])


def kit_zip(kit: str, settings_md: str) -> bytes:
    """The kit's files under one top folder, and SETTINGS.md, as a zip."""
    top = KITS[kit]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted((KITS_DIR / kit).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                z.write(path, f"{top}/{path.relative_to(KITS_DIR / kit).as_posix()}")
        z.writestr(f"{top}/SETTINGS.md", settings_md)
    return buf.getvalue()


async def kit_download(request: web.Request) -> web.Response:
    """``/team/kit/{kit}.zip``: the signed-in team's (a redirect to sign in otherwise)."""
    from .team_pages import signed_in_or_login

    who = await signed_in_or_login(request)
    kit = request.match_info["kit"]
    if kit not in KITS:
        fail(404, f"no starter kit {kit[:40]!r}: there are {', '.join(KITS)}")
    if not (KITS_DIR / kit).is_dir():
        fail(
            404,
            "the starter kits are not installed with this copy of the referee: they are in the "
            "repository's starter_kits/ folder (run the service from a checkout, or pip install -e)",
        )
    comp = await request.app[ROOM].db.call(ServiceDB.competition, who.team.competition_id)
    assert comp is not None
    data = await asyncio.to_thread(kit_zip, kit, settings_markdown(comp, await _league_of(comp)))
    return web.Response(
        body=data,
        content_type="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="{KITS[kit]}.zip"',
            "Cache-Control": "no-store",
        },
    )


__all__ = [
    "KITS",
    "Setting",
    "competition_rules_page",
    "competition_settings",
    "doc_page",
    "kit_download",
    "kit_zip",
    "render_markdown",
    "settings_markdown",
]
