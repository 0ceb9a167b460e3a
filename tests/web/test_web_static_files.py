"""The pages' stylesheet, script and icon are files of the package
(``referee/web/static/``): served as they are, inlined as they are in a
replay file, and listed in the package data so an installed wheel has them."""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from referee.web import pages

STATIC = Path(__file__).resolve().parents[2] / "referee" / "web" / "static"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


async def test_the_files_are_served_byte_for_byte(service: Callable[..., Awaitable[Any]]) -> None:
    client = await service()
    for url, name, kind in (
        ("/static/style.css", "style.css", "text/css"),
        ("/static/app.js", "app.js", "application/javascript"),
        ("/favicon.svg", "favicon.svg", "image/svg+xml"),
    ):
        resp = await client.get(url)
        assert resp.status == 200, url
        assert resp.content_type == kind, url
        assert await resp.read() == (STATIC / name).read_bytes(), url


def test_a_replay_file_inlines_the_same_files() -> None:
    """A self-contained page (``standalone``: the replay file) inlines them."""
    html = pages.environment().from_string('{% extends "base.html" %}').render(standalone=True)
    assert (STATIC / "style.css").read_text() in html
    # the script is inlined with "</" escaped (no early end of the <script>)
    assert (STATIC / "app.js").read_text().replace("</", "<\\/") in html


def test_every_static_file_is_package_data() -> None:
    """A file not matched by pyproject's package-data would be missing from a wheel."""
    data = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["referee"]
    files = sorted(p.relative_to(STATIC.parents[1]).as_posix() for p in STATIC.iterdir() if p.is_file())
    assert files, "no static files found"
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in data)]
    assert missing == []
