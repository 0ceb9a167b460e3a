"""The replay viewer as one self-contained file (its data: :func:`referee.replay.frames`)."""

from __future__ import annotations

from typing import Any

import msgspec



def json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``,
    no ``<!--``, no line separators can break out."""
    text = msgspec.json.encode(data).decode()
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def standalone_html(data: dict[str, Any], title: str = "") -> str:
    """The replay viewer as one self-contained HTML file (styles, script and data inline)."""
    from .pages import replay_page

    return replay_page(data, title=title or f"replay {data['game_id']}", standalone=True)
