"""The replay viewer as one self-contained HTML file (``referee replay GAME
--html OUT``): the page the service shows, with its stylesheet, its script
and the game (:func:`referee.replay.frames`) inline."""

from __future__ import annotations

from typing import Any

from .pages import environment


def standalone_html(data: dict[str, Any], title: str = "") -> str:
    """The viewer of ``data`` (the replay's frames) as one file: nothing is loaded from anywhere."""
    template = environment().get_template("replay.html")
    return template.render(data=data, title=title or f"replay {data['game_id']}", standalone=True)
