"""Server-rendered HTML: the Jinja2 templates of ``referee/web/templates/``,
through aiohttp-jinja2.

Autoescape is on for every ``.html`` template: a value written with
``{{ ... }}`` is escaped unless it is markup already (a macro, a block, the
filters below that make markup). Team and bot names are untrusted; no Python
code here builds HTML from them. The escaping is :func:`html.escape` with
quotes (the environment's ``finalize``), as the pages have always been.

The only markup made outside the templates: :func:`json_for_script` (the
data a page's script reads) and the inline stylesheet and script of the
self-contained replay file, both constants or JSON escaped for ``<script>``.
"""

from __future__ import annotations

import functools
import html
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp_jinja2
import jinja2
import msgspec
from aiohttp import web
from markupsafe import Markup

from ..tournament.ratings import Standing
from .app_state import STREAM_RETRY_S
from .assets import CSS, JS
from .charts import rating_chart, sigma_bars


def json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``,
    no ``<!--``, no line separators can break out."""
    text = msgspec.json.encode(data).decode()
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# ------------------------------------------------------------------ filters


def _escape(value: Any) -> Any:
    """Every ``{{ value }}``: markup as it is, anything else escaped."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value), quote=True))


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _when(t: float | None) -> str:
    return "–" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _segment(value: object) -> str:
    """A path segment (a bot's name in a URL)."""
    return quote(str(value), safe="")


def _script_json(data: Any) -> Markup:
    return Markup(json_for_script(data))


def _inline_script(js: str) -> Markup:
    """A script inline in ``<script>``: no ``</`` can end it early."""
    return Markup(js.replace("</", "<\\/"))


def _inline_style(css: str) -> Markup:
    if "</" in css:
        raise ValueError("a stylesheet inline in <style> must not contain '</'")
    return Markup(css)


FILTERS: dict[str, Callable[..., str]] = {
    "num": _num,
    "when": _when,
    "segment": _segment,
    "script_json": _script_json,
    "inline_script": _inline_script,
    "inline_style": _inline_style,
}
GLOBALS = {
    "zip": zip,
    "sigma_bars": sigma_bars,
    "rating_chart": rating_chart,
    "css": CSS,
    "js": JS,
    "retry_s": STREAM_RETRY_S,
}


def _options() -> dict[str, Any]:
    return {
        "loader": jinja2.PackageLoader("referee.web", "templates"),
        "autoescape": jinja2.select_autoescape(["html"]),
        "finalize": _escape,
        "undefined": jinja2.StrictUndefined,
        "trim_blocks": True,
        "lstrip_blocks": True,
    }


async def banner_context(request: web.Request) -> dict[str, Any]:
    """A template context processor: the banner on the admin pages while the service is degraded."""
    from .app_state import ROOM

    room = request.app.get(ROOM)
    # the admin's pages (a page under /admin is rendered only for the signed-in admin), not the form
    shown = request.path.startswith("/admin") and request.path != "/admin/login"
    return {"service_banner": room.health.banner() if room is not None and shown else None}


def setup(app: web.Application) -> None:
    """The app's template environment (aiohttp-jinja2)."""
    env = aiohttp_jinja2.setup(
        app, default_helpers=False, filters=FILTERS, context_processors=[banner_context], **_options()
    )
    env.globals.update(GLOBALS)


@functools.cache
def environment() -> jinja2.Environment:
    """The same environment outside the app (the self-contained replay file)."""
    env = jinja2.Environment(**_options())
    env.filters.update(FILTERS)
    env.globals.update(GLOBALS)
    return env


# ---------------------------------------------------------------- rendering


def render(request: web.Request, template: str, context: Mapping[str, Any]) -> web.Response:
    """A page: ``template`` rendered with ``context``, as text/html."""
    return aiohttp_jinja2.render_template(template, request, context)


def render_string(request: web.Request, template: str, context: Mapping[str, Any]) -> str:
    return aiohttp_jinja2.render_string(template, request, context)


def rendered(part: bytes) -> Markup:
    """A part of a page this module rendered (autoescaped) and cached as
    bytes, put into another page as it is."""
    return Markup(part.decode())


def standings_table(cid: int, standings: Sequence[Standing], run_id: int | None) -> str:
    """The leaderboard's standings table alone."""
    macros = environment().get_template("macros.html").module
    return str(macros.standings_table(cid, standings, run_id))  # type: ignore[attr-defined]


@functools.cache
def _markdown_it() -> Any:
    from markdown_it import MarkdownIt

    # CommonMark with tables; html=False: raw HTML in the text is escaped, and
    # its link validation leaves javascript:, vbscript:, data: (but images) as text.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def markdown(text: str) -> Markup:
    """Markdown (the project's docs, ``/rules`` and ``/protocol``) as HTML:
    no raw HTML, no unsafe link, no inline script or style."""
    return Markup(_markdown_it().render(text))
