"""The pages' stylesheet, script and icon: files in ``referee/web/static/``
(package data), served by the app under ``/static/`` (and ``/favicon.*``)
and inlined in the self-contained replay file. No build step, no CDN.

The script (``static/app.js``) never puts data into ``innerHTML``: it builds
elements and sets ``textContent``; the only ``innerHTML`` it sets is HTML
rendered (and escaped) by the server.
"""

from __future__ import annotations

from importlib.resources import files


def _static(name: str) -> str:
    """The text of ``referee/web/static/<name>`` (read once, at import)."""
    return (files("referee.web") / "static" / name).read_text(encoding="utf-8")


#: ``/static/style.css``, also inlined in a replay file.
CSS = _static("style.css")
#: ``/static/app.js``, also inlined in a replay file.
JS = _static("app.js")
#: ``/static/seat.js``: a team member's seat at a practice game (the page ``/team/practice/{pid}/play``).
SEAT_JS = _static("seat.js")
#: ``/static/table.js``: a game's table drawn from a protocol state (the seat's page and the watchers').
TABLE_JS = _static("table.js")
#: ``/static/watch.js``: games watched live, the TV page, the "playing now" lists.
WATCH_JS = _static("watch.js")

# ---------------------------------------------------------------- favicon

#: The pages' icon: three cards, up and down (served at ``/favicon.svg``).
FAVICON_SVG = _static("favicon.svg")


def _favicon_ico() -> bytes:
    """The same icon as a 16×16 ICO (what ``/favicon.ico`` answers): drawn
    here, so the service needs no binary file and no other origin."""
    import struct

    size = 16
    colours = [(0x1D, 0x23, 0x30), (0xFF, 0xFF, 0xFF), (0x9D, 0xB4, 0xEA), (0xD9, 0x2D, 0x20)]

    def pixel(x: int, y: int) -> tuple[int, int, int, int]:
        if 3 <= y < 13:
            for i, x0 in enumerate((2, 6, 10)):
                if x0 <= x < x0 + 4:
                    r, g, b = colours[i + 1]
                    return b, g, r, 255
        r, g, b = colours[0]
        return b, g, r, 255

    rows = [bytes(c for x in range(size) for c in pixel(x, y)) for y in reversed(range(size))]  # bottom-up
    xor = b"".join(rows)
    mask = bytes(4 * size)  # 1 bit a pixel, rows padded to 4 bytes: all opaque
    header = struct.pack("<IiiHHIIiiII", 40, size, 2 * size, 1, 32, 0, len(xor) + len(mask), 0, 0, 0, 0)
    image = header + xor + mask
    return (
        struct.pack("<HHH", 0, 1, 1)
        + struct.pack("<BBBBHHII", size, size, 0, 0, 1, 32, len(image), 22)
        + image
    )


FAVICON_ICO = _favicon_ico()
